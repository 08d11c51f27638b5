/**
 * The records of the runs one engine drives: it changes a run's status (with its timeline line),
 * keeps the record as last written while the engine holds the run's lock, and rewrites a run's
 * live artifacts after each change. Only the holder of a run's lock changes the run, so while a
 * drive holds it the kept record is the one on disk, and the walk need not read it back after
 * every write and before every step.
 */
import type {RunStore} from '../store/types.js'
import type {RunEvent, RunRecord, RunStatus} from '../types/run.js'
import {PipeError} from '../errors.js'
import {selfIdentity} from '../util/lock.js'
import {processName} from '../util/process-name.js'
import {newTraceId} from '../util/trace.js'
import type {ProgressEvent} from './engine-types.js'
import {assertTransition, isFinal} from './lifecycle.js'

/**
 * Where a drive leaves a run: every status a run stops (or waits) in is recorded by
 * RunKeeper.stop from one of these, so each records the same fields whichever way it came about.
 */
export interface RunStop {
  status: Exclude<RunStatus, 'pending' | 'running'>
  /** Why, for the record and its timeline line. */
  reason: string
  /** What the record says when it says more than the line: who cancelled it (the line holds them as `by`). */
  recordReason?: string
  /** The step it stopped at. */
  step?: string
  /** Who stopped it: a person's decision or cancel. */
  by?: string
  /** The spec version the run reached; absent: the record keeps its own (a run not being walked). */
  specVersion?: string | null
  /** A failed or blocked run's error. Without a trace id it is given one: the record, the line and the outcome name the same occurrence. */
  error?: NonNullable<RunRecord['error']>
  /** What a waiting run waits for. */
  pending?: NonNullable<RunRecord['pending']>
  /** A succeeded run's declared outputs. */
  outputs?: RunRecord['outputs']
}

export class RunKeeper {
  /** Runs whose artifacts are kept written as they go (see export.ts writeLiveArtifacts). */
  private readonly liveArtifacts = new Set<string>()
  private readonly held = new Map<string, RunRecord>()

  constructor(
    private readonly store: RunStore,
    private readonly now: () => Date,
    private readonly user: string,
    private readonly onProgress: ((event: ProgressEvent) => void) | undefined,
  ) {}

  /** The engine took the run's lock and holds `record`, the run as it is on disk. */
  hold(runId: string, record: RunRecord): void {
    this.held.set(runId, record)
  }

  /** The engine let the run's lock go: its record may change under other hands now. */
  release(runId: string): void {
    this.held.delete(runId)
  }

  /** The run's record as the engine holds it during a drive. */
  record(runId: string): RunRecord {
    const record = this.held.get(runId)
    if (!record) throw new PipeError('E_INTERNAL', `run ${runId} is walked without being held`)
    return record
  }

  /** Appends a line to the run's timeline, keeping the held record current (it binds the line). */
  async appendEvent(runId: string, event: RunEvent): Promise<RunRecord> {
    const record = await this.store.appendEvent(runId, event)
    this.held.set(runId, record)
    return record
  }

  /**
   * The step the run is in now, with its step_started line, recorded before the step acts: a reader
   * (pipe runs show, the view) sees what runs, since when and where, and UPDATED moves at every step.
   * A step safe to run twice has its line written without waiting for the disk where a store can
   * (UpdateOptions.durable): were it lost, a redrive would run the step again, as it does anyway
   * when no commit follows the line. A step that may act only once keeps the trail's word that it
   * started before anything it did.
   */
  async stepStarted(runId: string, step: string, seq: number, safeToRunTwice: boolean): Promise<void> {
    const at = this.now().toISOString()
    const {pid, host} = selfIdentity()
    const name = processName()
    const record = await this.store.updateRun(
      runId,
      (r) => {
        r.current_step = {step, seq, since: at, worker: {host, pid, ...(name ? {name} : {})}}
        r.updated_at = at
      },
      {at, event: 'step_started', step, seq},
      {durable: !safeToRunTwice},
    )
    this.held.set(runId, record)
  }

  /** Keeps the run's artifacts written as it goes (its pipeline, or its parent's, says artifacts: true). */
  keepArtifacts(runId: string): void {
    this.liveArtifacts.add(runId)
  }

  /**
   * Records where the run stopped: its status, the timeline line, and on the record the reason,
   * the error, what it waits for, and the spec version it reached. The error as recorded
   * (with its trace id) is returned for the run's outcome.
   */
  async stop(runId: string, stop: RunStop): Promise<{error?: NonNullable<RunRecord['error']>}> {
    const error = stop.error ? {...stop.error, trace_id: stop.error.trace_id ?? newTraceId()} : undefined
    const line: Partial<RunEvent> = {
      reason: stop.reason,
      ...(stop.step !== undefined ? {step: stop.step} : {}),
      ...(error ? {trace_id: error.trace_id} : {}),
      ...(stop.by !== undefined ? {by: stop.by} : {}),
    }
    await this.setStatus(runId, stop.status, stop.status === 'awaiting_input' ? 'paused' : stop.status, line, (r) => {
      // A succeeded run's reason is its line's and its last decision's: its record has nothing to explain.
      if (stop.status === 'succeeded') delete r.status_reason
      else r.status_reason = stop.recordReason ?? stop.reason
      // A blocked run cancelled keeps the error it was blocked on; only a success clears it.
      if (error) r.error = error
      else if (stop.status === 'succeeded') delete r.error
      if (stop.pending) r.pending = stop.pending
      else delete r.pending
      if (stop.specVersion !== undefined) r.spec_version = stop.specVersion
      if (stop.outputs !== undefined) r.outputs = stop.outputs
    })
    return error ? {error} : {}
  }

  /** The run is driven again: started, resumed, or redriven from the step that stopped it. Every other status is a stop. */
  async running(runId: string, event: 'started' | 'resumed' | 'redriven', extra: Partial<RunEvent> = {}, change?: (r: RunRecord) => void): Promise<void> {
    await this.setStatus(runId, 'running', event, extra, change)
  }

  private async setStatus(runId: string, to: RunStatus, event: string, extra: Partial<RunEvent> = {}, change?: (r: RunRecord) => void): Promise<void> {
    const status = this.statusChange(to, event, extra, change)
    const record = await this.store.updateRun(runId, status.change, status.event)
    if (this.held.has(runId)) this.held.set(runId, record)
    await this.statusRecorded(runId, to, extra.reason)
  }

  /** What follows a recorded status change: the progress line, and the artifacts written again. */
  async statusRecorded(runId: string, to: RunStatus, reason: string | undefined): Promise<void> {
    this.onProgress?.({type: 'run_status', run_id: runId, status: to, ...(reason ? {reason} : {})})
    await this.writeArtifacts(runId)
  }

  /**
   * A change of a run's status: its timeline line and the change of the record, for updateRun (or,
   * for a run born started, RunStore.createStartedRun). The line's `from` is filled in by the change,
   * which reads the status it moves from; the line is written after it.
   */
  statusChange(
    to: RunStatus,
    event: string,
    extra: Partial<RunEvent> = {},
    change?: (r: RunRecord) => void,
  ): {event: RunEvent; change: (r: RunRecord) => void} {
    const at = this.now().toISOString()
    const line: RunEvent = {at, event, from: 'pending', to, ...extra}
    return {
      event: line,
      change: (r) => {
        line.from = r.status
        if (r.status !== to) assertTransition(r.run_id, r.status, to, event === 'redriven')
        r.status = to
        r.updated_at = at
        // Whatever step it was in has ended, or is started again with its own line.
        delete r.current_step
        if (isFinal(to)) r.ended_at = at
        else delete r.ended_at
        if (to === 'running') {
          r.owner = {...selfIdentity(), user: this.user}
          delete r.pending
          delete r.status_reason
        }
        change?.(r)
      },
    }
  }

  /**
   * Rewrites the run's artifacts from its records. They are derived files: a failure to write them
   * never fails the run (the next step, or a resume, writes them again).
   */
  async writeArtifacts(runId: string): Promise<void> {
    try {
      const kept = this.liveArtifacts.has(runId)
      // A child driven by a process that did not start its family (pipe confirm or pipe resume of the
      // child, a worker) does not know its parent's pipeline: export.ts asks whether the family's files are kept.
      if (!kept && (this.held.get(runId) ?? (await this.store.readRun(runId))).parent === undefined) return
      const {writeLiveArtifacts} = await import('./export.js')
      await writeLiveArtifacts(this.store, runId, kept)
    } catch {
      // The records are the truth and stay intact; pipe export writes the same layout from them on demand.
    }
  }
}
