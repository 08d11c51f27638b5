/**
 * The PostgreSQL store's part of pipe store archive (app/archive.ts has the logic, trail/archive.ts
 * the format): it reads a run's rows as kept, anchors each run that leaves in the run index, and
 * deletes a run's rows once its anchor is there (the database refuses it before: schema.ts, 7).
 * Persistence only.
 */
import {rmSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {referencedIds, type ArchiveAnchor, type ArchiveSource} from '../trail/archive.js'
import {sealLine} from '../trail/integrity.js'
import {lineText} from '../trail/records.js'
import {isObject} from '../trail/shapes.js'
import type {ArchiveStore} from '../types.js'
import {artifactFiles} from '../file/as-kept.js'
import {PostgresRecords} from './records.js'

/** An anchor's run index row: the run's own row keeps its id, so the anchor's is marked. */
export const anchorKey = (runId: string): string => `archived:${runId}`

export class PostgresArchive implements ArchiveStore {
  /** `root`: the store's local folder, where the runs' live artifacts are. */
  constructor(
    private readonly store: PostgresRecords,
    private readonly root: string,
  ) {}

  /** The store's local folder is this machine's cache, not the team's: archives go where the person says. */
  readonly defaultFolder = null

  private get artifactsDir(): string {
    return path.join(this.root, 'artifacts', 'runs')
  }

  async source(runIds: readonly string[]): Promise<ArchiveSource> {
    const q = <R extends Record<string, unknown>>(text: string, values: unknown[] = []): Promise<R[]> =>
      this.store.query<R>('cannot read the runs to archive', text, values)
    const ids = [...runIds]
    const bodies = new Map(
      (await q<{run_id: string; body: string}>('SELECT run_id, body FROM pipe_runs WHERE run_id = ANY($1)', [ids])).map((r) => [r.run_id, r.body]),
    )
    const events = await q<{run_id: string; line: string}>('SELECT run_id, line FROM pipe_events WHERE run_id = ANY($1) ORDER BY run_id, n', [ids])
    const snapshots = await q<{run_id: string; seq: number; body: string}>(
      'SELECT run_id, seq, body FROM pipe_snapshots WHERE run_id = ANY($1) ORDER BY run_id, seq',
      [ids],
    )
    const states = await q<{run_id: string; step: string; seq: number; body: string}>(
      'SELECT run_id, step, seq, body FROM pipe_step_state WHERE run_id = ANY($1) ORDER BY run_id, seq, step',
      [ids],
    )
    const runs = ids.flatMap((runId) => {
      const body = bodies.get(runId)
      if (body === undefined) return []
      return [
        {
          run_id: runId,
          body,
          events: events.filter((e) => e.run_id === runId).map((e) => e.line),
          snapshots: snapshots.filter((s) => s.run_id === runId).map((s) => ({seq: s.seq, body: s.body})),
          states: states.filter((s) => s.run_id === runId).map((s) => ({step: s.step, seq: s.seq, body: s.body})),
        },
      ]
    })
    const named = referencedIds(runs)
    const records = async (table: string, key: string, wanted: string[]): Promise<Array<{id: string; body: string}>> =>
      q<{id: string; body: string}>(`SELECT ${key} AS id, body FROM ${table} WHERE ${key} = ANY($1) ORDER BY ${key}`, [wanted])
    return {
      runs,
      specs: await records('pipe_specs', 'version', named.records),
      evidence: await records('pipe_evidence', 'id', named.records),
      features: await records('pipe_features', 'id', named.features),
      runIndex: (await q<{line: string}>('SELECT line FROM pipe_run_index ORDER BY pos')).map((r) => r.line),
      ledger: await q<{key: string; body: string}>('SELECT key, body FROM pipe_ledger ORDER BY key'),
      ledgerLog: (await q<{line: string}>('SELECT line FROM pipe_ledger_log ORDER BY pos')).map((r) => r.line),
      artifacts: ids.flatMap((runId) => artifactFiles(this.artifactsDir, runId)),
    }
  }

  async anchors(): Promise<ArchiveAnchor[]> {
    const rows = await this.store.query<{line: string}>(
      'cannot read the run index',
      "SELECT line FROM pipe_run_index WHERE run_id LIKE 'archived:%' ORDER BY pos",
    )
    return rows.flatMap((r) => {
      try {
        const value: unknown = JSON.parse(r.line)
        return isObject(value) && typeof value.archived === 'string' ? [value as unknown as ArchiveAnchor] : []
      } catch {
        return []
      }
    })
  }

  async anchor(anchors: readonly ArchiveAnchor[]): Promise<void> {
    await this.store.tx('cannot anchor the archived runs in the run index', async (client) => {
      for (const a of anchors) {
        // The index's chain is linear: its counter row orders this line after every run created before it.
        const done = await client.query('SELECT 1 FROM pipe_run_index WHERE run_id = $1', [anchorKey(a.archived)])
        if (done.rows.length > 0) continue
        const pos = await PostgresRecords.nextNumber(client, 'run-index')
        const prev = pos > 1 ? (await client.query<{line: string}>('SELECT line FROM pipe_run_index WHERE pos = $1', [pos - 1])).rows[0] : undefined
        if (pos > 1 && !prev)
          throw new PipeError('E_INTEGRITY', `the run index has no line ${pos - 1}`, {hint: 'Lines of the run index were removed; run pipe audit verify.'})
        const line = lineText(sealLine({...a}, prev ? (JSON.parse(prev.line) as {hash: string}).hash : null))
        await client.query('INSERT INTO pipe_run_index (pos, run_id, line) VALUES ($1, $2, $3)', [pos, anchorKey(a.archived), line])
      }
    })
  }

  async remove(runId: string): Promise<void> {
    await this.store.tx(`cannot remove the archived run ${runId}`, async (client) => {
      const anchored = await client.query('SELECT 1 FROM pipe_run_index WHERE run_id = $1', [anchorKey(runId)])
      if (anchored.rows.length === 0) throw new PipeError('E_INTERNAL', `${runId} has no archive anchor: its records are not removed`)
      // One transaction: a crash leaves the run whole or gone, never some rows of it. The trail's
      // DELETE privilege is the owner's only inside it (GRANT and REVOKE are transactional): no
      // other session, and no later statement, ever holds it (schema.ts, 7).
      await client.query('GRANT DELETE ON pipe_runs, pipe_events, pipe_snapshots TO CURRENT_USER')
      await client.query('DELETE FROM pipe_queue WHERE run_id = $1', [runId])
      await client.query('DELETE FROM pipe_step_state WHERE run_id = $1', [runId])
      await client.query('DELETE FROM pipe_snapshots WHERE run_id = $1', [runId])
      await client.query('DELETE FROM pipe_events WHERE run_id = $1', [runId])
      await client.query('DELETE FROM pipe_runs WHERE run_id = $1', [runId])
      await client.query('REVOKE DELETE ON pipe_runs, pipe_events, pipe_snapshots FROM CURRENT_USER')
    })
    rmSync(path.join(this.artifactsDir, runId), {recursive: true, force: true})
  }

  /** Where a run that left this store was archived, by its anchor; null for a run never archived. */
  async archivedTo(runId: string): Promise<string | null> {
    const rows = await this.store.query<{line: string}>('cannot read the run index', 'SELECT line FROM pipe_run_index WHERE run_id = $1', [anchorKey(runId)])
    try {
      const value: unknown = rows[0] ? JSON.parse(rows[0].line) : null
      return isObject(value) && typeof value.archive === 'string' ? value.archive : null
    } catch {
      // A damaged line is audit verify's to name.
      return null
    }
  }

  /** The error for a run id that names no run of the store at `where`: one that was archived says where it went. */
  async runNotFound(runId: string, where: string): Promise<PipeError> {
    const archive = await this.archivedTo(runId)
    if (archive === null) return new PipeError('E_NOT_FOUND', `run ${runId} not found in ${where}`, {hint: 'pipe runs list shows the runs of this store.'})
    return new PipeError('E_NOT_FOUND', `run ${runId} was archived (pipe store archive): its records left this store for ${archive}`, {
      hint: `pipe audit verify --archive ${archive} checks the archive (on the machine that keeps it); its records are read there.`,
    })
  }

  async leftovers(): Promise<string[]> {
    // Removal is one transaction: nothing is ever half removed.
    return []
  }
}
