/**
 * The path a run took through its pipeline, from its records: each snapshot's decision is one edge
 * (the step to the step it went to, or to where the run ended), and each loop_exhausted event one
 * more (a loop bound sends the run to on_exhausted, or fails it, with no snapshot of its own).
 * `pipe graph FILE --run RUN` hands the result to the renderer, which reads no records itself.
 */
import type {PathTaken, TakenEdge} from '../config/graph-render.js'
import type {LoadedPipeline} from '../config/pipeline.js'
import {PipeError} from '../errors.js'
import {openStore, storeLocation} from '../store/open.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'

const ENDS: Record<string, string> = {failed: '__failed__', cancelled: '__cancelled__', blocked: '__blocked__'}

/** The edges of a run in the order first taken, each with how often it was taken; pure, for tests. */
export function pathOf(pipeline: LoadedPipeline['pipeline'], record: RunRecord, snapshots: Snapshot[], events: RunEvent[]): PathTaken {
  const moves: Array<{at: string; from: string; to: string; label: string}> = []
  const steps: Record<string, number> = {}
  const ordered = [...snapshots].sort((a, b) => a.step.seq - b.step.seq)
  const first = ordered[0]
  if (first) moves.push({at: first.step.started_at, from: '__start__', to: first.step.name, label: 'start'})
  for (const snapshot of ordered) {
    const from = snapshot.step.name
    steps[from] = (steps[from] ?? 0) + 1
    const decision = snapshot.decisions.at(-1)
    if (!decision) continue
    // No next step: the run ended here (or waits here, which the drawing shows as a loop back).
    const to = decision.next_step ?? (decision.run_status === 'awaiting_input' ? from : (ENDS[decision.run_status ?? ''] ?? '__end__'))
    moves.push({at: snapshot.step.ended_at, from, to, label: decision.decision})
  }
  const byId = new Map(pipeline.steps.map((s) => [s.id, s]))
  for (const event of events) {
    if (event.event !== 'loop_exhausted' || event.step === undefined) continue
    moves.push({at: event.at, from: event.step, to: byId.get(event.step)?.on_exhausted ?? '__failed__', label: 'exhausted'})
  }
  // A stable sort: snapshots and events at the same instant keep their order.
  moves.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
  const taken: TakenEdge[] = []
  for (const move of moves) {
    const seen = taken.find((t) => t.from === move.from && t.to === move.to && t.label === move.label)
    if (seen) seen.count += 1
    else taken.push({from: move.from, to: move.to, label: move.label, count: 1})
  }
  return {run_id: record.run_id, status: record.status, steps, taken}
}

/** Reads a run of `pipeline` from the store; a run of another pipeline (by name or content hash) is refused. */
export async function runPath(options: {store: string; cwd: string; runId: string; pipeline: LoadedPipeline}): Promise<PathTaken> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  const {pipeline, hash, file} = options.pipeline
  if (record.pipeline.name !== pipeline.name || record.pipeline.hash !== hash) {
    const what =
      record.pipeline.name !== pipeline.name
        ? `a run of pipeline "${record.pipeline.name}", not "${pipeline.name}"`
        : `a run of ${record.pipeline.path} as it was then (${record.pipeline.hash.slice(0, 19)}…), and ${file} has changed since (${hash.slice(0, 19)}…)`
    throw new PipeError('E_INVALID_ARGS', `${options.runId} is ${what}`, {
      hint: `Draw it over the file it ran: pipe graph ${record.pipeline.path} --run ${options.runId} (pipe runs list shows each run's pipeline).`,
    })
  }
  return pathOf(pipeline, record, await store.readSnapshots(options.runId), await store.readEvents(options.runId))
}
