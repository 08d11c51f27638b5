/** pipe cancel: ending a run by hand. */
import {PipeError} from '../../errors.js'
import {isFinal} from '../../engine/lifecycle.js'
import {openStore, storeLocation} from '../../store/open.js'
import {CANCEL_SIGNAL} from '../../util/cancel-bell.js'
import {sameProcessAlive} from '../../util/lock.js'
import {currentUser} from '../../util/user.js'
import type {RunOutcome} from '../../engine/engine.js'
import type {RunStore} from '../../store/types.js'
import {type SessionOptions, engineFor} from './shared.js'

export async function cancelSession(options: SessionOptions & {runId: string; reason?: string; waitMs?: number}): Promise<RunOutcome> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  // Who asked is in the reason the run, its step's snapshot and the process that drove it all say.
  const by = options.user ?? currentUser()
  const reason = options.reason ? `cancelled by ${by}: ${options.reason}` : `cancelled by ${by}`
  const waitMs = options.waitMs ?? 15000
  // A run a worker holds (a queued run on a database) is stopped through the database: the worker
  // ends that run alone, on whichever machine it is; a signal would drain every run it drives.
  const holding = isFinal(record.status) ? null : ((await store.holding?.(options.runId)) ?? null)
  if (holding?.worker && holding.queue !== null && store.team) {
    await store.team.requestCancel(options.runId, reason)
    // The worker sees the request at once (a notice), or at its next lease renewal (a third of the lease); its children likewise.
    const deadline = Date.now() + Math.max(waitMs, Number(process.env.PIPE_LEASE_MS) || 30000)
    while (Date.now() < deadline && !isFinal((await store.readRun(options.runId)).status)) await new Promise((r) => setTimeout(r, 100))
    const now = await store.readRun(options.runId)
    if (now.status === 'cancelled') {
      // The parent is recorded first; the children its worker (or theirs) is stopping end just after.
      // Said cancelled only once they have: a child still running after the command returned would
      // be a cancel that reads as done and is not.
      const running = async (): Promise<string[]> => {
        const out: string[] = []
        for (const child of await unfinishedDescendants(store, options.runId)) if ((await store.readRun(child)).status === 'running') out.push(child)
        return out
      }
      let still = await running()
      while (still.length > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100))
        still = await running()
      }
      if (still.length > 0) {
        throw new PipeError('E_CONFLICT', `run ${options.runId} is cancelled, but its child run(s) ${still.join(', ')} have not stopped yet`, {
          hint: `The cancel request is recorded: the workers holding them end them as soon as they see it. pipe runs show ${still[0]} follows it.`,
        })
      }
      // A child no one drives (queued but not started yet, or waiting for a person) is cancelled here.
      const engine = engineFor(store, options, async () => Promise.reject(new PipeError('E_INTERNAL', 'no provider while cancelling')))
      for (const child of await unfinishedDescendants(store, options.runId))
        await engine.cancel(child, `parent run ${options.runId} was cancelled: ${reason}`).catch(() => undefined)
      return {run_id: options.runId, feature_id: now.feature_id, status: 'cancelled', spec_version: now.spec_version ?? null, steps_run: 0, reason}
    }
    const who = holding.worker.name ?? `${holding.worker.host}:${holding.worker.pid}`
    throw new PipeError('E_CONFLICT', `run ${options.runId} is ${now.status}: worker ${who} holds it and has not yet stopped it as asked`, {
      hint: `The cancel request is recorded: the worker ends the run as soon as it sees it (at the latest at its next lease renewal). pipe runs show ${options.runId} follows it.`,
    })
  }
  const owner = await store.runOwner(options.runId)
  // Alive means that very process: the pid with the start time it recorded, never a later process that got the pid.
  if (record.status === 'running' && owner?.alive && owner.pid !== process.pid && sameProcessAlive(owner.pid, owner.start_time)) {
    const deadline = Date.now() + waitMs
    if (store.requestCancel) {
      // The request is the store's; the ring only wakes the driver, which may drive other runs too
      // (a parent and its children in one process): it stops this run alone, recording its step as cancelled.
      // Its unfinished children are asked too: driven in the same process, each records its own step cancelled.
      for (const child of await unfinishedDescendants(store, options.runId))
        await store.requestCancel(child, `parent run ${options.runId} was cancelled: ${reason}`)
      await store.requestCancel(options.runId, reason)
      process.kill(owner.pid, CANCEL_SIGNAL)
      while (Date.now() < deadline && !isFinal((await store.readRun(options.runId)).status) && (await store.runOwner(options.runId))?.alive)
        await new Promise((r) => setTimeout(r, 50))
      const now = await store.readRun(options.runId)
      if (now.status === 'cancelled') {
        // A child its parent's stop reached first was recorded interrupted: nothing drives it now, so it is cancelled here.
        const engine = engineFor(store, options, async () => Promise.reject(new PipeError('E_INTERNAL', 'no provider while cancelling')))
        for (const child of await unfinishedDescendants(store, options.runId))
          await engine.cancel(child, `parent run ${options.runId} was cancelled: ${reason}`).catch(() => undefined)
        return {
          run_id: options.runId,
          feature_id: now.feature_id,
          status: 'cancelled',
          spec_version: now.spec_version ?? null,
          steps_run: 0,
          reason: now.status_reason ?? reason,
        }
      }
    } else {
      // Ask the process driving it to stop; it records the run as interrupted, then we cancel it.
      process.kill(owner.pid, 'SIGTERM')
      while (Date.now() < deadline && (await store.runOwner(options.runId))?.alive) await new Promise((r) => setTimeout(r, 100))
    }
  }
  const engine = engineFor(store, options, async () => Promise.reject(new PipeError('E_INTERNAL', 'no provider while cancelling')))
  return engine.cancel(options.runId, reason)
}

/** The runs under `runId` (children, their children…) that have not ended. */
async function unfinishedDescendants(store: RunStore, runId: string): Promise<string[]> {
  const out: string[] = []
  for (const child of await store.listChildren(runId)) {
    if (isFinal(child.status)) continue
    out.push(child.run_id, ...(await unfinishedDescendants(store, child.run_id)))
  }
  return out
}
