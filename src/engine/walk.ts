/**
 * The walk of one run: from where its snapshots leave it, step after step, until the run ends,
 * pauses or is stopped. Each step's attempts (attempt.ts) give a result, the record (record.ts)
 * with its decision (decide.ts) is committed (RunStore.commitStep, all or nothing) before the run moves on, and the cursor
 * (cursor.ts) moves with it; a decision that ends or pauses the run is settled on its record.
 */
import {toPipeError} from '../errors.js'
import {approvalRule, gateDeadline} from '../policy/approvals.js'
import {confirmDeadline} from '../policy/confirm.js'
import {catalogOf, failureOf} from '../steps/registry.js'
import type {StepHandler, StepKind, StepOf, StepRegistry} from '../steps/types.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {tracing} from '../telemetry/tracing.js'
import {breathe} from '../util/breathe.js'
import {onCancelBell} from '../util/cancel-bell.js'
import {redactDeep} from '../util/redact.js'
import {evaluateOutputs} from './run-outputs.js'
import {attemptStep, Cancelled, cancelledStep, Interrupted, type AttemptEnvironment, type Executed} from './attempt.js'
import {cursorOf, redrivenOf, retriedKey} from './cursor.js'
import type {EngineDeps, RunOutcome, RunSettings} from './engine-types.js'
import {contextFor, evaluatorFor, iterationBound, policyValues, readSecrets, usesExpressions, type RunExpressions} from './expressions.js'
import {History} from './history.js'
import {stepCommitOf} from './record.js'
import {canRedrive} from './redrive.js'
import {safeToRetry} from './retry.js'
import type {RunKeeper, RunStop} from './run-keeper.js'

/** What a walk uses of the engine that drives the run. */
export interface WalkEnvironment {
  deps: EngineDeps
  registry: StepRegistry
  now: () => Date
  keeper: RunKeeper
  attempts: AttemptEnvironment
  /** Where the walk left the run (its record and last snapshot), for a parent's step to read. */
  ended(runId: string, record: RunRecord, last: Snapshot | undefined): void
}

/** Walks the run from where its snapshots leave it; `fresh`: a run just created, which has none and no commit to recover. */
export async function walk(env: WalkEnvironment, runId: string, settings: RunSettings, fresh = false): Promise<RunOutcome> {
  // pipe cancel records a request and rings (util/cancel-bell.ts); this run stops only for its own request.
  const cancelling = new AbortController()
  const {store} = env.deps
  const look = async (): Promise<void> => {
    const asked = await store.cancelRequest?.(runId)
    if (asked && !cancelling.signal.aborted) cancelling.abort(asked)
  }
  const unsubscribe = onCancelBell(() => void look().catch(() => undefined))
  try {
    await look()
    return await walkRun(env, runId, settings, fresh, cancelling.signal)
  } finally {
    unsubscribe()
  }
}

async function walkRun(env: WalkEnvironment, runId: string, settings: RunSettings, fresh: boolean, cancel: AbortSignal): Promise<RunOutcome> {
  const {store} = env.deps
  const {pipeline} = settings.pipeline
  const steps = new Map(pipeline.steps.map((s) => [s.id, s]))
  const given = env.deps.hook
  // Without a hook (any run but a test's), each commit's checkpoints cost nothing: no promise per point.
  const hook = given ? async (point: string): Promise<void> => given(point) : undefined
  if (!fresh && (await store.recover(runId, hook)))
    await env.keeper.appendEvent(runId, {at: env.now().toISOString(), event: 'commit_recovered', reason: 'finished recording the step a crash interrupted'})
  const opening = env.keeper.record(runId)
  const base = opening.replay_of ? (await store.readSnapshots(opening.replay_of.run_id)).filter((s) => s.step.seq < opening.replay_of!.seq) : []
  // The run's own snapshots: read once, then each one this walk commits is added (only the lock holder writes them).
  const own = fresh ? [] : await store.readSnapshots(runId)
  const history = new History([...base, ...own], env.registry)
  const redriven = redrivenOf(opening, ...(opening.replay_of ? [await store.readRun(opening.replay_of.run_id)] : []))
  const cursor = cursorOf(opening.replay_of?.step ?? pipeline.start ?? pipeline.steps[0].id, base, own, redriven)
  if (pipeline.artifacts === true || env.deps.artifacts === true) {
    env.keeper.keepArtifacts(runId)
    // Whatever a crash left half-written is rebuilt from the records before the walk goes on.
    await env.keeper.writeArtifacts(runId)
  }
  let stepsRun = 0
  let current: CanonicalSpec | null = cursor.specVersion ? await store.readSpec(cursor.specVersion) : null
  // Secrets are read from the environment on every walk (never stored); the session checked they are set.
  const exprs: RunExpressions = {
    evaluator: usesExpressions(pipeline) ? await evaluatorFor(settings.pipeline, catalogOf(env.registry)) : null,
    secrets: readSecrets(pipeline, settings.env),
    policy: policyValues(settings.policy.policy),
  }
  let endReason: string | undefined
  // Every status the walk leaves the run in is recorded the one way (RunKeeper.stop), with the spec version it reached.
  const stop: Stop = async (change) => {
    const {error} = await env.keeper.stop(runId, {...change, specVersion: cursor.specVersion})
    const record = env.keeper.record(runId)
    // Only the latest: a long-lived engine drives many runs, and a child's engine drives one.
    env.ended(runId, record, own.at(-1))
    const redrivable = change.status === 'failed' ? {redrivable: canRedrive(record, own)} : {}
    // Which policy the run is under: a policy.yaml found upward is named, so a planted or unexpected one is seen.
    const policy = {policy: record.policy_path ?? null}
    return {
      run_id: runId,
      feature_id: record.feature_id,
      status: change.status,
      spec_version: cursor.specVersion,
      steps_run: stepsRun,
      ...policy,
      ...redrivable,
      reason: change.reason,
      ...(change.pending ? {pending: change.pending} : {}),
      ...(error ? {error} : {}),
    }
  }

  // A run whose last snapshot ended it, but whose status was not yet recorded (a crash): it ends so
  // now. A failed or blocked one runs its step again only when a person redrives it (a resume of the
  // run as it then stands), never as the crash's own resume. A pause is left to its step, which
  // pauses again or takes the answer given.
  const lastDecision = own.at(-1)?.decisions.at(-1)
  const ending = lastDecision?.run_status === 'failed' || lastDecision?.run_status === 'blocked' || lastDecision?.run_status === 'cancelled'
  if (ending && !redriven.has(retriedKey(own.at(-1)!))) {
    const settled = await settle(own.at(-1)!, stop)
    if (settled) return settled
  }

  while (cursor.next !== null) {
    // Instant steps never wait on the loop: without a turn now and then a signal would wait for the whole run.
    await breathe()
    if (env.deps.signal?.aborted) return interrupt(stop)
    if (cancel.aborted) return stop({status: 'cancelled', reason: String(cancel.reason)})
    const step = steps.get(cursor.next)
    if (!step) {
      const reason = `step "${cursor.next}" is not in the pipeline`
      return stop({status: 'failed', reason, error: {code: 'E_STATE', message: reason}})
    }
    const done = cursor.iterations.get(step.id) ?? 0
    let bound: number | undefined
    try {
      bound =
        step.max_iterations === undefined
          ? undefined
          : iterationBound(step, exprs, () => contextFor(env.keeper.record(runId), history.snapshots, current, exprs))
    } catch (raw) {
      const error = toPipeError(raw)
      return stop({
        status: 'failed',
        reason: error.message,
        step: step.id,
        error: {code: error.code, message: error.message, step: step.id, ...(error.hint ? {hint: error.hint} : {})},
      })
    }
    if (bound !== undefined && done >= bound) {
      const reason = `step "${step.id}" reached its bound of max_iterations ${bound}`
      await env.keeper.appendEvent(runId, {at: env.now().toISOString(), event: 'loop_exhausted', step: step.id, reason})
      if (step.on_exhausted !== undefined) {
        cursor.next = step.on_exhausted
        continue
      }
      const hint = 'Answer the open questions more fully, or raise max_iterations in the pipeline.'
      return stop({status: 'failed', reason, step: step.id, error: {code: 'E_LOOP_LIMIT', message: reason, step: step.id, hint}})
    }

    const handler = handlerOf(env.registry, step)
    const started = env.now()
    const seq = cursor.seq
    if (hook) await hook(`before-step:${step.id}`)
    let executed: Executed
    // Requests left over from an attempt that never recorded (an interrupted one) are not this step's.
    env.deps.replies?.take(runId, step.id)
    await env.keeper.stepStarted(runId, step.id, seq, safeToRetry(step, handler))
    const record = env.keeper.record(runId)
    try {
      executed = await attemptStep(env.attempts, handler, step, seq, {record, settings, history, spec: current, exprs}, cancel)
    } catch (error) {
      // Stopped from outside (its parent's step, a worker's watch) while this run was asked to cancel: the cancel it is.
      const asked = error instanceof Interrupted ? await store.cancelRequest?.(runId) : undefined
      if (error instanceof Interrupted && !asked) return interrupt(stop)
      if (!(error instanceof Cancelled) && !asked) throw error
      // Every step leaves a snapshot (seed 002): a cancelled one records what it did until then and ends the run.
      executed = cancelledStep(error instanceof Cancelled ? error : new Cancelled(asked!))
    }
    const {errors, attempts, blocked, skipped, cancelled} = executed
    const modelCalls = env.deps.replies?.take(runId, step.id) ?? []
    // A reason may quote a resolved secret (an end's reason, a command line): never record or print it.
    const result = Object.keys(exprs.secrets).length > 0 && executed.result?.type === 'done' ? redactDeep(executed.result) : executed.result
    const ended = env.now()

    if (result?.type === 'await') {
      // A person's time to confirm may be bounded (policy confirm.timeout_s); what a passed deadline does is fixed now (app/sessions/confirm-deadline.ts acts on it).
      // A gate under an approvals rule takes that rule's deadline (and names the rule), else a confirmation takes confirm.timeout_s's.
      const rule = approvalRule(settings.policy, {step: step.id, kind: result.kind})
      const deadline = rule ? gateDeadline(rule, ended) : result.kind === 'confirm' ? confirmDeadline(settings.policy, ended) : undefined
      const pending = {
        kind: result.kind,
        step: step.id,
        since: ended.toISOString(),
        reason: result.reason,
        ...(rule ? {rule: rule.name} : {}),
        ...deadline,
        ...(result.questions ? {questions: result.questions} : {}),
        ...(result.action ? {action: result.action} : {}),
        ...(result.budget ? {budget: result.budget} : {}),
      }
      const paused = await stop({status: 'awaiting_input', reason: result.reason, step: step.id, pending})
      tracing().stepEnded(runId, step.id, {awaiting: result.kind})
      return paused
    }

    const commit = stepCommitOf({
      record,
      step,
      handler,
      registry: env.registry,
      timing: {
        seq,
        iteration: done + 1,
        started,
        ended,
        attempts,
        blocked: blocked === true,
        skipped: skipped === true,
        cancelled: cancelled === true,
        secrets: Object.keys(exprs.secrets).length > 0,
        modelCalls,
      },
      errors,
      result,
      current,
      settings,
      before: history.snapshots,
    })
    const committed = await store.commitStep(commit, hook)
    const snapshot = committed.snapshot
    tracing().stepEnded(runId, step.id, {snapshot})
    history.snapshots.push(snapshot)
    own.push(snapshot)
    stepsRun++
    cursor.iterations.set(step.id, done + 1)
    cursor.seq = seq + 1
    if (committed.spec) {
      cursor.specVersion = committed.spec.meta.spec_version
      current = committed.spec
    }
    const decision = snapshot.decisions.at(-1)!
    env.deps.onProgress?.({
      type: 'step_end',
      run_id: runId,
      step: step.id,
      kind: step.kind,
      seq,
      outcome: decision.decision,
      ok: result !== undefined,
      failure: result === undefined || failureOf(handler, decision.decision) !== undefined,
      duration_ms: snapshot.step.duration_ms ?? 0,
      reason: decision.reason,
      spec_version_out: snapshot.spec_version_out,
    })
    await env.keeper.writeArtifacts(runId)
    if (hook) await hook(`after-step:${step.id}`)
    const ending = await settle(snapshot, stop)
    if (ending) return ending
    if (decision.run_status === 'succeeded') endReason = decision.reason
    cursor.next = decision.next_step
  }

  const reason = endReason ?? `the pipeline ended after ${stepsRun} step(s) in this session`
  let outputs: RunRecord['outputs']
  if (pipeline.outputs !== undefined && exprs.evaluator) {
    try {
      outputs = evaluateOutputs(pipeline, exprs.evaluator, contextFor(env.keeper.record(runId), history.snapshots, current, exprs))
    } catch (thrown) {
      // Its steps succeeded, but what it was declared to give back is wrong: the run fails, naming the output.
      const failure = toPipeError(thrown)
      const error = {code: failure.code, message: failure.message, ...(failure.hint ? {hint: failure.hint} : {})}
      return stop({status: 'failed', reason: `the outputs failed: ${failure.message}`, error})
    }
  }
  return stop({status: 'succeeded', reason, ...(outputs !== undefined ? {outputs} : {})})
}

/** Records where the walk leaves the run (see RunKeeper.stop) and gives the run's outcome. */
type Stop = (change: Omit<RunStop, 'specVersion' | 'recordReason'>) => Promise<RunOutcome>

/** The handler of the step's own kind: the one place a step meets its handler, so the two always agree (attemptStep checks its context against it). */
function handlerOf<K extends StepKind>(registry: StepRegistry, step: StepOf<K>): StepHandler<K> {
  return registry[step.kind]
}

/** Applies what the last snapshot's decision says about the run: it failed, was cancelled, or waits for a review. */
async function settle(snapshot: Snapshot | null, stop: Stop): Promise<RunOutcome | null> {
  const decision = snapshot?.decisions.at(-1)
  if (!snapshot || !decision?.run_status || decision.run_status === 'succeeded') return null
  const step = snapshot.step.name
  if (decision.run_status === 'failed' || decision.run_status === 'blocked') {
    const status = decision.run_status
    const last = snapshot.errors.at(-1)
    // The error keeps the trace id its snapshot recorded: stderr, the log, the record and the event name one occurrence.
    const error = {
      code: last?.code ?? 'E_INTERNAL',
      message: last?.message ?? decision.reason,
      step,
      ...(last?.hint ? {hint: last.hint} : {}),
      ...(last?.trace_id ? {trace_id: last.trace_id} : {}),
    }
    const reason = status === 'failed' ? `step ${step} failed: ${error.message}` : `step ${step} needs a person: ${error.message}`
    return stop({status, reason, step, error})
  }
  if (decision.run_status === 'cancelled') return stop({status: 'cancelled', reason: decision.reason, step, ...(decision.by ? {by: decision.by} : {})})
  const pending = {kind: 'review' as const, step, since: snapshot.step.ended_at, reason: decision.reason}
  return stop({status: 'awaiting_input', reason: decision.reason, step, pending})
}

function interrupt(stop: Stop): Promise<RunOutcome> {
  return stop({status: 'interrupted', reason: 'interrupted by a signal; pipe resume continues from the last snapshot'})
}
