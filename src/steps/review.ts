import type {Snapshot} from '../types/snapshot.js'
import {gateResult} from './gate.js'
import {requireSpec} from './model-support.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler} from './types.js'

export type ReviewOutputs = {
  review_decision: 'go' | 'hold' | 'drop'
  reviewed_version: string
  gate_pass: boolean | null
  summary: {features: number; acceptance_criteria: number; tasks: number; vv: number}
}

const field = outputsOf<ReviewOutputs>()
/** A person's decision on a spec version, and the version it was on; publish reads them. */
export const reviewDecision = field('review_decision')
export const reviewedVersion = field('reviewed_version')

/** Whether this snapshot is a review that approved exactly `version`. */
export function approves(snapshot: Pick<Snapshot, 'outputs'>, version: string | null | undefined): boolean {
  return reviewDecision.of(snapshot) === 'go' && reviewedVersion.of(snapshot) === version
}

export const review: StepHandler<'review'> = {
  kind: 'review',
  summary: 'a person decides go, hold or drop',
  outcomes: () => ['go', 'hold', 'drop'],
  // A hold waits for the next decision at the same step and a drop cancels the run: neither can be routed.
  stops: {hold: 'awaiting_input', drop: 'cancelled'},
  waitsFor: 'review',
  changesSpec: false,
  needsSpec: true,
  safeToRetry: false,
  graph: {shape: 'parallelogram'},
  async run(context) {
    const spec = requireSpec(context, 'review')
    const decision = context.run.review
    // A decision is used once: a snapshot that recorded it means it was consumed (a hold waits for the next one).
    const used = decision !== undefined && context.history.snapshots.some((s) => s.decisions.some((d) => d.at === decision.at && d.by === decision.by))
    if (!decision || used) {
      return {type: 'await', kind: 'review', reason: `spec ${spec.meta.spec_version} needs a review decision (go, hold or drop)`}
    }
    const gate = gateResult.latest(context.history)
    const outputs = {
      review_decision: decision.decision,
      reviewed_version: spec.meta.spec_version,
      gate_pass: gate?.pass ?? null,
      summary: {features: spec.features.length, acceptance_criteria: spec.acceptance_criteria.length, tasks: spec.tasks.length, vv: spec.vv.length},
    } satisfies ReviewOutputs & KindOutputs<'review'>
    const note = decision.note ? `: ${decision.note}` : ''
    const person = {by: decision.by, at: decision.at, ...(decision.note ? {note: decision.note} : {})}
    const base = {type: 'done' as const, inputs: {canonical_spec_ref: spec.meta.spec_version}, outputs, person}
    switch (decision.decision) {
      case 'go':
        return {...base, outcome: 'go', reason: `${decision.by} approved ${spec.meta.spec_version}${note}`}
      case 'hold':
        return {
          ...base,
          outcome: 'hold',
          reason: `${decision.by} put ${spec.meta.spec_version} on hold${note}`,
          hold: {reason: `on hold by ${decision.by}${note}`},
        }
      case 'drop':
        return {
          ...base,
          outcome: 'drop',
          reason: `${decision.by} dropped ${spec.meta.spec_version}${note}`,
          cancel: {reason: `dropped in review by ${decision.by}${note}`},
        }
    }
  },
}
