/**
 * pipe worker: claims queued runs (and foreach children, each a run of its own) from a queue of
 * the PostgreSQL store and drives each with the same engine as pipe run, up to `concurrency` at a
 * time, until its signal aborts; then it drains (hands back what it holds) and returns.
 *
 * A worker serves the workspaces it was started for (./workspace.ts): it claims only runs whose
 * recorded workspace is one of them, says which it serves while it lives (pipe_workers), and notes
 * on a queued run that no live worker of its queue serves why that run waits.
 */
import os from 'node:os'
import {randomBytes} from 'node:crypto'
import {PipeError} from '../../errors.js'
import {isFinal} from '../../engine/lifecycle.js'
import {isStoreUrl, openStore, safeUrl} from '../../store/open.js'
import {faultPoint} from '../../util/faults.js'
import {childrenOf} from '../../store/queries.js'
import type {RunStore} from '../../store/types.js'
import type {TeamQueue} from '../../store/team.js'
import {resumeSession} from '../sessions/resume.js'
import {engineFor} from '../sessions/shared.js'
import {fireDue} from '../schedules/fire.js'
import {loadScheduled} from '../schedules/schedules.js'
import {pipeNow} from '../../util/clock.js'
import {QueuedChildren} from './children.js'
import {applyDueDeadlines} from './deadlines.js'
import {relocator, workspaceOf, type LocalWorkspace} from './workspace.js'

/** How often an idle worker looks at the queue (PIPE_WORKER_POLL_MS). */
const pollMs = (): number => (Number(process.env.PIPE_WORKER_POLL_MS) >= 10 ? Number(process.env.PIPE_WORKER_POLL_MS) : 500)

/** How often a worker says it is alive: a third of PIPE_LEASE_MS, as a run's lease. */
const aliveEvery = (): number => {
  const set = Number(process.env.PIPE_LEASE_MS)
  return Math.max(100, Math.floor((Number.isSafeInteger(set) && set >= 200 ? set : 30000) / 3))
}

export interface WorkerOptions {
  /** The store's URL (a folder store is refused: only a database has a queue workers share). */
  store: string
  queue: string
  concurrency: number
  /** A name for this worker, recorded with its host and pid as the holder of the runs it drives (pipe runs show). */
  name?: string
  /** The folders whose workspaces this worker serves; none: the workspace of `cwd`. */
  workspaces: readonly string[]
  cwd: string
  signal: AbortSignal
  /** One line for people (stderr). */
  log: (line: string) => void
  /** Pipelines whose schedules this worker fires (--schedule FILE): each slot once over all workers. */
  schedules?: readonly string[]
}

export interface WorkerSummary {
  queue: string
  store: string
  /** The workspaces served: their ids and their folders on this machine. */
  workspaces: Array<{id: string; dir: string}>
  /** The runs this worker drove, with the status each stopped in. */
  driven: Array<{run_id: string; status: string}>
}

export async function runWorker(options: WorkerOptions): Promise<WorkerSummary> {
  const {store: location, queue, concurrency, signal, log} = options
  if (!isStoreUrl(location)) {
    throw new PipeError('E_INVALID_ARGS', `pipe worker needs a PostgreSQL store: ${location} is a folder`, {
      hint: 'Give --store postgres://user@host:5432/db (or PIPE_STORE), the store pipe run --detach queued the runs in.',
    })
  }
  // A pipeline that does not load stops the worker at its start, not at its first slot.
  const scheduled = options.schedules?.length ? await loadScheduled(options.schedules, options.cwd) : []
  const refusedSlots = new Map<string, string>()
  faultPoint('schedules-loaded')
  const served = await servedWorkspaces(options.workspaces.length > 0 ? options.workspaces : [options.cwd])
  const rootById = new Map(served.map((w) => [w.id, w.root]))
  const opened = await openTeamStore(location, signal, log)
  if (!opened) return {queue, store: safeUrl(location), workspaces: served.map((w) => ({id: w.id, dir: w.dir})), driven: []}
  const {store, work} = opened
  work.nameHolder(options.name)
  work.serving(concurrency)
  const id = `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`
  const driven: WorkerSummary['driven'] = []
  const labels = served.map((w) => ({id: w.id, label: w.dir}))
  // A wake that comes while the loop is busy (a run put on the queue as it reads the queue) is kept
  // for its next wait, which then does not wait: no notice is lost between a read and a wait.
  let woken = false
  let settle: (() => void) | undefined
  const wake = (): void => {
    woken = true
    settle?.()
  }
  const children = new QueuedChildren(store, work, queue, (workspaceId) => rootById.get(workspaceId), pollMs())
  const cancelHere = async (runId: string, reason: string): Promise<void> => {
    const engine = engineFor(store, {cwd: options.cwd, store: location}, async () =>
      Promise.reject(new PipeError('E_INTERNAL', 'no provider while cancelling')),
    )
    // Its unfinished children first, each through the database: the worker that holds one (this one
    // or another) stops it; ending a held child from here would be refused, leaving it running.
    for (const child of await childrenOf(store, runId)) {
      if (isFinal(child.status)) continue
      const why = `parent run ${runId} was cancelled: ${reason}`
      await children.cancel(child.run_id, why, () => cancelHere(child.run_id, why))
    }
    try {
      await engine.cancel(runId, reason)
    } catch (error) {
      // The parent that asked cancelled it itself in the moment this worker let go of it: as asked.
      if ((error as {code?: string}).code !== 'E_STATE' || (await store.readRun(runId)).status !== 'cancelled') throw error
    }
  }
  await work.register(id, queue, os.hostname(), process.pid, labels)
  const alive = setInterval(() => void work.register(id, queue, os.hostname(), process.pid, labels).catch(() => undefined), aliveEvery())
  alive.unref()
  const stopListening = await work
    .listen(
      () => {
        children.wake()
        wake()
      },
      {name: queue, queued: () => wake()},
    )
    .catch(() => async () => undefined)
  log(
    `pipe worker${options.name ? ` ${options.name}` : ''}: queue ${queue} of ${safeUrl(location)}, ${concurrency} at a time, workspace ${served.map((w) => `${w.dir} (${w.id})`).join(', ')} (pid ${process.pid})`,
  )
  const who = options.name ?? `${os.hostname()}:${process.pid}`
  // Runs this worker could not start (their pipeline or policy missing or changed in its checkout, a
  // record it cannot read): not taken again before their time, doubling to a minute, so one such run
  // neither spins the loop nor keeps the queue's other runs from this worker.
  const backoff = new Map<string, {until: number; delay: number}>()
  try {
    const active = new Map<string, Promise<void>>()
    const drive = async (runId: string): Promise<void> => {
      // A cancel request (a parent's fail_fast) stops the run where it stands, seen at its next heartbeat or commit.
      const cancelled = new AbortController()
      const unwatch = work.watchCancel(runId, (reason) => cancelled.abort(new PipeError('E_STATE', `cancel requested: ${reason}`)))
      try {
        const record = await store.readRun(runId)
        let status: string
        const asked = await work.cancelRequest(runId)
        if (asked !== null && !isFinal(record.status)) {
          await cancelHere(runId, asked)
          status = 'cancelled'
        } else {
          const workspace = await work.workspaceOf(runId)
          const relocate = relocator(workspace, workspace ? rootById.get(workspace.id) : undefined)
          const outcome = await resumeSession({
            cwd: record.workspace ? relocate(record.workspace) : options.cwd,
            store: location,
            runId,
            signal: AbortSignal.any([signal, cancelled.signal]),
            opened: store,
            relocate,
            children,
          })
          status = outcome.status
          // Its walk may have ended it cancelled itself (its step's snapshot recorded): its children are still this worker's to stop.
          const reason = (status === 'interrupted' || status === 'cancelled') && !signal.aborted ? await work.cancelRequest(runId) : null
          if (reason !== null) {
            await cancelHere(runId, reason)
            status = 'cancelled'
          }
        }
        if (backoff.delete(runId)) await work.setNote(runId, null).catch(() => undefined)
        // Handed back (drained) or still driven elsewhere: it stays queued for the next worker.
        if (status !== 'interrupted' && status !== 'running') await work.stopped(runId)
        driven.push({run_id: runId, status})
        log(`pipe worker: ${runId} ${status}`)
      } catch (error) {
        const code = (error as {code?: string}).code
        // Another worker took it over from this one, or took it over from this one (its lease ran out while it
        // was frozen): the run is the other's, and nothing of this worker's was recorded.
        // An E_CONFLICT with no other holder and the run still queued is this checkout's (its pipeline
        // or policy changed since the run started): this worker cannot start it, as below.
        const now = code === 'E_CONFLICT' ? await (store.holding?.(runId) ?? Promise.resolve(null)).catch(() => null) : null
        const mine = (w: {host: string; pid: number}): boolean => w.host === os.hostname() && w.pid === process.pid
        if (code === 'E_CONFLICT' && (now === null || now.queue === null || (now.worker !== null && !mine(now.worker)))) {
          log(`pipe worker: ${runId}: [E_CONFLICT] ${(error as Error).message}`)
          return
        }
        // Ended already (cancelled by hand): nothing left to drive.
        if (code === 'E_STATE') await work.stopped(runId).catch(() => undefined)
        let again = ''
        // The database going away (E_IO) is retried as soon as it answers; anything else is this run's.
        if (code !== 'E_STATE' && code !== 'E_IO') {
          const delay = Math.min(2 * (backoff.get(runId)?.delay ?? 500), 60000)
          backoff.set(runId, {until: Date.now() + delay, delay})
          again = `; this worker tries it again in ${delay / 1000} s`
          const note = `a worker that can start it: ${who} could not ([${code ?? 'E_INTERNAL'}] ${(error as Error).message})${again}`
          await work.setNote(runId, note).catch(() => undefined)
        }
        log(`pipe worker: ${runId}: [${code ?? 'E_INTERNAL'}] ${(error as Error).message}${again}`)
        driven.push({run_id: runId, status: 'error'})
      } finally {
        unwatch()
        // Its lease goes back only now, once a stopped run is off the queue: no other worker claims it in between.
        await work.unclaim(runId).catch(() => undefined)
        active.delete(runId)
        wake()
      }
    }
    let noted = 0
    while (!signal.aborted) {
      // A parent that only waits for its children holds no slot (see ./children.ts).
      const busy = [...active.keys()].filter((runId) => !children.parked.has(runId)).length
      if (busy < concurrency) {
        // Each claim takes one run with its lease, or none: no run another worker holds is ever attempted.
        const skip = [...active.keys(), ...[...backoff].filter(([, b]) => b.until > Date.now()).map(([runId]) => runId)]
        for (let free = concurrency - busy; free > 0 && !signal.aborted; free--) {
          const runId = await work.claim(queue, [...rootById.keys()], skip).catch((error: unknown) => {
            // The database went away for a moment: the loop tries again.
            log(`pipe worker: ${(error as Error).message}`)
            return null
          })
          if (runId === null) break
          skip.push(runId)
          active.set(runId, drive(runId))
        }
      }
      if (Date.now() - noted >= 1000) {
        noted = Date.now()
        const refused = await work.noteUnservable(queue).catch(() => [])
        for (const r of refused) log(`pipe worker: ${r.run_id} waits: ${r.note}`)
        if (scheduled.length > 0)
          await fireDue(scheduled, {store: location, cwd: options.cwd, now: pipeNow(), signal, log, refused: refusedSlots}).catch((error: unknown) =>
            log(`pipe worker: schedules: [${(error as {code?: string}).code ?? 'E_INTERNAL'}] ${(error as Error).message}`),
          )
        // Runs waiting for a person whose deadline passed: the policy's confirm.on_timeout acts now.
        const waiting = new Set([...active.keys(), ...[...backoff].filter(([, b]) => b.until > Date.now()).map(([runId]) => runId)])
        const sweep = {store, work, location, cwd: options.cwd, rootById, signal, log}
        for (const runId of await applyDueDeadlines(sweep, waiting).catch(() => [])) {
          const delay = Math.min(2 * (backoff.get(runId)?.delay ?? 500), 60000)
          backoff.set(runId, {until: Date.now() + delay, delay})
        }
      }
      if (!woken)
        await new Promise<void>((resolve) => {
          const done = (): void => {
            clearTimeout(timer)
            signal.removeEventListener('abort', done)
            settle = undefined
            resolve()
          }
          const timer = setTimeout(done, pollMs())
          settle = done
          signal.addEventListener('abort', done, {once: true})
        })
      woken = false
    }
    await Promise.all(active.values())
  } finally {
    clearInterval(alive)
    await stopListening().catch(() => undefined)
    await work.unregister(id).catch(() => undefined)
    await store.close?.()
  }
  return {queue, store: safeUrl(location), workspaces: served.map((w) => ({id: w.id, dir: w.dir})), driven}
}

/**
 * The store a worker serves, opened once its database answers: a worker started before its database
 * (a machine booting, the server restarting) waits and tries again with a jittered backoff, saying so
 * once, instead of exiting and leaving the queue unserved. null when the signal stops it while it waits.
 */
async function openTeamStore(location: string, signal: AbortSignal, log: (line: string) => void): Promise<{store: RunStore; work: TeamQueue} | null> {
  let waiting = false
  for (let failures = 0; !signal.aborted; failures++) {
    let store: RunStore
    try {
      store = await openStore(location, 'existing')
    } catch (error) {
      if ((error as {code?: string}).code !== 'E_IO') throw error
      if (!waiting) log(`pipe worker: waiting for the database: ${(error as Error).message}; trying again until it answers (Ctrl-C stops)`)
      waiting = true
      const ceiling = Math.min(10000, 200 * 2 ** Math.min(failures, 6))
      await pause(ceiling / 2 + Math.random() * (ceiling / 2), signal)
      continue
    }
    if (waiting) log(`pipe worker: the database at ${safeUrl(location)} answers`)
    if (store.team) return {store, work: store.team}
    await store.close?.()
    throw new PipeError('E_INVALID_ARGS', `pipe worker needs a store with a queue: ${safeUrl(location)} has none`, {
      hint: 'Give --store postgres://user@host:5432/db (or PIPE_STORE), the store pipe run --detach queued the runs in.',
    })
  }
  return null
}

/** Waits `ms`, or less when the signal aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, {once: true})
  })
}

/** The workspaces of the folders given, each once (two folders of one repository: the first). */
async function servedWorkspaces(dirs: readonly string[]): Promise<LocalWorkspace[]> {
  const out = new Map<string, LocalWorkspace>()
  for (const dir of dirs) {
    const found = await workspaceOf(dir)
    if (!out.has(found.id)) out.set(found.id, found)
  }
  return [...out.values()]
}
