/** pipe cancel: ending a run by hand. */
import {PipeError} from '../../errors.js'
import {openStore, storeLocation} from '../../store/open.js'
import {sameProcessAlive} from '../../util/lock.js'
import type {RunOutcome} from '../../engine/engine.js'
import {type SessionOptions, engineFor} from './shared.js'

export async function cancelSession(options: SessionOptions & {runId: string; reason?: string; waitMs?: number}): Promise<RunOutcome> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  const owner = await store.runOwner(options.runId)
  // Alive means that very process: the pid with the start time it recorded, never a later process that got the pid.
  if (record.status === 'running' && owner?.alive && owner.pid !== process.pid && sameProcessAlive(owner.pid, owner.start_time)) {
    // Ask the process driving it to stop; it records the run as interrupted, then we cancel it.
    process.kill(owner.pid, 'SIGTERM')
    const deadline = Date.now() + (options.waitMs ?? 15000)
    while (Date.now() < deadline && (await store.runOwner(options.runId))?.alive) await new Promise((r) => setTimeout(r, 100))
  }
  const engine = engineFor(store, options, async () => Promise.reject(new PipeError('E_INTERNAL', 'no provider while cancelling')))
  return engine.cancel(options.runId, options.reason ?? 'cancelled by hand')
}
