/**
 * Where a run goes after a step: a pure function of the step, how it ended and the run's history
 * before it. It reads no store and no clock, so every route is unit-tested on its own
 * (test/unit/decide.test.ts); the record (record.ts) stamps what it returns with trace ids and
 * times.
 *
 * The routing is a ladder, first match wins, and each rung is one `Route` variant with one handler
 * in `DECISIONS`, so a new rung cannot be added without saying what it records:
 * 1. an end step's explicit status (failed, blocked, succeeded), whatever the routes say;
 * 2. a hold (wait again here) or a cancel the step asked for;
 * 3. a failure outcome with no route of its own, which fails the run;
 * 4. the end of the run while an earlier failure was only handled, never recovered, which fails it;
 * 5. an outcome no `on:` entry names, which ends the run (said so in the reason);
 * 6. otherwise the route: the step's own choice, its `on:` entry, or its `next:`.
 * A step that threw (its last attempt's error) blocks, takes its `on.error` route, or fails the run.
 */
import type {FailureOutcome, StepDone, StepRegistry} from '../steps/types.js'
import type {Step} from '../types/pipeline.js'
import type {Snapshot} from '../types/snapshot.js'
import {unrecoveredFailure, type CarriedFailure} from './history.js'

/** Part of the message of a failure the pipeline handled (a rollback) and then ended on. */
export const CARRIED_FAILURE = 'and no later step recovered it'

/** How a step's attempts ended: with a result, or with the error of the last attempt. */
export type Ending = {type: 'done'; result: StepDone} | {type: 'error'; error: {code: string; message: string}; attempts: number; blocked: boolean}

export interface DecideInput {
  run_id: string
  step: Pick<Step, 'id' | 'on' | 'next'>
  /** The failure outcomes the step's kind declares. */
  failures: Partial<Record<string, FailureOutcome>> | undefined
  ending: Ending
  /** The run's snapshots before this step (a replay's original ones included). */
  history: readonly Snapshot[]
  /** Tells which earlier outcomes were failures (each snapshot's kind declares its own). */
  registry: StepRegistry
}

type EndOf<S extends string> = NonNullable<StepDone['end']> & {status: S}

/** Each rung of the ladder, with what its decision needs. */
export type Route =
  | {type: 'ended_failed'; outcome: string; end: EndOf<'failed'>}
  | {type: 'ended_blocked'; outcome: string; end: EndOf<'blocked'>}
  | {type: 'ended_succeeded'; outcome: string; end: EndOf<'succeeded'>}
  | {type: 'held'; outcome: string; reason: string}
  | {type: 'cancelled'; outcome: string; reason: string}
  | {type: 'unrouted_failure'; outcome: string; reason: string; failure: FailureOutcome}
  | {type: 'carried_failure'; outcome: string; reason: string; carried: CarriedFailure}
  | {type: 'unrouted'; outcome: string; reason: string}
  | {type: 'routed'; outcome: string; reason: string; next: string | null}
  | {type: 'error_blocked'; reason: string}
  | {type: 'error_routed'; reason: string; next: string}
  | {type: 'error_failed'; reason: string}

/** An error the decision adds to the snapshot (the run's error when it ends the run). */
export interface DecidedError {
  code: string
  message: string
  hint?: string
  details?: Record<string, unknown>
}

export interface Decided {
  decision: Snapshot['decisions'][number]
  error?: DecidedError
}

/** The run and step a decision is about, for the messages and hints that name them. */
interface Where {
  run_id: string
  step: string
}

/** Which rung of the ladder a step's ending takes. */
export function routeOf(input: DecideInput): Route {
  const {step, ending} = input
  if (ending.type === 'error') {
    const {error, attempts} = ending
    const reason = `${error.code}: ${error.message}${attempts > 1 ? ` (after ${attempts} attempts)` : ''}`
    if (ending.blocked) return {type: 'error_blocked', reason}
    const next = step.on?.error ?? null
    return next === null ? {type: 'error_failed', reason} : {type: 'error_routed', reason, next}
  }
  const {result} = ending
  const {outcome, reason, end} = result
  if (end?.status === 'failed') return {type: 'ended_failed', outcome, end: end as EndOf<'failed'>}
  if (end?.status === 'blocked') return {type: 'ended_blocked', outcome, end: end as EndOf<'blocked'>}
  if (end?.status === 'succeeded') return {type: 'ended_succeeded', outcome, end: end as EndOf<'succeeded'>}
  if (result.hold) return {type: 'held', outcome, reason}
  if (result.cancel) return {type: 'cancelled', outcome, reason}
  const failure = input.failures?.[outcome]
  // A failure is routed only by its own on: entry; next: is the way forward after the step did its job.
  const routed = result.next ?? step.on?.[outcome] ?? (failure ? null : step.next) ?? null
  if (failure && routed === null) return {type: 'unrouted_failure', outcome, reason, failure}
  const carried = routed === null && !failure && !end ? unrecoveredFailure(input.history, input.registry, step.id) : null
  if (carried) return {type: 'carried_failure', outcome, reason, carried}
  const unrouted = routed === null && step.on !== undefined && Object.keys(step.on).length > 0 && step.next === undefined && !(outcome in step.on)
  if (unrouted) return {type: 'unrouted', outcome, reason}
  return {type: 'routed', outcome, reason, next: routed}
}

/** What each rung records: the decision, and the error it adds when it ends the run failed or blocked. */
const DECISIONS: {[K in Route['type']]: (route: Extract<Route, {type: K}>, where: Where) => Decided} = {
  // An end step said so: its reason is the run's error, under its own code.
  ended_failed: ({outcome, end}, where) => ({
    decision: {decision: outcome, reason: end.reason, next_step: null, run_status: 'failed'},
    error: {
      code: end.code ?? 'E_ENDED',
      message: end.reason,
      hint: end.hint ?? `The pipeline ended the run at step ${where.step}.`,
      details: {ended_by: where.step},
    },
  }),
  ended_blocked: ({outcome, end}, where) => ({
    decision: {decision: outcome, reason: end.reason, next_step: where.step, run_status: 'blocked'},
    error: {code: end.code ?? 'E_ENDED', message: end.reason, ...(end.hint ? {hint: end.hint} : {})},
  }),
  // An explicit end: the pipeline's author says the run succeeded here, whatever was routed before.
  ended_succeeded: ({outcome, end}) => ({decision: {decision: outcome, reason: end.reason, next_step: null, run_status: 'succeeded'}}),
  held: ({outcome, reason}, where) => ({decision: {decision: outcome, reason, next_step: where.step, run_status: 'awaiting_input'}}),
  cancelled: ({outcome, reason}) => ({decision: {decision: outcome, reason, next_step: null, run_status: 'cancelled'}}),
  // A failure nothing handles ends the run failed, never succeeded.
  unrouted_failure: ({outcome, reason, failure}, where) => ({
    decision: {decision: outcome, reason: `${reason}; no route for the failure outcome "${outcome}", so the run fails`, next_step: null, run_status: 'failed'},
    error: {code: failure.code, message: `step ${where.step} ended with the failure outcome "${outcome}": ${reason}`, hint: failure.hint(where)},
  }),
  // The run ends here, but an earlier failure was only handled (a rollback, a notice), never recovered.
  carried_failure: ({outcome, reason, carried}, where) => ({
    decision: {
      decision: outcome,
      reason: `${reason}; the run ends on the unrecovered failure of step ${carried.step} (seq ${carried.seq}), so it fails`,
      next_step: null,
      run_status: 'failed',
    },
    error: {
      code: carried.code,
      message: `step ${carried.step} ended "${carried.outcome}" (seq ${carried.seq}: ${carried.reason}) ${CARRIED_FAILURE}; the run ended at ${where.step}`,
      hint: carried.hint,
      details: {failed_step: carried.step, failed_seq: carried.seq},
    },
  }),
  // An outcome with no route ends the run here; say so rather than pretend it was planned.
  unrouted: ({outcome, reason}) => ({
    decision: {decision: outcome, reason: `${reason}; no transition for outcome "${outcome}", so the run ends`, next_step: null},
  }),
  routed: ({outcome, reason, next}) => ({decision: {decision: outcome, reason, next_step: next}}),
  // A failure that needs a person: the run stops at the step, and a resume runs it again.
  error_blocked: ({reason}, where) => ({decision: {decision: 'error', reason, next_step: where.step, run_status: 'blocked'}}),
  error_routed: ({reason, next}) => ({decision: {decision: 'error', reason, next_step: next}}),
  error_failed: ({reason}) => ({decision: {decision: 'error', reason, next_step: null, run_status: 'failed'}}),
}

/** The decision a step's snapshot records, and the error it adds. */
export function decide(input: DecideInput): Decided {
  const route = routeOf(input)
  const decided = (DECISIONS[route.type] as (route: Route, where: Where) => Decided)(route, {run_id: input.run_id, step: input.step.id})
  // A person's decision in the step (a review's go) is recorded with whatever route it took.
  const person = input.ending.type === 'done' ? input.ending.result.person : undefined
  return person ? {...decided, decision: {...decided.decision, ...person}} : decided
}
