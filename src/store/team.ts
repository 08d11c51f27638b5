/**
 * What a team store can do beyond RunStore (./types.ts): a queue that workers on many machines
 * share, with leases, cancel requests and the workers alive now. Types only: a store that has a
 * queue (PostgreSQL today) offers it as `RunStore.team`; the use cases (src/app/) check for it
 * instead of naming the store that has it, so a store of another kind can offer the same.
 *
 * A claim has one winner: `claim` picks a queued run nobody holds and takes its lease in the same
 * step, skipping runs another claimer is taking at that moment, so no worker ever attempts a run
 * another holds. The claimer then drives it through RunStore.acquireRun, which lends it the lease
 * the claim took instead of taking another, and gives the lease back (unclaim) once it has taken a
 * stopped run off the queue: no other worker can claim a run between its end and its dequeue.
 */
import type {RunEvent, RunRecord} from '../types/run.js'
import type {RunDraft} from './types.js'

/** The workspace a queued run needs (src/app/worker/workspace.ts): its stable id, the repository's root where it was made, and the folder under it. */
export interface RunWorkspace {
  id: string
  root: string
  sub: string
}

/** A workspace a worker serves: its stable id and, for people, where it is on that worker's machine. */
export interface ServedWorkspace {
  id: string
  label: string
}

export interface LiveWorker {
  id: string
  host: string
  pid: number
  workspaces: ServedWorkspace[]
}

/** Where a queued run stands for people: its queue, and why no worker has taken it when none can. */
export interface QueueEntry {
  queue: string
  /** Set when no live worker of the queue serves the run's workspace (see noteUnservable). */
  note: string | null
  workspace: RunWorkspace | null
}

/** A run to create and queue in one call (pipe run --detach): its draft, its time and its creation line. */
export interface QueuedBirth {
  draft: RunDraft
  now: Date
  event: RunEvent
}

/** One slot of one schedule: its key (workspace, pipeline, schedule) and the slot's time. */
export interface Firing {
  key: string
  slot: Date
}

/** What a step's foreach child is made of when it is queued for the first time. */
export interface ChildBirth extends QueuedBirth {
  /** This machine's root of the parent's workspace, or null to keep the recorded one. */
  root: string | null
}

export interface TeamQueue {
  /** Names this process as a holder (pipe worker --name): pipe runs show prints it with host and pid. */
  nameHolder(name: string | undefined): void
  /** This process drives up to `concurrency` runs at once (pipe worker): as many of its statements may go to the store at once. */
  serving(concurrency: number): void
  /**
   * Creates runs not started and puts them on a queue, all in one transaction: every one or none.
   * With `firing`, the run is a schedule's slot: it is made only if that slot has not fired yet
   * (whoever else fires it at the same moment), and none is made otherwise.
   */
  createQueued(births: readonly QueuedBirth[], queue: string, workspace: RunWorkspace, firing?: Firing): Promise<RunRecord[]>
  /** The latest slot fired of each schedule key given (pipe schedule list, catch_up). */
  lastFirings(keys: readonly string[]): Promise<Map<string, Date>>
  /** Puts a run back on a queue (a person answered a detached run); a run queued already keeps its place. */
  enqueue(runId: string, queue: string): Promise<void>
  /**
   * Takes the oldest run of `queue` that nobody holds, whose workspace is one of `workspaces` and
   * which is not in `skip`, together with its lease; null when there is none. See the top of this file.
   */
  claim(queue: string, workspaces: readonly string[], skip: readonly string[]): Promise<string | null>
  /** Gives back the lease a claim took (after `stopped`, when the run stopped; at once when it could not be started). */
  unclaim(runId: string): Promise<void>
  /** Takes a run off the queue once it has stopped (ended, or waiting for a person), and wakes its parent. */
  stopped(runId: string): Promise<void>

  register(id: string, queue: string, host: string, pid: number, workspaces: readonly ServedWorkspace[]): Promise<void>
  unregister(id: string): Promise<void>
  liveWorkers(queue: string): Promise<LiveWorker[]>
  /** Notes on queued runs no live worker serves why they wait; returns those noted this time. */
  noteUnservable(queue: string): Promise<Array<{run_id: string; note: string}>>
  setNote(runId: string, note: string | null): Promise<void>
  entry(runId: string): Promise<QueueEntry | null>
  workspaceOf(runId: string): Promise<RunWorkspace | null>

  /** Queues a foreach child once its step has a free slot; null when all are taken (see PostgresWork.queueChild). */
  queueChild(options: {
    link: NonNullable<RunRecord['parent']>
    limit: number
    queue: string
    runId?: string
    create?: ChildBirth
    createOnly?: boolean
  }): Promise<string | null>
  stillQueued(runIds: readonly string[]): Promise<Set<string>>

  /** Asks whoever holds the run to stop it as cancelled; the first reason stays. */
  requestCancel(runId: string, reason: string): Promise<void>
  cancelRequest(runId: string): Promise<string | null>
  /** Calls `stop` once when a cancel request for a run this process holds is seen; returns the unwatch. */
  watchCancel(runId: string, stop: (reason: string) => void): () => void

  /**
   * Calls `wake` with a parent's run id each time one of its children stops, and `queue.queued`
   * each time a run is put on that queue. It stays listening across lost connections; returns the stop.
   */
  listen(wake: (parentRunId: string) => void, queue?: {name: string; queued: () => void}): Promise<() => Promise<void>>
}
