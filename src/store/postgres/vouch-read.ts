/**
 * The PostgreSQL side of ../vouch.ts: the record, its run index line, its timeline and the workspace
 * its row sends a worker to, read in one statement, then judged by the pure check.
 */
import {PipeError} from '../../errors.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import {auditKey} from '../trail/integrity.js'
import {safeUrl} from '../location.js'
import {vouchFindings} from '../trail/vouch.js'
import type {PostgresRecords} from './records.js'
import {parseRow} from './rows.js'

type Plain = Record<string, unknown>

/** The record the trail vouches for, or E_INTEGRITY naming each field that does not hold. */
export async function vouchRun(store: Pick<PostgresRecords, 'query' | 'url'>, runId: string): Promise<RunRecord> {
  // One statement, so one snapshot: the record, its index line and its timeline read apart could
  // straddle another process's commit (a person's answer, a holder's step) and read as a forgery.
  const rows = await store.query<{
    body: string
    workspace_id: string | null
    workspace_root: string | null
    workspace_sub: string | null
    index_line: string | null
    events: Array<{n: number; line: string}>
  }>(
    `cannot read run ${runId}`,
    `SELECT r.body, r.workspace_id, r.workspace_root, r.workspace_sub,
            (SELECT i.line FROM pipe_run_index i WHERE i.run_id = r.run_id) AS index_line,
            (SELECT coalesce(json_agg(json_build_object('n', e.n, 'line', e.line) ORDER BY e.n), '[]'::json)
               FROM pipe_events e WHERE e.run_id = r.run_id) AS events
       FROM pipe_runs r WHERE r.run_id = $1`,
    [runId],
  )
  const row = rows[0]
  if (!row) throw new PipeError('E_NOT_FOUND', `run ${runId} not found in ${safeUrl(store.url)}`, {hint: 'pipe runs list shows the runs of this store.'})
  const record = parseRow<RunRecord>('run', row.body, `the run record of ${runId}`, `pipe_runs(${runId})`)
  const findings = vouchFindings({
    record,
    events: timelineOf(runId, row.events),
    indexLine: row.index_line === null ? null : (JSON.parse(row.index_line) as Plain),
    workspace: row.workspace_id === null ? null : {id: row.workspace_id, root: row.workspace_root ?? '', sub: row.workspace_sub ?? ''},
    key: auditKey(),
  })
  if (findings.length === 0) return record
  throw new PipeError('E_INTEGRITY', `run ${runId} is not what its trail vouches for: ${findings.map((f) => `${f.field} ${f.message}`).join('; ')}`, {
    hint: findings.some((f) => f.noKey)
      ? 'Nothing of it was run. Its records are sealed with the audit key: set PIPE_AUDIT_KEY as the workers of the team have it (docs/team.md), and run the command again.'
      : `Nothing of it was run. pipe audit verify ${runId} names what was changed in pipe_runs; restore its row from a backup, and a worker takes it again (or pipe cancel ${runId} once it is restored, and start a new run).`,
  })
}

/** A run's timeline lines (in order) as events; a line that is not JSON was changed outside pipe. */
export function timelineOf(runId: string, rows: ReadonlyArray<{n: number; line: string}>): RunEvent[] {
  return rows.map((r) => {
    try {
      return JSON.parse(r.line) as RunEvent
    } catch {
      throw new PipeError('E_INTEGRITY', `line ${r.n} of the timeline of ${runId} is not valid JSON (pipe_events)`, {
        hint: 'It was changed outside pipe; run pipe audit verify to see all damage.',
      })
    }
  })
}
