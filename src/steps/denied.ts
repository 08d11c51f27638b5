/**
 * The outcome `denied` every step can take: a person refused it at a confirmation (pipe confirm
 * --no), so it never acted. It is a failure like a kind's own: only an `on: {denied: STEP}` entry
 * routes it, and unrouted it ends the run failed. A kind that declares its own `denied` (an agent
 * whose call was refused) keeps its meaning.
 */
import type {FailureOutcome, StepHandler, StepKind} from './types.js'

export const DENIED_OUTCOME = 'denied'

const DENIED: FailureOutcome = {
  code: 'E_POLICY_DENIED',
  hint: ({run_id, step}) =>
    `A person refused step ${step}, so it did not run; pipe runs show ${run_id} shows who and why. Route the outcome with on: {denied: STEP}, or start a new run and confirm it.`,
}

/** The failure an outcome of a step of this kind means, or undefined when it is not one. */
export function failureOf(handler: Pick<StepHandler<StepKind>, 'failures'> | undefined, outcome: string): FailureOutcome | undefined {
  return handler?.failures?.[outcome] ?? (outcome === DENIED_OUTCOME ? DENIED : undefined)
}

/** A kind's failure outcomes with `denied` among them. */
export function failuresOf(handler: Pick<StepHandler<StepKind>, 'failures'>): Readonly<Record<string, FailureOutcome>> {
  return {[DENIED_OUTCOME]: DENIED, ...(handler.failures ?? {})}
}
