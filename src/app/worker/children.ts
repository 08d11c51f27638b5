/**
 * A worker's foreach children (the engine's ChildDispatch): each child of a step its parent drives
 * here is a job of the queue that any worker may claim, and the parent's step waits for it.
 *
 * The parent stays held while its step waits: the step's progress (which items started, the order
 * their dependencies allow, whether fail_fast tripped) lives in the running step until it writes its
 * snapshot, and the engine has no record to continue a step from half-way. What waiting costs is
 * small: the lease's renewal and one query per poll, woken at once by a child's end (NOTIFY). It
 * costs no slot of the worker: a parent that waits for children is not counted against
 * --concurrency (see parked), so one worker with --concurrency 1 runs a foreach too. If the
 * parent's worker dies, another takes the parent over when its lease runs out; the step runs again
 * and finds its children in the database, each one once.
 */
import type {ChildDispatch} from '../../engine/engine-types.js'
import type {RunBirth} from '../../engine/run-record.js'
import {isFinal} from '../../engine/lifecycle.js'
import {PipeError} from '../../errors.js'
import type {TeamQueue} from '../../store/team.js'
import type {RunStore} from '../../store/types.js'

export class QueuedChildren implements ChildDispatch {
  /** Parents waiting for children now, with how many waits each: the worker does not count them against its concurrency. */
  readonly parked = new Map<string, number>()
  private readonly sleepers = new Set<() => void>()

  constructor(
    private readonly store: RunStore,
    private readonly work: TeamQueue,
    private readonly queue: string,
    /** This machine's root of a workspace the worker serves (a child runs where its parent does). */
    private readonly rootOf: (workspaceId: string) => string | undefined,
    private readonly pollMs: number,
  ) {}

  /** A child stopped (or a slot freed): every wait looks again now. */
  wake(): void {
    for (const wake of [...this.sleepers]) wake()
  }

  async drive(child: {birth: RunBirth} | {runId: string}, limit: number, signal: AbortSignal | undefined): Promise<string> {
    const link = 'birth' in child ? child.birth.draft.parent : (await this.store.readRun(child.runId)).parent
    if (!link) throw new PipeError('E_INTERNAL', 'a child run without its parent link')
    const parent = link.run_id
    this.parked.set(parent, (this.parked.get(parent) ?? 0) + 1)
    try {
      const create = async (): Promise<{draft: RunBirth['draft']; now: Date; event: RunBirth['created']; root: string | null} | undefined> => {
        if (!('birth' in child)) return undefined
        const workspace = await this.work.workspaceOf(parent)
        return {draft: child.birth.draft, now: child.birth.now, event: child.birth.created, root: workspace ? (this.rootOf(workspace.id) ?? null) : null}
      }
      const made = await create()
      let runId: string | null = null
      while (runId === null) {
        if (signal?.aborted) {
          // Stopped before a slot freed (fail_fast, a drain): the child is made, not queued, so the
          // step finds it again when it re-enters, and a fail_fast cancels it like any other.
          return 'birth' in child
            ? ((await this.work.queueChild({link, limit: 0, queue: this.queue, ...(made ? {create: made} : {}), createOnly: true})) as string)
            : child.runId
        }
        runId = await this.work.queueChild({link, limit, queue: this.queue, ...('runId' in child ? {runId: child.runId} : {}), ...(made ? {create: made} : {})})
        if (runId === null) await this.nap(signal)
      }
      while (!signal?.aborted && (await this.work.stillQueued([runId])).has(runId)) await this.nap(signal)
      return runId
    } finally {
      const left = (this.parked.get(parent) ?? 1) - 1
      if (left > 0) this.parked.set(parent, left)
      else this.parked.delete(parent)
    }
  }

  async cancel(runId: string, reason: string, here: () => Promise<void>): Promise<void> {
    await this.work.requestCancel(runId, reason)
    for (;;) {
      const record = await this.store.readRun(runId)
      if (isFinal(record.status)) return
      if (!(await this.store.runOwner(runId))?.alive) {
        try {
          await here()
          await this.work.stopped(runId)
          return
        } catch (error) {
          // Taken by a worker in between (it sees the request and stops it), or ended meanwhile.
          const code = (error as {code?: string}).code
          if (code !== 'E_CONFLICT' && code !== 'E_STATE') throw error
        }
      }
      await this.nap(undefined)
    }
  }

  /** Waits for a wake, the poll interval, or the signal, whichever comes first. */
  private nap(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.sleepers.delete(done)
        signal?.removeEventListener('abort', done)
        resolve()
      }
      const timer = setTimeout(done, this.pollMs)
      this.sleepers.add(done)
      signal?.addEventListener('abort', done, {once: true})
    })
  }
}
