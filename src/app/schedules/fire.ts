/**
 * Firing due slots: on a PostgreSQL store each slot's run is queued in the transaction that records
 * the slot (pipe worker, and pipe schedule run-due on a database); on a folder store the run is
 * checked, the slot's file made, and the run then runs in this process (pipe schedule run-due from a cron line).
 */
import {openStore, isStoreUrl, storeLocation} from '../../store/open.js'
import {claimFolderFiring, lastFolderFirings} from '../../store/file/firings.js'
import {detachRuns} from '../sessions/detach.js'
import {prepareStart} from '../sessions/prepare.js'
import {startSession} from '../sessions/start.js'
import {planDue, skippedNote, type Scheduled} from './schedules.js'

export interface Fired {
  pipeline: string
  schedule: string
  slot: string
  /** The run started or queued; absent when another process fired the slot first. */
  run_id?: string
  status: string
  /** Why the slot was not fired (status not-fired). */
  error?: string
}

export interface FireOptions {
  store: string
  cwd: string
  now: Date
  signal?: AbortSignal
  log: (line: string) => void
  /**
   * A long-lived caller (pipe worker) keeps the slots it could not fire, with why: the same refusal
   * is then logged once, not at every look.
   */
  refused?: Map<string, string>
}

/** The latest slot fired of each schedule, from the store (pipe schedule list). */
export async function lastFirings(scheduled: readonly Scheduled[], location: string, cwd: string): Promise<Map<string, Date>> {
  const keys = scheduled.flatMap((s) => s.entries.map((e) => e.key))
  if (!isStoreUrl(location)) return lastFolderFirings(storeLocation(cwd, location), keys)
  const store = await openStore(location, 'if-exists')
  if (store === null) return new Map()
  try {
    return (await store.team?.lastFirings(keys)) ?? new Map()
  } finally {
    await store.close?.()
  }
}

/** Fires every slot due at `now` once, whoever else fires them; returns what this process fired (or found fired). */
export async function fireDue(scheduled: readonly Scheduled[], options: FireOptions): Promise<Fired[]> {
  const last = await lastFirings(scheduled, options.store, options.cwd)
  const out: Fired[] = []
  for (const item of scheduled) {
    for (const plan of planDue(item.entries, last, options.now)) {
      const note = skippedNote(plan)
      if (note !== undefined) options.log(`pipe schedule: ${note}`)
      for (const slot of plan.fire) {
        if (options.signal?.aborted) return out
        const entry = plan.entry
        const base = {pipeline: entry.pipeline, schedule: entry.name, slot: slot.toISOString()}
        const refusedKey = `${entry.key}@${base.slot}`
        const refuse = (error: unknown): void => {
          const why = `[${(error as {code?: string}).code ?? 'E_INTERNAL'}] ${(error as Error).message}`
          out.push({...base, status: 'not-fired', error: why})
          if (options.refused?.get(refusedKey) === why) return
          options.refused?.set(refusedKey, why)
          options.log(`pipe schedule: ${entry.pipeline} ${entry.name} ${base.slot}: not fired: ${why}`)
        }
        const start = {
          pipeline: item.loaded.file,
          cwd: options.cwd,
          store: options.store,
          inputsGiven: {name: `schedule ${entry.name}'s inputs`, data: entry.inputs},
          ...(options.signal ? {signal: options.signal} : {}),
        }
        if (isStoreUrl(options.store)) {
          // One schedule that cannot fire (its pipeline deleted or broken since it was loaded) never
          // holds up the others: said, and tried again at the next look (nothing was recorded).
          const queued = await detachRuns({...start, queue: entry.queue, firing: {key: entry.key, slot}}).catch((error: unknown) => (refuse(error), null))
          if (queued === null) continue
          options.refused?.delete(refusedKey)
          const run = queued[0]
          out.push(run ? {...base, run_id: run.run_id, status: 'queued'} : {...base, status: 'fired-elsewhere'})
          options.log(
            `pipe schedule: ${entry.pipeline} ${entry.name} ${base.slot}: ${run ? `queued ${run.run_id} on ${entry.queue}` : 'fired already by another process'}`,
          )
          continue
        }
        // What stops a run before it is created (its pipeline broken since, a secret unset) is found
        // before the slot is taken: a slot is recorded as fired only with a run, so the next look
        // fires it once the cause is fixed, as on a database where nothing is recorded either.
        const prepared = await prepareStart(start).catch((error: unknown) => (refuse(error), null))
        if (prepared === null) continue
        if (!(await claimFolderFiring(storeLocation(options.cwd, options.store), entry.key, slot))) {
          out.push({...base, status: 'fired-elsewhere'})
          options.log(`pipe schedule: ${entry.pipeline} ${entry.name} ${base.slot}: fired already by another process`)
          continue
        }
        options.refused?.delete(refusedKey)
        const outcome = await startSession(start, prepared).catch((error: unknown) => (refuse(error), null))
        if (outcome === null) continue
        out.push({...base, run_id: outcome.run_id, status: outcome.status})
        options.log(`pipe schedule: ${entry.pipeline} ${entry.name} ${base.slot}: ${outcome.run_id} ${outcome.status}`)
      }
    }
  }
  return out
}
