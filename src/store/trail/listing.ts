/**
 * Listing runs the same way in every store: which records a query matches, a page of them newest
 * first with the cursor of the next, and the order of a run's children. A store brings its records
 * newest first (a folder's listing, an indexed query, a map); this decides what goes on the page.
 */
import {isPipeError} from '../../errors.js'
import type {RunRecord} from '../../types/run.js'
import type {RunPage, RunQuery} from '../types.js'

/** How many runs a page holds when the query does not say. */
export const PAGE_SIZE = 100

export function matchesQuery(record: RunRecord, query: RunQuery): boolean {
  if (query.status !== undefined && record.status !== query.status) return false
  if (query.pipeline !== undefined && record.pipeline?.name !== query.pipeline) return false
  if (query.feature !== undefined && record.feature_id !== query.feature) return false
  if (query.since !== undefined && !(record.created_at >= query.since)) return false
  if (query.top === true && record.parent !== undefined) return false
  return true
}

/** A run a store offers for a page: its id, and its record read (or parsed) only when it is looked at. */
export interface Candidate {
  run_id: string
  record: () => RunRecord | Promise<RunRecord>
}

/**
 * The page of `candidates` (newest first, already after the query's cursor) the query asks for. A
 * record that cannot be read as a run (E_INTEGRITY) takes its place on the page under `damaged`,
 * so the caller names it rather than leaving it out unsaid; a run still being created (no record
 * yet) is no run yet.
 */
export async function pageOf(candidates: AsyncIterable<Candidate> | Iterable<Candidate>, query: RunQuery): Promise<RunPage> {
  const limit = query.limit ?? PAGE_SIZE
  const page: RunPage = {runs: [], damaged: [], cursor: null}
  let taken = 0
  let last: string | null = null
  for await (const candidate of candidates) {
    if (taken >= limit) {
      page.cursor = last
      break
    }
    let record: RunRecord
    try {
      record = await candidate.record()
    } catch (error) {
      if (isPipeError(error) && error.code === 'E_INTEGRITY') {
        page.damaged.push(candidate.run_id)
        taken++
        last = candidate.run_id
      }
      continue
    }
    if (!matchesQuery(record, query)) continue
    page.runs.push(record)
    taken++
    last = candidate.run_id
  }
  return page
}

/** Children in the order their parent started them: by step seq, then item, then creation. */
export function childOrder(a: RunRecord, b: RunRecord): number {
  return a.parent!.seq - b.parent!.seq || (a.parent!.index ?? 0) - (b.parent!.index ?? 0) || (a.created_at < b.created_at ? -1 : 1)
}

/** The records of `parent`'s children among `records`, in childOrder. */
export function childrenAmong(records: ReadonlyArray<RunRecord | null>, parent: string): RunRecord[] {
  return records.filter((r): r is RunRecord => r?.parent?.run_id === parent).sort(childOrder)
}
