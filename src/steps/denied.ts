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

/**
 * The outcome `over_budget` every step can take under a budget with on_exceed: fail: its next model
 * request would have passed the budget, so it was not sent (engine/budget.ts). A failure like denied.
 */
export const OVER_BUDGET_OUTCOME = 'over_budget'

const OVER_BUDGET: FailureOutcome = {
  code: 'E_BUDGET',
  hint: ({run_id, step}) =>
    `Step ${step} stopped before a model request that would have passed its budget (on_exceed: fail); pipe stats --json shows what was spent against the budget, pipe runs show ${run_id} the run. Route the outcome with on: {over_budget: STEP}, raise the budget, or use on_exceed: pause to be asked instead.`,
}

/** The failure an outcome of a step of this kind means, or undefined when it is not one. */
export function failureOf(handler: Pick<StepHandler<StepKind>, 'failures'> | undefined, outcome: string): FailureOutcome | undefined {
  return handler?.failures?.[outcome] ?? (outcome === DENIED_OUTCOME ? DENIED : outcome === OVER_BUDGET_OUTCOME ? OVER_BUDGET : undefined)
}

/** A kind's failure outcomes with `denied` and `over_budget` among them. */
export function failuresOf(handler: Pick<StepHandler<StepKind>, 'failures'>): Readonly<Record<string, FailureOutcome>> {
  return {[DENIED_OUTCOME]: DENIED, [OVER_BUDGET_OUTCOME]: OVER_BUDGET, ...(handler.failures ?? {})}
}
