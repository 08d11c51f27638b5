/**
 * The run listings of the PostgreSQL store as queries: a page of runs read in id order a batch at a
 * time, and a run's children by the indexed parent_run column, so neither costs the whole store.
 */
import type {RunRecord} from '../../types/run.js'
import {childrenAmong, pageOf, PAGE_SIZE, type Candidate} from '../trail/listing.js'
import type {RunPage, RunQuery} from '../types.js'
import type {PostgresRecords} from './records.js'
import {parseRow} from './rows.js'

const runRecord = (row: {run_id: string; body: string}): RunRecord =>
  parseRow<RunRecord>('run', row.body, `the run record of ${row.run_id}`, `pipe_runs(${row.run_id})`)

/** A page of runs, newest first: a page costs the rows it passes over, not the store. */
export function listRunRows(store: PostgresRecords, query: RunQuery): Promise<RunPage> {
  const batch = Math.min(Math.max((query.limit ?? PAGE_SIZE) + 1, 50), 1000)
  async function* rows(): AsyncGenerator<Candidate> {
    let after = query.cursor ?? null
    for (;;) {
      // compareIds' order: the prefix and day, then the number's length, then its digits (bytewise, whatever the collation).
      const found = await store.query<{run_id: string; body: string}>(
        'cannot list runs',
        `SELECT run_id, body FROM pipe_runs
         WHERE ($1::text IS NULL OR (substr(run_id, 1, 10) COLLATE "C", length(run_id), run_id COLLATE "C") < (substr($1, 1, 10) COLLATE "C", length($1), $1 COLLATE "C"))
           AND (NOT $2 OR parent_run IS NULL)
         ORDER BY substr(run_id, 1, 10) COLLATE "C" DESC, length(run_id) DESC, run_id COLLATE "C" DESC LIMIT $3`,
        [after, query.top === true, batch],
      )
      for (const row of found) yield {run_id: row.run_id, record: () => runRecord(row)}
      if (found.length < batch) return
      after = found.at(-1)!.run_id
    }
  }
  return pageOf(rows(), query)
}

/** One indexed query on the parent_run column (pipe_runs_parent); a damaged child is left to the audit. */
export async function listChildRows(store: PostgresRecords, runId: string): Promise<RunRecord[]> {
  const rows = await store.query<{run_id: string; body: string}>(
    `cannot read the children of ${runId}`,
    'SELECT run_id, body FROM pipe_runs WHERE parent_run = $1',
    [runId],
  )
  const records = rows.map((row) => {
    try {
      return runRecord(row)
    } catch {
      return null
    }
  })
  return childrenAmong(records, runId)
}
