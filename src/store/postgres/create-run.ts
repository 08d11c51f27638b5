/** A run's creation on the PostgreSQL store, in its creator's transaction: its row, its first timeline lines and its run-index line. */
import type {PoolClient} from 'pg'
import {PipeError} from '../../errors.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import {formatId} from '../trail/ids.js'
import {fileHash, sealLine} from '../trail/integrity.js'
import {lineText, recordText} from '../trail/records.js'
import {newRun, runIndexLine, type RunStart} from '../trail/runs.js'
import type {RunWorkspace} from '../team.js'
import type {RunDraft} from '../types.js'
import type {holderOf} from './holder.js'
import {datedNumber, nextDatedSql} from './ids.js'
import {leaseMs} from './pg.js'
import {PostgresRecords} from './records.js'
import {childKey} from './rows.js'

/**
 * Creates a run inside the caller's transaction. A child run takes its key (parent run, step, seq,
 * item) into a unique column: a second creation of the same child fails (23505) and its
 * transaction writes nothing (its run id is a gap in its day's numbers), so a step that re-enters
 * after any crash finds one child. `now` is the caller's: it made that day's id sequence (daySequence).
 */
export async function insertRun(
  client: PoolClient,
  {
    draft,
    event,
    start,
    holder,
    workspace,
  }: {draft: RunDraft; now: Date; event: RunEvent; start?: RunStart | undefined; holder?: ReturnType<typeof holderOf> | null; workspace?: RunWorkspace},
): Promise<RunRecord> {
  // The run index's own counter row orders creations, so its chain stays linear; the id, from its
  // day's sequence (./ids.ts: never a day before the latest one numbered), is taken after it, so ids
  // keep the index's order. The caller made today's sequence before its transaction (daySequence).
  const pos = await PostgresRecords.nextNumber(client, 'run-index')
  const taken = (await client.query<{id: string | null}>(`SELECT ${nextDatedSql('$1::text')} AS id`, ['r'])).rows[0]
  const {day, n} = datedNumber(taken?.id ?? null, 'R')
  const id = formatId('R', day, n)
  const prev = pos > 1 ? (await client.query<{line: string}>('SELECT line FROM pipe_run_index WHERE pos = $1', [pos - 1])).rows[0] : undefined
  if (pos > 1 && !prev)
    throw new PipeError('E_INTEGRITY', `the run index has no line ${pos - 1}`, {hint: 'Lines of the run index were removed; run pipe audit verify.'})
  const feature = (await client.query<{body: string}>('SELECT body FROM pipe_features WHERE id = $1', [draft.feature_id])).rows[0]
  const {record, lines} = newRun(id, draft, event, start)
  const indexLine = sealLine(
    runIndexLine(record, feature ? fileHash(feature.body) : null, workspace),
    prev ? (JSON.parse(prev.line) as {hash: string}).hash : null,
  )
  const link = record.parent
  await client.query(
    `INSERT INTO pipe_runs (run_id, body, parent_run, holder, lease_until, epoch, child_key, workspace_id, workspace_root, workspace_sub)
     VALUES ($1, $2, $3, $4, CASE WHEN $4::text IS NULL THEN NULL ELSE now() + make_interval(secs => $5::double precision / 1000) END, $6, $7, $8, $9, $10)`,
    [
      id,
      recordText(record),
      link?.run_id ?? null,
      holder ? JSON.stringify(holder) : null,
      leaseMs(),
      holder ? 1 : 0,
      link ? childKey(link) : null,
      workspace?.id ?? null,
      workspace?.root ?? null,
      workspace?.sub ?? null,
    ],
  )
  for (const [i, line] of lines.entries()) await client.query('INSERT INTO pipe_events (run_id, n, line) VALUES ($1, $2, $3)', [id, i + 1, lineText(line)])
  await client.query('INSERT INTO pipe_run_index (pos, run_id, line) VALUES ($1, $2, $3)', [pos, id, lineText(indexLine)])
  return record
}
