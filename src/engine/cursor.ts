/**
 * Where a run is, derived from its snapshots alone: the next step, the next seq, how often each
 * step was entered and the current spec version. Nothing else holds that state, so a crash at any
 * point leaves a run whose snapshots say exactly where it goes on.
 */
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'

/** Where a run stands, derived from its snapshots. */
export interface Cursor {
  next: string | null
  seq: number
  specVersion: string | null
  iterations: Map<string, number>
}

/**
 * `base` is the history a replay forks from (the original run's snapshots before the replayed
 * step); `own` the run's own snapshots; `redriven` the snapshots a redrive retried (see
 * `retriedKey`). A redriven snapshot stays in the history but does not use up one of its step's
 * iterations (the retry is the same iteration, a new attempt), and when it is the last one the
 * run goes on at its step.
 */
export function cursorOf(first: string, base: readonly Snapshot[], own: readonly Snapshot[], redriven: ReadonlySet<string> = new Set()): Cursor {
  const iterations = new Map<string, number>()
  let specVersion: string | null = null
  for (const s of [...base, ...own]) {
    if (!redriven.has(retriedKey(s))) iterations.set(s.step.name, (iterations.get(s.step.name) ?? 0) + 1)
    if (s.spec_version_out) specVersion = s.spec_version_out
  }
  const last = own.at(-1)
  if (!last) return {next: first, seq: 1, specVersion, iterations}
  if (redriven.has(retriedKey(last))) return {next: last.step.name, seq: last.step.seq + 1, specVersion, iterations}
  return {next: last.decisions.at(-1)?.next_step ?? null, seq: last.step.seq + 1, specVersion, iterations}
}

/** Names a snapshot across runs, so a replay also knows which snapshots of its original were retried. */
export function retriedKey(snapshot: {run_id: string; step: {seq: number}}): string {
  return `${snapshot.run_id}#${snapshot.step.seq}`
}

export function redrivenOf(...records: RunRecord[]): Set<string> {
  return new Set(records.flatMap((r) => (r.redrives ?? []).map((d) => retriedKey({run_id: r.run_id, step: {seq: d.seq}}))))
}

/** The seqs of the earlier attempts of `step` that redrives ran again as `seq` (oldest first). */
export function retriedSeqs(record: RunRecord, step: string, seq: number): number[] {
  const out: number[] = []
  for (let s = seq - 1; (record.redrives ?? []).some((r) => r.seq === s && r.step === step); s--) out.unshift(s)
  return out
}
