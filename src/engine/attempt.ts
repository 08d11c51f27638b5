/**
 * One step's attempts: each runs the kind's handler under a deadline and the run's signal, and a
 * retryable error from a step that is safe to retry is tried again after a backoff. What the
 * attempts gave (a result, or the errors of all of them) goes to decide.ts and record.ts; a signal
 * that stops the run surfaces as `Interrupted`, never as the step's error.
 */
import path from 'node:path'
import {PipeError, toPipeError} from '../errors.js'
import type {JsonValue} from '../expr/index.js'
import type {ChildRuns, StepContext, StepDone, StepEvent, StepHandler, StepKind, StepResult} from '../steps/types.js'
import type {Ledger} from '../store/file/ledger.js'
import type {Step} from '../types/pipeline.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {tracing} from '../telemetry/tracing.js'
import type {CanonicalSpec} from '../types/spec.js'
import {redact, redactDeep} from '../util/redact.js'
import {newTraceId} from '../util/trace.js'
import type {ParentStep} from './children.js'
import {retriedSeqs} from './cursor.js'
import {deadline} from './deadlines.js'
import type {EngineDeps, RunSettings} from './engine-types.js'
import {aliasValues, condition, contextFor, deferredFields, explained, resolveStep, type RunExpressions} from './expressions.js'
import type {History} from './history.js'
import {checkedOutputs} from './outputs-check.js'
import {backoffFor} from './retry.js'
import {stepGate, type ConfirmationUsed} from './step-confirm.js'

/** The run was stopped by a signal while a step ran: the walk records it interrupted. */
export class Interrupted extends Error {}

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
}

/** What the engine lends a step's attempts. */
export interface AttemptEnvironment {
  deps: EngineDeps
  now: () => Date
  user: string
  ledger: Ledger
  sleep: (ms: number, signal: AbortSignal) => Promise<void>
  /** Appends a line to the run's timeline (the engine keeps the record it holds current). */
  appendEvent(runId: string, event: RunEvent): Promise<void>
  children(of: ParentStep): ChildRuns
}

/** The run as the step sees it. */
export interface StepState {
  record: RunRecord
  settings: RunSettings
  history: History
  spec: CanonicalSpec | null
  exprs: RunExpressions
}

export async function attemptStep(env: AttemptEnvironment, handler: StepHandler<StepKind>, step: Step, seq: number, state: StepState): Promise<Executed> {
  const {policy} = state.settings
  const safe = step.retry?.safe ?? handler.safeToRetry
  const maxRetries = safe ? (step.retry?.max_retries ?? policy.policy.max_retries_default) : 0
  // A step that waits for child runs is bounded only by its own timeout_ms: each child step has its own.
  const timeoutMs = step.timeout_ms ?? (handler.waitsForChildren ? null : (policy.policy.resource_limits.step_timeout_ms ?? 600000))
  const errors: Snapshot['errors'] = []
  let blocked = false
  let renderContext: {values: ReturnType<typeof contextFor>; bound: ReturnType<NonNullable<RunExpressions['evaluator']>['bind']>} | undefined
  // A person's yes covers every attempt of this run of the step: a retry is not asked about again.
  let confirmed: ConfirmationUsed | undefined
  for (let attempt = 1; ; attempt++) {
    env.deps.onProgress?.({type: 'step_start', run_id: state.record.run_id, step: step.id, kind: step.kind, seq, attempt})
    tracing().attemptStarted(state.record.run_id, step, seq, attempt)
    const outer = env.deps.signal
    if (outer?.aborted) throw new Interrupted('interrupted')
    const abort = new StepAbort()
    const onOuter = (): void => abort.abort(new Interrupted('interrupted'))
    outer?.addEventListener('abort', onOuter, {once: true})
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
    let children: ChildRuns | undefined
    const childrenOf = (): ChildRuns =>
      (children ??= env.children({parent: state.record, step, seq, settings: state.settings, snapshots: state.history.snapshots}))
    const slotsDir = (): string => path.join(env.deps.store.root, 'locks')
    // A step's lines are appended one at a time, and none after the attempt ended (an abandoned
    // step still running must not race the engine's own lines on the chain).
    const timeline = {open: true, tail: Promise.resolve()}
    const runId = state.record.run_id
    const appendStepEvent = (line: StepEvent): Promise<void> => {
      if (!timeline.open) return Promise.resolve()
      const clean: StepEvent = {
        ...line,
        ...(line.summary !== undefined ? {summary: redact(line.summary)} : {}),
        ...(line.reason !== undefined ? {reason: redact(line.reason)} : {}),
      }
      const appended = timeline.tail.then(async () => {
        if (!timeline.open) return
        await env.appendEvent(runId, {...clean, step: step.id, seq, attempt})
        env.deps.onProgress?.({type: 'step_event', run_id: runId, step: step.id, seq, event: clean})
        if (clean.event === 'tool_call_result') tracing().toolCall(runId, step.id, clean)
      })
      timeline.tail = appended.catch(() => undefined)
      return appended
    }
    const context: StepContext = {
      step,
      pipeline: state.settings.pipeline,
      run: state.record,
      spec: state.spec,
      history: state.history,
      policy,
      provider: env.deps.provider,
      cwd: state.settings.cwd,
      get signal() {
        return abort.signal
      },
      attempt,
      now: env.now,
      user: env.user,
      ledger: env.ledger,
      // Built when a kind asks: most steps read neither, and a noop chain would pay for them per step.
      get slotsDir() {
        return slotsDir()
      },
      hook: (point) => env.deps.hook?.(point),
      render: (text, aliases) => {
        const {evaluator, secrets} = state.exprs
        if (!evaluator) throw new PipeError('E_INTERNAL', `step "${step.id}" evaluates ${JSON.stringify(text)}, but its pipeline has no expressions`)
        // The history does not change while the step runs: the context is built and converted once, not per item of a foreach.
        if (!renderContext) {
          const values = contextFor(state.record, state.history.snapshots, state.spec, secrets)
          renderContext = {values, bound: evaluator.bind(values)}
        }
        const {values, bound} = renderContext
        return explained(values, () => bound.withAliases(aliasValues(aliases)).render(text))
      },
      get children() {
        return childrenOf()
      },
      state: {
        read: () => env.deps.store.readStepState(state.record.run_id, step.id, seq),
        write: (value) => env.deps.store.writeStepState(state.record.run_id, step.id, seq, value),
        earlier: async () => {
          const out: Array<{seq: number; state: unknown}> = []
          for (const s of retriedSeqs(state.record, step.id, seq)) {
            const value = await env.deps.store.readStepState(state.record.run_id, step.id, s)
            if (value !== undefined) out.push({seq: s, state: value})
          }
          return out
        },
      },
      event: appendStepEvent,
    }
    try {
      // Expressions are resolved on every attempt, inside the try: a failing one is this step's error (E_CONFIG, not retried).
      let resolved: Record<string, JsonValue> = {}
      const {evaluator, secrets} = state.exprs
      if (evaluator) {
        const values = contextFor(state.record, state.history.snapshots, state.spec, secrets)
        const bound = evaluator.bind(values)
        if (step.when !== undefined) {
          if (!explained(values, () => condition(step, bound))) {
            const skipped: StepDone = {
              type: 'done',
              outcome: 'skipped',
              reason: `when: ${step.when.trim()} is false`,
              inputs: {resolved: {when: false}},
              outputs: {},
            }
            return {result: skipped, errors, attempts: attempt, skipped: true}
          }
          resolved.when = true
        }
        const r = explained(values, () => resolveStep(step, bound, deferredFields(handler, step)))
        context.step = r.step
        resolved = {...resolved, ...r.values}
      }
      // Before it acts, with its values resolved (the commands a person is shown are the ones it would run).
      if (!confirmed) {
        const gate = stepGate(context.step, handler, seq, {run: state.record, policy, cwd: state.settings.cwd})
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
      const result = checkedOutputs(handler, context.step, context.pipeline, await Promise.race([handler.run(context as never), aborted]))
      if (result.type === 'done' && Object.keys(resolved).length > 0) {
        // A kind may record values it evaluated itself (a choice's whens) under the same key.
        const own = result.inputs?.['resolved']
        result.inputs = {...(result.inputs ?? {}), resolved: {...resolved, ...(own !== null && typeof own === 'object' ? own : {})}}
      }
      if (result.type === 'done' && confirmed) result.inputs = {...(result.inputs ?? {}), confirmation: confirmed}
      return {result, errors, attempts: attempt}
    } catch (raw) {
      if (raw instanceof Interrupted || outer?.aborted) throw new Interrupted('interrupted')
      const error = toPipeError(raw)
      if (error.blocking) blocked = true
      errors.push({
        code: error.code,
        message: redact(error.message),
        trace_id: newTraceId(),
        retryable: error.retryable,
        attempt,
        at: env.now().toISOString(),
        ...(error.hint ? {hint: redact(error.hint)} : {}),
        ...(error.details ? {details: redactDeep(JSON.parse(JSON.stringify(error.details)) as Record<string, unknown>)} : {}),
      })
      if (!error.retryable || attempt > maxRetries) return {errors, attempts: attempt, blocked}
      tracing().attemptFailed(runId, step.id, error)
      const delay = backoffFor(attempt - 1, (env.deps.random ?? Math.random)())
      env.deps.onProgress?.({type: 'step_retry', run_id: state.record.run_id, step: step.id, seq, attempt, delay_ms: delay, error: redact(error.message)})
      try {
        await env.sleep(delay, outer ?? new AbortController().signal)
      } catch {
        throw new Interrupted('interrupted')
      }
    } finally {
      cancelDeadline?.()
      outer?.removeEventListener('abort', onOuter)
      timeline.open = false
      await timeline.tail
    }
  }
}
