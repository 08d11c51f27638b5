/**
 * pipe cancel of a run no process drives, paused at a step (answers, a review, a confirmation):
 * the step it waits at gets its snapshot with the outcome cancelled (seed 002: every step leaves
 * one), built as any step's is (record.ts) and committed before the run is ended cancelled.
 */
import type {StepHandler, StepKind, StepRegistry} from '../steps/types.js'
import type {CommitHook, RunStore} from '../store/types.js'
import type {Step} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import type {RunSettings} from './engine-types.js'
import {stepCommitOf} from './record.js'

/** The step a paused run waits at, as its pipeline has it (undefined: it waits at none). */
export function waitingStep(record: RunRecord, settings: RunSettings): Step | undefined {
  const waiting = record.pending
  return record.status === 'awaiting_input' && waiting ? settings.pipeline.pipeline.steps.find((s) => s.id === waiting.step) : undefined
}

/** Commits the cancelled snapshot of `step`, the step `record` (as it was paused) waits at. */
export async function commitWaitingCancelled(
  store: RunStore,
  registry: StepRegistry,
  record: RunRecord,
  step: Step,
  settings: RunSettings,
  reason: string,
  now: Date,
  hook?: CommitHook,
): Promise<void> {
  const waiting = record.pending!
  const own = await store.readSnapshots(record.run_id)
  // A replay's own snapshots follow the ones it took from its source, up to the step it replays from.
  const seq = (own.at(-1)?.step.seq ?? (record.replay_of ? record.replay_of.seq - 1 : 0)) + 1
  const since = new Date(waiting.since)
  const current = record.spec_version ? await store.readSpec(record.spec_version) : null
  const commit = stepCommitOf({
    record,
    step,
    handler: registry[step.kind] as StepHandler<StepKind>,
    registry,
    timing: {
      seq,
      iteration: own.filter((s) => s.step.name === step.id).length + 1,
      // It has waited since it paused: that is when this entry into the step began.
      started: Number.isNaN(since.getTime()) || since > now ? now : since,
      ended: now,
      attempts: 1,
      blocked: false,
      skipped: false,
      cancelled: true,
      secrets: false,
      modelCalls: [],
    },
    errors: [],
    result: {type: 'done', outcome: 'cancelled', reason, outputs: {}, cancel: {reason}},
    current,
    settings,
    before: own,
  })
  await store.commitStep(commit, hook)
}
