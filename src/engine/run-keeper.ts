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
import type {ProgressEvent} from './engine-types.js'
import {assertTransition, isFinal} from './lifecycle.js'

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

  /** Keeps the run's artifacts written as it goes (its pipeline, or its parent's, says artifacts: true). */
  keepArtifacts(runId: string): void {
    this.liveArtifacts.add(runId)
  }

  async setStatus(runId: string, to: RunStatus, event: string, extra: Partial<RunEvent> = {}, change?: (r: RunRecord) => void): Promise<RunRecord> {
    const status = this.statusChange(to, event, extra, change)
    const record = await this.store.updateRun(runId, status.change, status.event)
    if (this.held.has(runId)) this.held.set(runId, record)
    await this.statusRecorded(runId, to, extra.reason)
    return record
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
    if (!this.liveArtifacts.has(runId)) return
    try {
      const {writeLiveArtifacts} = await import('./export.js')
      await writeLiveArtifacts(this.store, runId)
    } catch {
      // The records are the truth and stay intact; pipe export writes the same layout from them on demand.
    }
  }
}
