/**
 * Notes of pipe audit verify that name no damage (both stores' audits give them).
 *
 * Time running backwards along a chain (a run's timeline, the run index): not damage, since a
 * chain's order is its links' and not its clocks', but a sign that a machine's clock was set back,
 * which makes a record's time (a review a day before the spec it approved) a claim to check. Said as
 * a note naming both records; ids are never ordered by these times (ids.ts keeps them monotonic).
 */
import {compareIds} from '../file/ids.js'
import type {AuditFinding} from '../types.js'

export interface Timed {
  record: string
  /** Where in the file or table (a line, a row). */
  field: string
  at: unknown
}

/** A note for each record stamped earlier than the latest one before it in the chain. */
export function timeBackwards(chain: readonly Timed[], file: string, what: string): AuditFinding[] {
  const out: AuditFinding[] = []
  let latest: {record: string; at: string; ms: number} | undefined
  for (const item of chain) {
    const ms = typeof item.at === 'string' ? Date.parse(item.at) : Number.NaN
    if (Number.isNaN(ms)) continue
    const at = item.at as string
    if (latest && ms < latest.ms)
      out.push({
        record: item.record,
        file,
        field: item.field,
        message: `time runs backwards in ${what}: ${item.record} is stamped ${at}, before ${latest.record} (${latest.at}) ahead of it; was a clock set back? Its times are the clock's claim, not the order of events`,
      })
    if (!latest || ms >= latest.ms) latest = {record: item.record, at, ms}
  }
  return out
}

/** The runs of a run index in its order, with when each was created: notes for time and for ids running backwards. */
export function runIndexOrder(runs: ReadonlyArray<{runId: string; field: string; created: unknown}>, file: string): AuditFinding[] {
  const out = timeBackwards(
    runs.map((r) => ({record: r.runId, field: r.field, at: r.created})),
    file,
    'the run index',
  )
  let newest: string | undefined
  for (const {runId, field} of runs) {
    if (newest !== undefined && compareIds(runId, newest) < 0)
      out.push({
        record: runId,
        file,
        field,
        message: `was created after ${newest} but its id sorts before it (allocated while a clock was set back)`,
      })
    if (newest === undefined || compareIds(runId, newest) > 0) newest = runId
  }
  return out
}

/** What pipe audit verify says of a feature record no run names. */
export const ORPHAN_FEATURE =
  'no run names this feature: a pipe run was stopped after recording it and before recording its run (kept; pipe run --feature ID uses it)'
