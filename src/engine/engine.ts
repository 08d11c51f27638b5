/**
 * The generic interpreter. It walks any valid pipeline graph, knows no step by name, and leaves a
 * snapshot for every step it runs, on success and on failure, before it moves on. The snapshots
 * are the source of truth for where a run stands: resuming derives the next step, the seq, the
 * loop counts and the current spec version from them, so a crash at any point loses nothing that
 * was recorded and repeats nothing that was.
 */
import {PipeError, toPipeError} from '../errors.js'
import {catalogOf, registry as defaultRegistry} from '../steps/registry.js'
import type {ChildResult, ChildRuns, StepHandler, StepKind, StepRegistry} from '../steps/types.js'
import {Ledger} from '../store/ledger.js'
import {childrenOf} from '../store/queries.js'
import type {RunRecord, RunStatus} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {redactDeep} from '../util/redact.js'
import {currentUser} from '../util/user.js'
import {sleep} from '../util/sleep.js'
import {dotGitOf} from '../util/git-dir.js'
import {newTraceId} from '../util/trace.js'
import {attemptStep, Interrupted, type AttemptEnvironment, type Executed} from './attempt.js'
import {childResultOf, childRuns, type ParentStep} from './children.js'
import {commitStep, recoverCommit} from './commit.js'
import {cursorOf, redrivenOf, retriedKey, type Cursor} from './cursor.js'
import type {EngineDeps, ProgressEvent, ResumeOptions, RunOutcome, RunSettings, StartOptions} from './engine-types.js'
import {contextFor, evaluatorFor, iterationBound, readSecrets, usesExpressions, type RunExpressions} from './expressions.js'
import {History} from './history.js'
import {isFinal, isRedrivable} from './lifecycle.js'
import {journalOf} from './record.js'
import {takeInput} from './resume-input.js'
import {RunKeeper} from './run-keeper.js'
import {assertResumable, canRedrive, redrivePoint} from './redrive.js'
import {newRun, type RunBirth} from './run-record.js'

export type {EngineDeps, ProgressEvent, ResumeOptions, RunOutcome, RunSettings, StartOptions} from './engine-types.js'

export class Engine {
  private readonly registry: StepRegistry
  private readonly now: () => Date
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>
  private readonly user: string
  private readonly ledger: Ledger
  /** What a step's attempts use of this engine (attempt.ts). */
  private readonly attempts: AttemptEnvironment

  /** The records of the runs this engine drives now. */
  private readonly keeper: RunKeeper

  /** Where the run this engine drove last stood when its drive ended: its record and last snapshot (for a parent's step, see childRuns). */
  private readonly ended = new Map<string, {record: RunRecord; last: Snapshot | undefined}>()

  constructor(private readonly deps: EngineDeps) {
    this.ledger = deps.store.ledger()
    this.registry = deps.registry ?? defaultRegistry
    this.now = deps.now ?? (() => new Date())
    this.sleep = deps.sleep ?? sleep
    this.user = deps.user ?? currentUser()
    this.keeper = new RunKeeper(deps.store, this.now, this.user, deps.onProgress)
    this.attempts = {
      deps,
      now: this.now,
      user: this.user,
      ledger: this.ledger,
      sleep: this.sleep,
      appendEvent: async (runId, event) => void (await this.keeper.appendEvent(runId, event)),
      children: (of) => this.childRuns(of),
    }
  }

  async start(options: StartOptions): Promise<RunOutcome> {
    const {store} = this.deps
    const now = this.now()
    const title = options.pipeline.pipeline.name
    let featureId = options.featureId
    if (featureId) await store.ensureFeature(featureId, now)
    else featureId = await store.createFeature(now, title)
    const birth = newRun({
      featureId,
      pipeline: options.pipeline,
      policy: options.policy,
      provider: options.provider,
      input: options.input,
      ...(options.inputs ? {inputs: options.inputs} : {}),
      cwd: options.cwd,
      // Which repository git steps may use: one that appears later may hold a command's hooks.
      workspaceGit: dotGitOf(options.cwd),
      ...(options.toolVersions ? {toolVersions: options.toolVersions} : {}),
      ...(options.answers ? {answers: options.answers} : {}),
      ...(options.review ? {review: options.review} : {}),
      ...(options.replayOf ? {replayOf: options.replayOf} : {}),
      reason: `pipeline ${options.pipeline.pipeline.name}, input ${options.input.ref}`,
      now,
      user: this.user,
    })
    return this.launch(birth, options, 'run-created')
  }

  /** Creates a run started and held, and drives it (see Store.createStartedRun); for a child run too (see children.ts). */
  async launch(birth: RunBirth, settings: RunSettings, hookPoint: string): Promise<RunOutcome> {
    const born = await this.deps.store.createStartedRun(birth.draft, birth.now, birth.created, this.keeper.statusChange('running', 'started'))
    try {
      await this.deps.hook?.(hookPoint)
    } catch (error) {
      await born.release()
      throw error
    }
    return this.drive(born.record.run_id, settings, 'started', undefined, born)
  }

  async resume(runId: string, options: ResumeOptions): Promise<RunOutcome> {
    const {store} = this.deps
    const record = await store.readRun(runId)
    assertResumable(record)
    if (record.pipeline.hash !== options.pipeline.hash) {
      throw new PipeError('E_CONFLICT', `the pipeline ${record.pipeline.path} changed since run ${runId} started`, {
        hint: 'Restore the pipeline file (and any pipeline it extends) as it was, or start a new run with the changed pipeline.',
      })
    }
    if (isRedrivable(record.status)) {
      // Refuse a redrive that cannot start before anything is written.
      redrivePoint(record, await store.readSnapshots(runId))
      if (options.review) throw new PipeError('E_STATE', `run ${runId} is ${record.status}, not waiting for a review`, {hint: `Redrive it without a decision: pipe resume ${runId}`})
    }
    if (options.policy.version !== record.policy_version && !isRedrivable(record.status)) {
      throw new PipeError('E_STATE', `run ${runId} is ${record.status}; its policy changes only when a person redrives it after it failed or was blocked`, {
        hint: 'Resume it under the policy it runs with (leave out --policy), or cancel it and start a new run under the new policy.',
      })
    }
    // Taking in answers or a decision happens under the run's lock, so a run being driven elsewhere is never changed.
    return this.drive(runId, options, 'resumed', async () => {
      const current = await store.readRun(runId)
      assertResumable(current)
      await takeInput({store, now: this.now, user: this.user, registry: this.registry}, runId, current, options)
    })
  }

  /** Ends a run that is not being driven (paused, interrupted, blocked or pending) as cancelled. */
  async cancel(runId: string, reason: string): Promise<RunOutcome> {
    const {store} = this.deps
    const before = await store.readRun(runId)
    if (isFinal(before.status)) {
      throw new PipeError('E_STATE', `run ${runId} has already ended (${before.status})`, {hint: 'Nothing to cancel.'})
    }
    const release = await store.acquireRun(runId)
    try {
      const record = await store.readRun(runId)
      if (record.status === 'running') await this.keeper.setStatus(runId, 'interrupted', 'interrupted', {reason: `the process that ran it (pid ${record.owner.pid}) is gone`})
      await this.keeper.setStatus(runId, 'cancelled', 'cancelled', {reason, by: this.user}, (r) => {
        r.status_reason = `${reason} (by ${this.user})`
        delete r.pending
      })
    } finally {
      await release()
    }
    // Its children are cancelled too (each under its own lock): nothing the parent started goes on without it.
    for (const child of await childrenOf(store, runId)) {
      if (!isFinal(child.status)) await this.cancel(child.run_id, `parent run ${runId} was cancelled: ${reason}`)
    }
    return {run_id: runId, feature_id: before.feature_id, status: 'cancelled', spec_version: (await store.readRun(runId)).spec_version ?? null, steps_run: 0, reason}
  }

  private async drive(runId: string, settings: RunSettings, event: 'started' | 'resumed', prepare?: () => Promise<void>, born?: {record: RunRecord; release: () => Promise<void>}): Promise<RunOutcome> {
    const {store} = this.deps
    const release = born?.release ?? (await store.acquireRun(runId))
    try {
      if (born) {
        // Created started and held (Store.createStartedRun): nothing to read back, recover or record.
        this.keeper.hold(runId, born.record)
        await this.keeper.statusRecorded(runId, 'running', undefined)
        return await this.walk(runId, settings, true)
      }
      await prepare?.()
      const before = await store.readRun(runId)
      this.keeper.hold(runId, before)
      if (event === 'resumed' && isRedrivable(before.status)) {
        await this.redrive(runId, before, settings)
        return await this.walk(runId, settings)
      }
      if (before.status === 'running' && event === 'resumed') {
        // A run left running by a process that is gone: record that it was interrupted first.
        await this.keeper.setStatus(runId, 'interrupted', 'interrupted', {reason: `the process that ran it (pid ${before.owner.pid}) is gone`})
      }
      await this.keeper.setStatus(runId, 'running', event)
      return await this.walk(runId, settings)
    } finally {
      this.keeper.release(runId)
      await release()
    }
  }

  /** What a parent's step learns of a child run this engine drove (or, when it did not drive it now, of its records). */
  async childResult(runId: string): Promise<ChildResult> {
    const seen = this.ended.get(runId)
    if (seen) return childResultOf(seen.record, seen.last)
    const {store} = this.deps
    return childResultOf(await store.readRun(runId), (await store.readSnapshots(runId)).at(-1))
  }

  /**
   * A person resumes a failed or blocked run: the step whose snapshot stopped it runs again as a
   * new attempt with the next seq; every earlier snapshot stays as it was and the hash chain goes
   * on. The redrive, who did it and the policy it continues under are kept on the run and in its
   * timeline.
   */
  private async redrive(runId: string, record: RunRecord, settings: RunSettings): Promise<void> {
    const point = redrivePoint(record, await this.deps.store.readSnapshots(runId))
    const from = record.status as 'failed' | 'blocked'
    const at = this.now().toISOString()
    const policy = settings.policy.version
    const changed = policy !== record.policy_version
    const entry: NonNullable<RunRecord['redrives']>[number] = {seq: point.seq, step: point.step, from, by: this.user, at, policy_version: policy, ...(changed ? {previous_policy_version: record.policy_version, ...(record.policy_path ? {previous_policy_path: record.policy_path} : {})} : {})}
    const reason = `step ${point.step} (#${point.seq}) runs again${record.error ? ` after ${record.error.code}` : ''}${changed ? `; policy ${record.policy_version.slice(0, 19)} -> ${policy.slice(0, 19)}` : ''}`
    await this.keeper.setStatus(runId, 'running', 'redriven', {step: point.step, seq: point.seq, by: this.user, reason, ...(changed ? {policy_version: policy} : {})}, (r) => {
      r.redrives = [...(r.redrives ?? []), entry]
      if (changed) {
        r.policy_version = policy
        r.policy_path = settings.policy.file
      }
      delete r.error
    })
  }

  /** Walks the run from where its snapshots leave it; `fresh`: a run just created, which has none and no commit to recover. */
  private async walk(runId: string, settings: RunSettings, fresh = false): Promise<RunOutcome> {
    const {store} = this.deps
    const {pipeline} = settings.pipeline
    const steps = new Map(pipeline.steps.map((s) => [s.id, s]))
    const given = this.deps.hook
    // Without a hook (any run but a test's), each commit's checkpoints cost nothing: no promise per point.
    const hook = given ? async (point: string): Promise<void> => given(point) : undefined
    if (!fresh && (await recoverCommit(store, runId, hook))) await this.keeper.appendEvent(runId, {at: this.now().toISOString(), event: 'commit_recovered', reason: 'finished recording the step a crash interrupted'})
    const opening = this.keeper.record(runId)
    const base = opening.replay_of ? (await store.readSnapshots(opening.replay_of.run_id)).filter((s) => s.step.seq < opening.replay_of!.seq) : []
    // The run's own snapshots: read once, then each one this walk commits is added (only the lock holder writes them).
    const own = fresh ? [] : await store.readSnapshots(runId)
    const history = new History([...base, ...own], this.registry)
    const redriven = redrivenOf(opening, ...(opening.replay_of ? [await store.readRun(opening.replay_of.run_id)] : []))
    const cursor = cursorOf(opening.replay_of?.step ?? pipeline.start ?? pipeline.steps[0].id, base, own, redriven)
    if (pipeline.artifacts === true || this.deps.artifacts === true) {
      this.keeper.keepArtifacts(runId)
      // Whatever a crash left half-written is rebuilt from the records before the walk goes on.
      await this.keeper.writeArtifacts(runId)
    }
    let stepsRun = 0
    let current: CanonicalSpec | null = cursor.specVersion ? await store.readSpec(cursor.specVersion) : null
    // Secrets are read from the environment on every walk (never stored); the session checked they are set.
    const exprs: RunExpressions = {evaluator: usesExpressions(pipeline) ? await evaluatorFor(settings.pipeline, catalogOf(this.registry)) : null, secrets: readSecrets(pipeline)}
    let endReason: string | undefined
    const outcome = async (status: RunStatus, extra: Partial<RunOutcome> = {}): Promise<RunOutcome> => {
      const record = this.keeper.record(runId)
      // Only the latest: a long-lived engine drives many runs, and a child's engine drives one.
      this.ended.clear()
      this.ended.set(runId, {record, last: own.at(-1)})
      const redrivable = status === 'failed' ? {redrivable: canRedrive(record, own)} : {}
      return {run_id: runId, feature_id: record.feature_id, status, spec_version: cursor.specVersion, steps_run: stepsRun, ...redrivable, ...extra}
    }

    // A run whose last snapshot ended or paused it, but whose status was not yet recorded (a crash).
    const lastDecision = own.at(-1)?.decisions.at(-1)
    if ((lastDecision?.run_status === 'failed' || lastDecision?.run_status === 'cancelled') && !redriven.has(retriedKey(own.at(-1)!))) {
      const settled = await this.settle(runId, own.at(-1)!, cursor, outcome)
      if (settled) return settled
    }

    while (cursor.next !== null) {
      if (this.deps.signal?.aborted) return this.interrupt(runId, outcome)
      const step = steps.get(cursor.next)
      if (!step) {
        const reason = `step "${cursor.next}" is not in the pipeline`
        const error = {code: 'E_STATE', message: reason, trace_id: newTraceId()}
        await this.keeper.setStatus(runId, 'failed', 'failed', {reason, trace_id: error.trace_id}, (r) => (r.error = error))
        return outcome('failed', {reason, error})
      }
      const done = cursor.iterations.get(step.id) ?? 0
      let bound: number | undefined
      try {
        bound = step.max_iterations === undefined ? undefined : iterationBound(step, exprs, () => contextFor(this.keeper.record(runId), history.snapshots, current, exprs.secrets))
      } catch (raw) {
        const error = toPipeError(raw)
        const recorded = {code: error.code, message: error.message, step: step.id, ...(error.hint ? {hint: error.hint} : {})}
        await this.keeper.setStatus(runId, 'failed', 'failed', {reason: error.message, step: step.id}, (r) => {
          r.error = recorded
          r.status_reason = error.message
          r.spec_version = cursor.specVersion
        })
        return outcome('failed', {reason: error.message, error: recorded})
      }
      if (bound !== undefined && done >= bound) {
        const reason = `step "${step.id}" reached its bound of max_iterations ${bound}`
        await this.keeper.appendEvent(runId, {at: this.now().toISOString(), event: 'loop_exhausted', step: step.id, reason})
        if (step.on_exhausted !== undefined) {
          cursor.next = step.on_exhausted
          continue
        }
        const error = {code: 'E_LOOP_LIMIT', message: reason, step: step.id, hint: 'Answer the open questions more fully, or raise max_iterations in the pipeline.', trace_id: newTraceId()}
        await this.keeper.setStatus(runId, 'failed', 'failed', {reason, step: step.id, trace_id: error.trace_id}, (r) => {
          r.error = error
          r.status_reason = reason
          r.spec_version = cursor.specVersion
        })
        return outcome('failed', {reason, error})
      }

      const record = this.keeper.record(runId)
      const handler = this.registry[step.kind] as StepHandler<StepKind>
      const started = this.now()
      const seq = cursor.seq
      if (hook) await hook(`before-step:${step.id}`)
      let executed: Executed
      // Requests left over from an attempt that never recorded (an interrupted one) are not this step's.
      this.deps.replies?.take(runId, step.id)
      try {
        executed = await attemptStep(this.attempts, handler, step, seq, {record, settings, history, spec: current, exprs})
      } catch (error) {
        if (error instanceof Interrupted) return this.interrupt(runId, outcome)
        throw error
      }
      const {errors, attempts, blocked, skipped} = executed
      const modelCalls = this.deps.replies?.take(runId, step.id) ?? []
      // A reason may quote a resolved secret (an end's reason, a command line): never record or print it.
      const result = Object.keys(exprs.secrets).length > 0 && executed.result?.type === 'done' ? redactDeep(executed.result) : executed.result
      const ended = this.now()

      if (result?.type === 'await') {
        const pending = {kind: result.kind, step: step.id, since: ended.toISOString(), reason: result.reason, ...(result.questions ? {questions: result.questions} : {}), ...(result.action ? {action: result.action} : {})}
        await this.keeper.setStatus(runId, 'awaiting_input', 'paused', {reason: result.reason, step: step.id}, (r) => {
          r.pending = pending
          r.status_reason = result.reason
          r.spec_version = cursor.specVersion
        })
        return outcome('awaiting_input', {reason: result.reason, pending})
      }

      const journal = journalOf({record, step, handler, registry: this.registry, timing: {seq, iteration: done + 1, started, ended, attempts, blocked: blocked === true, skipped: skipped === true, secrets: Object.keys(exprs.secrets).length > 0, modelCalls}, errors, result, current, settings, before: history.snapshots})
      const committed = await commitStep(store, journal, hook)
      const snapshot = committed.snapshot
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
      this.deps.onProgress?.({
        type: 'step_end',
        run_id: runId,
        step: step.id,
        kind: step.kind,
        seq,
        outcome: decision.decision,
        ok: result !== undefined,
        failure: result === undefined || handler.failures?.[decision.decision] !== undefined,
        duration_ms: snapshot.step.duration_ms ?? 0,
        reason: decision.reason,
        spec_version_out: snapshot.spec_version_out,
      })
      await this.keeper.writeArtifacts(runId)
      if (hook) await hook(`after-step:${step.id}`)
      const ending = await this.settle(runId, snapshot, cursor, outcome)
      if (ending) return ending
      if (decision.run_status === 'succeeded') endReason = decision.reason
      cursor.next = decision.next_step
    }

    const reason = endReason ?? `the pipeline ended after ${stepsRun} step(s) in this session`
    await this.keeper.setStatus(runId, 'succeeded', 'succeeded', {reason}, (r) => {
      r.spec_version = cursor.specVersion
      delete r.error
    })
    return outcome('succeeded', {reason})
  }

  /** Applies what the last snapshot's decision says about the run: it failed, was cancelled, or waits for a review. */
  private async settle(runId: string, snapshot: Snapshot | null, cursor: Cursor, outcome: (status: RunStatus, extra?: Partial<RunOutcome>) => Promise<RunOutcome>): Promise<RunOutcome | null> {
    const decision = snapshot?.decisions.at(-1)
    if (!snapshot || !decision?.run_status || decision.run_status === 'succeeded') return null
    const step = snapshot.step.name
    if (decision.run_status === 'failed' || decision.run_status === 'blocked') {
      const status = decision.run_status
      const last = snapshot.errors.at(-1)
      // The error keeps the trace id its snapshot recorded: stderr, the log, the record and the event name one occurrence.
      const error = {code: last?.code ?? 'E_INTERNAL', message: last?.message ?? decision.reason, step, ...(last?.hint ? {hint: last.hint} : {}), trace_id: last?.trace_id ?? newTraceId()}
      const reason = status === 'failed' ? `step ${step} failed: ${error.message}` : `step ${step} needs a person: ${error.message}`
      await this.keeper.setStatus(runId, status, status, {reason, step, trace_id: error.trace_id}, (r) => {
        r.error = error
        r.status_reason = reason
        r.spec_version = cursor.specVersion
      })
      return outcome(status, {reason, error})
    }
    if (decision.run_status === 'cancelled') {
      await this.keeper.setStatus(runId, 'cancelled', 'cancelled', {reason: decision.reason, step, ...(decision.by ? {by: decision.by} : {})}, (r) => {
        r.status_reason = decision.reason
        r.spec_version = cursor.specVersion
      })
      return outcome('cancelled', {reason: decision.reason})
    }
    const pending = {kind: 'review' as const, step, since: snapshot.step.ended_at, reason: decision.reason}
    await this.keeper.setStatus(runId, 'awaiting_input', 'paused', {reason: decision.reason, step}, (r) => {
      r.pending = pending
      r.status_reason = decision.reason
      r.spec_version = cursor.specVersion
    })
    return outcome('awaiting_input', {reason: decision.reason, pending})
  }

  private async interrupt(runId: string, outcome: (status: RunStatus, extra?: Partial<RunOutcome>) => Promise<RunOutcome>): Promise<RunOutcome> {
    const reason = 'interrupted by a signal; pipe resume continues from the last snapshot'
    await this.keeper.setStatus(runId, 'interrupted', 'interrupted', {reason}, (r) => (r.status_reason = reason))
    return outcome('interrupted', {reason})
  }

  /** The child runs of a step, each driven by a sub-engine that reports its progress under the step (and item). */
  private childRuns(of: ParentStep): ChildRuns {
    const {onProgress, signal: _own, ...shared} = this.deps
    const artifacts = of.settings.pipeline.pipeline.artifacts === true ? {artifacts: true} : {}
    return childRuns(
      {
        store: this.deps.store,
        registry: this.registry,
        now: this.now,
        user: this.user,
        signal: this.deps.signal,
        engineFor: (signal, label) => new Engine({...shared, user: this.user, ...artifacts, ...(signal ? {signal} : {}), ...(onProgress ? {onProgress: (event: ProgressEvent) => onProgress({...event, under: [label, ...(event.under ?? [])]})} : {})}),
      },
      of,
    )
  }
}
