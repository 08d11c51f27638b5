/**
 * One step's attempts: each runs the kind's handler under a deadline and the run's signal, and a
 * retryable error from a step that is safe to retry is tried again after a backoff. What the
 * attempts gave (a result, or the errors of all of them) goes to decide.ts and record.ts; a signal
 * that stops the run surfaces as `Interrupted`, never as the step's error.
 */
import {PipeError, toPipeError} from '../errors.js'
import {appendLog} from '../log.js'
import type {JsonValue} from '../expr/index.js'
import {OVER_BUDGET_OUTCOME} from '../steps/registry.js'
import type {StepDone, StepHandler, StepKind, StepOf, StepResult} from '../steps/types.js'
import type {Snapshot} from '../types/snapshot.js'
import {tracing} from '../telemetry/tracing.js'
import {redact, redactDeep} from '../util/redact.js'
import {newTraceId} from '../util/trace.js'
import {deadline} from './deadlines.js'
import {condition, contextFor, deferredFields, explained, resolveStep} from './expressions.js'
import {checkedOutputs} from './outputs-check.js'
import {StepBudget} from './budget.js'
import {backoffFor, safeToRetry} from './retry.js'
import {stepGate, type ConfirmationUsed} from './step-confirm.js'
import {renderer, stepContext, type AttemptEnvironment, type RunAtStep} from './step-context.js'

/** The run was stopped by a signal while a step ran: the walk records it interrupted. */
export class Interrupted extends Error {}

/**
 * The run was cancelled (pipe cancel) while a step ran: the walk records the step's snapshot with
 * the outcome cancelled, with what the step gave up to then (`partial`), and ends the run.
 */
export class Cancelled extends Error {
  partial: StepResult | undefined
  constructor(readonly request: string) {
    super(request)
  }
}

/** How long a cancelled step's handler may take to hand back what it did (a command's output once its group is killed). */
const CANCEL_GRACE_MS = 5000

/**
 * How one attempt of a step is stopped: `settled` rejects with the reason, and the step's signal
 * aborts. The AbortController is made only when the step reads its signal: most cheap kinds never
 * do, and making one cost a few microseconds per step.
 */
class StepAbort {
  private controller: AbortController | undefined
  private reason: unknown
  private fired = false
  private reject!: (reason: unknown) => void
  readonly settled = new Promise<never>((_, reject) => (this.reject = reject))

  constructor() {
    this.settled.catch(() => undefined)
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.fired) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }

  abort(reason: Error): void {
    if (this.fired) return
    this.fired = true
    this.reason = reason
    this.controller?.abort(reason)
    this.reject(reason)
  }
}

export interface Executed {
  result?: StepResult
  errors: Snapshot['errors']
  attempts: number
  /** The failure needs a person: the run stops as blocked at this step and resumes there. */
  blocked?: boolean
  /** Its when: was false: it did not run. */
  skipped?: boolean
  /** pipe cancel stopped it: its result is the outcome cancelled, with what it gave up to then. */
  cancelled?: boolean
}

/** A step pipe cancel stopped: the outcome cancelled ends the run, and keeps the outputs its handler gave on its way out. */
export function cancelledStep(stopped: Cancelled): Executed {
  const partial = stopped.partial?.type === 'done' ? stopped.partial : undefined
  const result: StepDone = {
    type: 'done',
    outcome: 'cancelled',
    reason: stopped.request,
    outputs: partial?.outputs ?? {},
    ...(partial?.inputs ? {inputs: partial.inputs} : {}),
    cancel: {reason: stopped.request},
  }
  return {result, errors: [], attempts: 1, cancelled: true}
}

export type {AttemptEnvironment, RunAtStep} from './step-context.js'

/** The step's attempts, the first and any retries, until one gives a result or the errors are not retried. */
export async function attemptStep<K extends StepKind>(
  env: AttemptEnvironment,
  handler: StepHandler<K>,
  step: StepOf<K>,
  seq: number,
  run: RunAtStep,
  cancel?: AbortSignal,
): Promise<Executed> {
  const {policy} = run.settings
  const safe = safeToRetry(step, handler)
  const maxRetries = safe ? (step.retry?.max_retries ?? policy.policy.max_retries_default) : 0
  // A step that waits for child runs is bounded only by its own timeout_ms: each child step has its own.
  const timeoutMs = step.timeout_ms ?? (handler.waitsForChildren ? null : (policy.policy.resource_limits.step_timeout_ms ?? 600000))
  const errors: Snapshot['errors'] = []
  let blocked = false
  const runId = run.record.run_id
  const render = renderer(step.id, run)
  // A person's yes covers every attempt of this run of the step: a retry is not asked about again.
  let confirmed: ConfirmationUsed | undefined
  // One guard for all attempts: a failed attempt's replies count toward the budget too.
  const budget = StepBudget.for({
    store: env.deps.store,
    run: run.record,
    snapshots: run.history.snapshots,
    pipeline: run.settings.pipeline.pipeline,
    step,
    seq,
    ...(run.settings.inheritedPrices ? {inherited: run.settings.inheritedPrices} : {}),
    ...(run.settings.budgetParents ? {parents: run.settings.budgetParents} : {}),
  })
  for (let attempt = 1; ; attempt++) {
    env.deps.onProgress?.({type: 'step_start', run_id: runId, step: step.id, kind: step.kind, seq, attempt})
    tracing().attemptStarted(runId, step, seq, attempt)
    const outer = env.deps.signal
    if (outer?.aborted) throw new Interrupted('interrupted')
    if (cancel?.aborted) throw new Cancelled(String(cancel.reason))
    const abort = new StepAbort()
    const onOuter = (): void => abort.abort(new Interrupted('interrupted'))
    outer?.addEventListener('abort', onOuter, {once: true})
    const onCancel = (): void => abort.abort(new Cancelled(String(cancel!.reason)))
    cancel?.addEventListener('abort', onCancel, {once: true})
    let running: Promise<unknown> | undefined
    const cancelDeadline =
      timeoutMs === null
        ? undefined
        : deadline(timeoutMs, () =>
            abort.abort(
              new PipeError('E_TOOL_TIMEOUT', `step "${step.id}" took longer than its timeout of ${timeoutMs} ms`, {
                retryable: true,
                hint: 'Raise timeout_ms on the step, or resource_limits.step_timeout_ms in the policy.',
              }),
            ),
          )
    const aborted = abort.settled
    // The task a step works on (its resolved task:), kept on its error: a step that fails files under its task too.
    let resolvedTask: unknown
    const {context, close} = stepContext({env, step, seq, attempt, run, signal: () => abort.signal, render, ...(budget ? {budget} : {})})
    try {
      // Expressions are resolved on every attempt, inside the try: a failing one is this step's error (E_CONFIG, not retried).
      const expressions = resolveAttempt(handler, step, run)
      if ('skipped' in expressions) return {result: expressions.skipped, errors, attempts: attempt, skipped: true}
      context.step = expressions.step
      resolvedTask = (expressions.step as {task?: unknown}).task
      const resolved = expressions.values
      // Before it acts, with its values resolved (the commands a person is shown are the ones it would run).
      if (!confirmed) {
        const gate = stepGate(context.step, handler, seq, {run: run.record, policy, cwd: run.settings.cwd})
        if (gate.type === 'ask') return {result: gate.result, errors, attempts: attempt}
        // An answer given earlier for the whole step or run decides here: the timeline says which one.
        if ((gate.type === 'go' || gate.type === 'denied') && gate.standing)
          await env.appendEvent(runId, {
            at: env.now().toISOString(),
            event: 'confirm_used',
            step: step.id,
            seq,
            reason: `${gate.used.decision} by ${gate.used.by} for the whole ${gate.used.scope}, given at ${gate.used.at}`,
            by: gate.used.by,
          })
        if (gate.type === 'denied') {
          if (Object.keys(resolved).length > 0) gate.result.inputs = {...gate.result.inputs, resolved}
          return {result: gate.result, errors, attempts: attempt}
        }
        if (gate.type === 'go') confirmed = gate.used
      }
      // A fault point (tests only): where a step's own code runs, so a bug there can be injected.
      await env.deps.hook?.(`attempt:${step.id}`)
      const own = handler.run(context)
      running = own
      const ran = await Promise.race([own, aborted])
      // A kind that caught the refusal and ended on its own still stopped at the budget: the budget decides.
      if (budget?.exceeded) return {result: overBudget(budget), errors, attempts: attempt}
      const result = checkedOutputs(handler, context.step, context.pipeline, ran)
      if (result.type === 'done' && Object.keys(resolved).length > 0) {
        // A kind may record values it evaluated itself (a choice's whens) under the same key.
        const own = result.inputs?.['resolved']
        result.inputs = {...(result.inputs ?? {}), resolved: {...resolved, ...(own !== null && typeof own === 'object' ? own : {})}}
      }
      if (result.type === 'done' && confirmed) result.inputs = {...(result.inputs ?? {}), confirmation: confirmed}
      return {result, errors, attempts: attempt}
    } catch (raw) {
      if (raw instanceof Interrupted || outer?.aborted) throw new Interrupted('interrupted')
      if (raw instanceof Cancelled) {
        // What the step did until then is the cancelled snapshot's evidence: its handler saw the abort and ends soon.
        raw.partial = running ? ((await settledWithin(running, CANCEL_GRACE_MS)) as StepResult | undefined) : undefined
        throw raw
      }
      if (budget?.exceeded) return {result: overBudget(budget), errors, attempts: attempt}
      const error = toPipeError(raw)
      if (error.blocking) blocked = true
      const traceId = newTraceId()
      // A bug in pipe: its hint sends a person to the log for the stack, so the stack goes there, under the error's trace id.
      if (error.code === 'E_INTERNAL') appendLog('ERROR', `[E_INTERNAL] run ${runId} step ${step.id}: ${error.message}`, stackOf(raw), traceId)
      errors.push({
        code: error.code,
        message: redact(error.message),
        trace_id: traceId,
        retryable: error.retryable,
        attempt,
        at: env.now().toISOString(),
        ...(error.hint ? {hint: redact(error.hint)} : {}),
        ...(error.details || typeof resolvedTask === 'string'
          ? {
              details: {
                ...(typeof resolvedTask === 'string' ? {task: resolvedTask} : {}),
                ...(error.details ? redactDeep(JSON.parse(JSON.stringify(error.details)) as Record<string, unknown>) : {}),
              },
            }
          : {}),
      })
      if (!error.retryable || attempt > maxRetries) return {errors, attempts: attempt, blocked}
      tracing().attemptFailed(runId, step.id, error)
      const delay = backoffFor(attempt - 1, (env.deps.random ?? Math.random)())
      env.deps.onProgress?.({type: 'step_retry', run_id: runId, step: step.id, seq, attempt, delay_ms: delay, error: redact(error.message)})
      try {
        await env.sleep(delay, outer ?? new AbortController().signal)
      } catch {
        throw new Interrupted('interrupted')
      }
    } finally {
      cancelDeadline?.()
      outer?.removeEventListener('abort', onOuter)
      cancel?.removeEventListener('abort', onCancel)
      await close()
    }
  }
}

/**
 * A step whose next model request would have passed a budget: with on_exceed pause the run waits
 * for a person (pipe budget RUN), and the step runs again once the budget is raised; with fail it
 * ends with the outcome over_budget, its usage until then recorded.
 */
function overBudget(budget: StepBudget): StepResult {
  const {exceeded, usage} = budget
  if (exceeded!.on_exceed === 'pause') return {type: 'await', kind: 'budget', reason: exceeded!.reason, budget: exceeded!.pending}
  return {type: 'done', outcome: OVER_BUDGET_OUTCOME, reason: exceeded!.reason, inputs: {budget: exceeded!.pending}, outputs: {}, ...(usage ? {usage} : {})}
}

/** The step with its expressions resolved for this attempt and what they gave; or, when its `when:` is false, its skipped result. */
function resolveAttempt<K extends StepKind>(
  handler: StepHandler<K>,
  step: StepOf<K>,
  run: RunAtStep,
): {skipped: StepDone} | {step: StepOf<K>; values: Record<string, JsonValue>} {
  const {evaluator} = run.exprs
  if (!evaluator) return {step, values: {}}
  const values = contextFor(run.record, run.history.snapshots, run.spec, run.exprs)
  const bound = evaluator.bind(values)
  const when: Record<string, JsonValue> = {}
  if (step.when !== undefined) {
    if (!explained(values, () => condition(step, bound)))
      return {skipped: {type: 'done', outcome: 'skipped', reason: `when: ${step.when.trim()} is false`, inputs: {resolved: {when: false}}, outputs: {}}}
    when.when = true
  }
  const resolved = explained(values, () => resolveStep(step, bound, deferredFields(handler, step)))
  return {step: resolved.step, values: {...when, ...resolved.values}}
}

/** What `running` gives if it settles within `ms` (undefined if it throws or takes longer). */
async function settledWithin<T>(running: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, ms, undefined)))
  try {
    return await Promise.race([running.catch(() => undefined), late])
  } finally {
    clearTimeout(timer)
  }
}

/** The stack of what was thrown, with the stacks of its causes (an E_INTERNAL wraps the error it came from). */
function stackOf(raw: unknown): string | undefined {
  const parts: string[] = []
  for (let at: unknown = raw, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++)
    parts.push(depth === 0 ? (at.stack ?? at.message) : `caused by: ${at.stack ?? at.message}`)
  return parts.length > 0 ? parts.join('\n') : undefined
}
