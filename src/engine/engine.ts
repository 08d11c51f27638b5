/**
 * The generic interpreter. It walks any valid pipeline graph, knows no step by name, and leaves a
 * snapshot for every step it runs, on success and on failure, before it moves on. The snapshots
 * are the source of truth for where a run stands: resuming derives the next step, the seq, the
 * loop counts and the current spec version from them, so a crash at any point loses nothing that
 * was recorded and repeats nothing that was.
 */
import {holdsOf} from '../store/budget-holds.js'
import {PipeError} from '../errors.js'
import {openTracing, type RunSession} from '../telemetry/tracing.js'
import {waitsBefore} from './waits.js'
import {registry as defaultRegistry} from '../steps/registry.js'
import type {ChildResult, ChildRuns, StepRegistry} from '../steps/types.js'
import type {RunStore} from '../store/types.js'
import {childrenOf} from '../store/queries.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {currentUser} from '../util/user.js'
import {sleep} from '../util/sleep.js'
import {childResultOf, childRuns, type ParentStep} from './children.js'
import type {EngineDeps, ProgressEvent, ResumeOptions, RunOutcome, RunSettings, StartOptions} from './engine-types.js'
import {isFinal, isRedrivable} from './lifecycle.js'
import {assertResumable, redrivePoint} from './redrive.js'
import {takeInput, type InputEnvironment, type TakenInput} from './resume-input.js'
import {plannedSkips} from './tasks.js'
import {RunKeeper, type RunStop} from './run-keeper.js'
import {birthOf, type RunBirth} from './run-record.js'
import {walk, type WalkEnvironment} from './walk.js'
import {commitWaitingCancelled, waitingStep} from './cancel-waiting.js'

export type {EngineDeps, ProgressEvent, ResumeOptions, RunOutcome, RunSettings, StartOptions} from './engine-types.js'

export class Engine {
  private readonly registry: StepRegistry
  private readonly now: () => Date
  private readonly user: string
  /** The records of the runs this engine drives now. */
  private readonly keeper: RunKeeper
  /** What a walk uses of this engine (walk.ts), and through it a step's attempts (attempt.ts). */
  private readonly walker: WalkEnvironment

  /** Where the run this engine drove last stood when its drive ended: its record and last snapshot (for a parent's step, see childRuns). */
  private readonly ended = new Map<string, {record: RunRecord; last: Snapshot | undefined}>()

  constructor(private readonly deps: EngineDeps) {
    this.registry = deps.registry ?? defaultRegistry
    this.now = deps.now ?? (() => new Date())
    this.user = deps.user ?? currentUser()
    this.keeper = new RunKeeper(deps.store, this.now, this.user, deps.onProgress)
    this.walker = {
      deps,
      registry: this.registry,
      now: this.now,
      keeper: this.keeper,
      attempts: {
        deps,
        now: this.now,
        user: this.user,
        ledger: deps.store.ledger(),
        sleep: deps.sleep ?? sleep,
        appendEvent: async (runId, event) => void (await this.keeper.appendEvent(runId, event)),
        children: (of) => this.childRuns(of),
      },
      ended: (runId, record, last) => {
        // Only the latest: a long-lived engine drives many runs, and a child's engine drives one.
        this.ended.clear()
        this.ended.set(runId, {record, last})
      },
    }
  }

  async start(options: StartOptions): Promise<RunOutcome> {
    const birth = await birthOf(this.deps.store, options, {now: this.now(), user: this.user})
    return this.launch(birth, options, 'run-created')
  }

  /** Creates a run started and held, and drives it (see Store.createStartedRun); for a child run too (see children.ts). */
  async launch(birth: RunBirth, settings: RunSettings, hookPoint: string): Promise<RunOutcome> {
    const {parent} = birth.draft
    const session = (await openTracing()).session({pipeline: birth.draft.pipeline.name, event: 'started', ...(parent ? {parent} : {})})
    // The run keeps its trace from birth, so each later session of it (a resume, a worker elsewhere) joins it.
    if (session.context) birth.draft.trace = session.context
    let born: Awaited<ReturnType<RunStore['createStartedRun']>>
    try {
      born = await this.deps.store.createStartedRun(birth.draft, birth.now, birth.created, this.keeper.statusChange('running', 'started'))
      session.identify(born.record.run_id)
    } catch (error) {
      await session.close({thrown: error})
      throw error
    }
    try {
      await this.deps.hook?.(hookPoint)
    } catch (error) {
      await born.release()
      await session.close({thrown: error})
      throw error
    }
    return this.drive(born.record.run_id, settings, 'started', undefined, {...born, session})
  }

  async resume(runId: string, options: ResumeOptions): Promise<RunOutcome> {
    const {store} = this.deps
    await this.checkResume(runId, options)
    // Taking in answers or a decision happens under the run's lock, so a run being driven elsewhere is never changed.
    return this.drive(runId, options, 'resumed', async () => {
      const current = await store.readRun(runId)
      assertResumable(current)
      await this.endSkipped(await takeInput(this.inputEnvironment(), runId, current, options))
    })
  }

  /** Who takes in what a person gives a run, and where they gave it (via: pipe view's page). */
  private inputEnvironment(): InputEnvironment {
    return {store: this.deps.store, now: this.now, user: this.user, ...(this.deps.via ? {via: this.deps.via} : {}), registry: this.registry}
  }

  /**
   * Records what a person gives a run (answers, a decision, a confirmation) as resume would, under
   * the run's lock, without driving it: a worker goes on with it (a detached run on a shared store).
   */
  async takeIn(runId: string, options: ResumeOptions): Promise<void> {
    const {store} = this.deps
    await this.checkResume(runId, options)
    const release = await store.acquireRun(runId)
    try {
      const current = await store.readRun(runId)
      assertResumable(current)
      await this.endSkipped(await takeInput(this.inputEnvironment(), runId, current, options))
    } finally {
      await release()
    }
  }

  /**
   * A skipped task's child run ends as the skip is recorded, whichever step the run goes on at (the
   * step that started it ends it again when it runs, as after a crash between the two).
   */
  private async endSkipped({skipped}: TakenInput): Promise<void> {
    for (const skip of skipped)
      if (!isFinal((await this.deps.store.readRun(skip.run_id)).status)) await this.cancel(skip.run_id, `skipped by ${skip.by}: ${skip.note}`)
  }

  /** What resume refuses before anything is written. */
  private async checkResume(runId: string, options: ResumeOptions): Promise<void> {
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
      if (options.review)
        throw new PipeError('E_STATE', `run ${runId} is ${record.status}, not waiting for a review`, {
          hint: `Redrive it without a decision: pipe resume ${runId}`,
        })
    }
    if (options.skip) await plannedSkips(store, record, options.skip, {by: this.user, at: this.now().toISOString()})
    if (options.policy.version !== record.policy_version && !isRedrivable(record.status)) {
      throw new PipeError('E_STATE', `run ${runId} is ${record.status}; its policy changes only when a person redrives it after it failed or was blocked`, {
        hint: 'Resume it under the policy it runs with (leave out --policy), or cancel it and start a new run under the new policy.',
      })
    }
  }

  /**
   * Ends a run that is not being driven (paused, interrupted, blocked or pending) as cancelled. A
   * run paused at a step records that step's snapshot, cancelled, with the pipeline and policy it
   * runs with (EngineDeps.waitingSettings).
   */
  async cancel(runId: string, reason: string): Promise<RunOutcome> {
    const {store} = this.deps
    const before = await store.readRun(runId)
    if (isFinal(before.status)) {
      throw new PipeError('E_STATE', `run ${runId} has already ended (${before.status})`, {hint: 'Nothing to cancel.'})
    }
    const release = await store.acquireRun(runId)
    try {
      const record = await store.readRun(runId)
      const settings = record.status === 'awaiting_input' ? await this.deps.waitingSettings?.(record) : undefined
      const waiting = settings ? waitingStep(record, settings) : undefined
      if (record.status === 'running') {
        // What the process that is gone was recording (a step, a cancelled step) is finished first.
        await store.recover(runId)
        await this.keeper.stop(runId, goneOwner(record))
      } else if (settings && waiting) {
        // Held and running while its step is recorded, as a walk records one: a crash in between
        // leaves a run whose process is gone, which pipe cancel finishes, never a paused run with a snapshot after its seal.
        await this.keeper.running(runId, 'resumed', {reason: `pipe cancel records step ${waiting.id}, which the run waits at, as cancelled`})
        await commitWaitingCancelled(store, this.registry, record, waiting, settings, reason, this.now(), this.deps.hook)
      }
      await this.keeper.stop(runId, {status: 'cancelled', reason, by: this.user})
    } finally {
      await release()
    }
    // Its children are cancelled too (each under its own lock): nothing the parent started goes on without it.
    for (const child of await childrenOf(store, runId)) {
      if (!isFinal(child.status)) await this.cancel(child.run_id, `parent run ${runId} was cancelled: ${reason}`)
    }
    return {
      run_id: runId,
      feature_id: before.feature_id,
      status: 'cancelled',
      spec_version: (await store.readRun(runId)).spec_version ?? null,
      steps_run: 0,
      reason,
    }
  }

  private async drive(
    runId: string,
    settings: RunSettings,
    event: 'started' | 'resumed',
    prepare?: () => Promise<void>,
    born?: {record: RunRecord; release: () => Promise<void>; session: RunSession},
  ): Promise<RunOutcome> {
    const {store} = this.deps
    const release = born?.release ?? (await store.acquireRun(runId))
    let session = born?.session
    let outcome: RunOutcome | undefined
    let thrown: {thrown: unknown} | undefined
    try {
      if (born) {
        // Created started and held (Store.createStartedRun): nothing to read back, recover or record.
        this.keeper.hold(runId, born.record)
        await this.keeper.statusRecorded(runId, 'running', undefined)
        outcome = await walk(this.walker, runId, settings, true)
      } else {
        await prepare?.()
        const before = await store.readRun(runId)
        this.keeper.hold(runId, before)
        const redriven = event === 'resumed' && isRedrivable(before.status)
        const tracing = await openTracing()
        const opened = tracing.session({
          run_id: runId,
          pipeline: before.pipeline.name,
          event: redriven ? 'redriven' : event,
          ...(before.trace ? {continues: before.trace} : {}),
          ...(before.parent ? {parent: before.parent} : {}),
        })
        session = opened
        if (opened.context) {
          // The time before this session, queued or waiting for a person, beside it in the run's trace.
          const queued = ((await store.holding?.(runId))?.detached_queue ?? null) !== null
          for (const wait of waitsBefore(await store.readEvents(runId), this.now(), queued)) tracing.interval(before.trace ?? opened.context, wait)
        }
        // A run first driven without a collector keeps the trace this session starts.
        const keepTrace = (r: RunRecord): void => {
          if (opened.context && !r.trace) r.trace = opened.context
        }
        if (redriven) {
          await this.redrive(runId, before, settings, keepTrace)
        } else {
          if (before.status === 'running' && event === 'resumed') {
            // A run left running by a process that is gone: record that it was interrupted first.
            await this.keeper.stop(runId, goneOwner(before))
          }
          await this.keeper.running(runId, event, {}, keepTrace)
        }
        outcome = await walk(this.walker, runId, settings)
        if (!redriven && event === 'resumed' && finishedAnIoFailure(before.status, outcome)) {
          // The process that failed on I/O (a full disk) could not record the failure; this resume
          // only finished recording it. The person resumed after fixing the cause: redrive now, as
          // the resume of the failed run would, instead of repeating the old error.
          await this.redrive(runId, await store.readRun(runId), settings, keepTrace)
          outcome = await walk(this.walker, runId, settings)
        }
      }
      return outcome
    } catch (error) {
      thrown = {thrown: error}
      throw error
    } finally {
      this.keeper.release(runId)
      // Its steps' spend is in their snapshots or its pause now: nothing of it is under way (engine/budget.ts).
      await holdsOf(store)
        .release(runId)
        .catch(() => undefined)
      await release()
      // After the lock is let go: a slow collector never holds the run.
      await session?.close(outcome ?? thrown!)
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
  private async redrive(runId: string, record: RunRecord, settings: RunSettings, keepTrace: (r: RunRecord) => void): Promise<void> {
    const point = redrivePoint(record, await this.deps.store.readSnapshots(runId))
    const from = record.status as 'failed' | 'blocked'
    const at = this.now().toISOString()
    const policy = settings.policy.version
    const changed = policy !== record.policy_version
    const entry: NonNullable<RunRecord['redrives']>[number] = {
      seq: point.seq,
      step: point.step,
      from,
      by: this.user,
      at,
      policy_version: policy,
      ...(changed ? {previous_policy_version: record.policy_version, ...(record.policy_path ? {previous_policy_path: record.policy_path} : {})} : {}),
    }
    const reason = `step ${point.step} (#${point.seq}) runs again${record.error ? ` after ${record.error.code}` : ''}${changed ? `; policy ${record.policy_version.slice(0, 19)} -> ${policy.slice(0, 19)}` : ''}`
    await this.keeper.running(
      runId,
      'redriven',
      {step: point.step, seq: point.seq, by: this.user, reason, ...(changed ? {policy_version: policy} : {})},
      (r) => {
        r.redrives = [...(r.redrives ?? []), entry]
        if (changed) {
          r.policy_version = policy
          r.policy_path = settings.policy.file
        }
        delete r.error
        keepTrace(r)
      },
    )
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
        ...(this.deps.children ? {dispatch: this.deps.children} : {}),
        engineFor: (signal, label) =>
          new Engine({
            ...shared,
            user: this.user,
            ...artifacts,
            ...(signal ? {signal} : {}),
            ...(onProgress ? {onProgress: (event: ProgressEvent) => onProgress({...event, under: [label, ...(event.under ?? [])]})} : {}),
          }),
      },
      of,
    )
  }
}

/** A run left running whose process is gone, found by the one who takes it over: it was interrupted. */
function goneOwner(record: RunRecord): RunStop {
  return {status: 'interrupted', reason: `the process that ran it (pid ${record.owner.pid}) is gone`}
}

/** A resumed run whose walk ran no step and only recorded the I/O failure an earlier process met. */
function finishedAnIoFailure(before: RunRecord['status'], outcome: RunOutcome): boolean {
  return (
    (before === 'running' || before === 'interrupted') &&
    outcome.status === 'failed' &&
    outcome.steps_run === 0 &&
    outcome.error?.code === 'E_IO' &&
    outcome.redrivable === true
  )
}
