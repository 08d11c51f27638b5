/**
 * What a step's handler is given for one attempt (StepContext, steps/types.ts), built in one typed
 * place: the context of a step of kind K is a StepContext<StepOf<K>>, the very type its handler's
 * `run` declares, so a field the engine forgets or mistypes is a compile error.
 */
import path from 'node:path'
import {PipeError} from '../errors.js'
import type {JsonValue} from '../expr/index.js'
import type {ChildRuns, StepContext, StepEvent, StepKind, StepOf} from '../steps/types.js'
import type {Ledger} from '../store/file/ledger.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import type {CanonicalSpec} from '../types/spec.js'
import {tracing} from '../telemetry/tracing.js'
import {redact} from '../util/redact.js'
import type {ParentStep} from './children.js'
import {retriedSeqs} from './cursor.js'
import type {EngineDeps, RunSettings} from './engine-types.js'
import {aliasValues, contextFor, explained, type RunExpressions} from './expressions.js'
import type {History} from './history.js'

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
export interface RunAtStep {
  record: RunRecord
  settings: RunSettings
  history: History
  spec: CanonicalSpec | null
  exprs: RunExpressions
}

/** What a step's attempt is and has: built for each attempt, its renderer once for the step. */
export interface AttemptOf<K extends StepKind> {
  env: AttemptEnvironment
  /** The step as written (the attempt resolves its expressions into the context's step). */
  step: StepOf<K>
  seq: number
  attempt: number
  run: RunAtStep
  /** The attempt's own signal, made only when read (see attempt.ts StepAbort). */
  signal: () => AbortSignal
  render: StepContext['render']
  /** The budgets over the step, when any applies (engine/budget.ts). */
  budget?: NonNullable<StepContext['budget']>
}

/** One attempt's context, and `close`, which stops its timeline lines and waits for those under way. */
export function stepContext<K extends StepKind>(of: AttemptOf<K>): {context: StepContext<StepOf<K>>; close: () => Promise<void>} {
  const {env, step, seq, attempt, run} = of
  const runId = run.record.run_id
  const {store} = env.deps
  let children: ChildRuns | undefined
  // A step's lines are appended one at a time, and none after the attempt ended (an abandoned
  // step still running must not race the engine's own lines on the chain).
  const timeline = {open: true, tail: Promise.resolve()}
  const event = (line: StepEvent): Promise<void> => {
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
  const context: StepContext<StepOf<K>> = {
    step,
    pipeline: run.settings.pipeline,
    run: run.record,
    spec: run.spec,
    history: run.history,
    policy: run.settings.policy,
    provider: env.deps.provider,
    ...(of.budget ? {budget: of.budget} : {}),
    cwd: run.settings.cwd,
    get signal() {
      return of.signal()
    },
    attempt,
    now: env.now,
    user: env.user,
    ledger: env.ledger,
    // Built when a kind asks: most steps read neither, and a noop chain would pay for them per step.
    get slotsDir() {
      return path.join(store.root, 'locks')
    },
    hook: (point) => env.deps.hook?.(point),
    render: of.render,
    get children() {
      return (children ??= env.children({parent: run.record, step, seq, settings: run.settings, snapshots: run.history.snapshots}))
    },
    state: {
      read: () => store.readStepState(runId, step.id, seq),
      write: (value) => store.writeStepState(runId, step.id, seq, value),
      earlier: async () => {
        const out: Array<{seq: number; state: unknown}> = []
        for (const s of retriedSeqs(run.record, step.id, seq)) {
          const value = await store.readStepState(runId, step.id, s)
          if (value !== undefined) out.push({seq: s, state: value})
        }
        return out
      },
    },
    event,
  }
  return {
    context,
    close: async () => {
      timeline.open = false
      await timeline.tail
    },
  }
}

/**
 * A step's `render` (StepContext.render), shared by its attempts: the history does not change
 * while the step runs, so the expression context is built and converted once, not per item of a
 * foreach.
 */
export function renderer(stepId: string, run: RunAtStep): StepContext['render'] {
  let built: {values: ReturnType<typeof contextFor>; bound: ReturnType<NonNullable<RunExpressions['evaluator']>['bind']>} | undefined
  return (text, aliases): JsonValue => {
    const {evaluator} = run.exprs
    if (!evaluator) throw new PipeError('E_INTERNAL', `step "${stepId}" evaluates ${JSON.stringify(text)}, but its pipeline has no expressions`)
    if (!built) {
      const values = contextFor(run.record, run.history.snapshots, run.spec, run.exprs)
      built = {values, bound: evaluator.bind(values)}
    }
    const {values, bound} = built
    return explained(values, () => bound.withAliases(aliasValues(aliases)).render(text))
  }
}
