/**
 * pipe run --detach: everything pipe run checks, then the run is created (pending, not started) and
 * put on a queue of the PostgreSQL store for a `pipe worker` to drive. Only a database has a queue
 * that workers on other machines see; a folder store is refused before anything is written.
 */
import {PipeError} from '../../errors.js'
import {isStoreUrl, openStore, storeLocation} from '../../store/open.js'
import {currentUser} from '../../util/user.js'
import {birthOf} from '../../engine/run-record.js'
import {batchInputs, prepareStart, storeSettings} from './prepare.js'
import type {StartSession} from './shared.js'
import {workspaceOf} from '../worker/workspace.js'
import type {Firing, LiveWorker} from '../../store/team.js'
import {openTracing, type RunSession} from '../../telemetry/tracing.js'

export interface Detached {
  run_id: string
  status: 'queued'
  queue: string
  /** The workspace a worker must serve to take the run (see ../worker/workspace.ts). */
  workspace: string
  /** Set when no live worker of the queue serves that workspace now: the run waits until one does. */
  warning?: string
}

export async function detachSession(options: StartSession & {queue: string}): Promise<Detached> {
  return (await detachRuns(options))[0]!
}

/**
 * pipe run --detach, of one run or (with `batch`, an --inputs-file) of one run per line, all created
 * and queued in one transaction: every line is checked first (prepare.ts batchInputs), and a batch is
 * queued whole or not at all. With `firing` (a schedule's slot), nothing is queued when the slot
 * fired already.
 */
export async function detachRuns(options: StartSession & {queue: string; batch?: string; firing?: Firing}): Promise<Detached[]> {
  if (!isStoreUrl(options.store)) {
    throw new PipeError('E_INVALID_ARGS', `--detach needs a PostgreSQL store: ${options.store} is a folder, and only a database has a queue that workers see`, {
      hint: 'Point --store (or PIPE_STORE) at postgres://user@host:5432/db, and start pipe worker with the same store; or run without --detach.',
    })
  }
  const {settings} = await prepareStart(options, options.batch)
  const batch = options.batch === undefined ? [settings.inputs] : await batchInputs(settings.pipeline, options, options.batch)
  const store = await openStore(storeLocation(options.cwd, options.store), 'create')
  try {
    const work = store.team
    if (!work)
      throw new PipeError('E_INVALID_ARGS', `--detach needs a store with a queue that workers see: ${options.store} has none`, {
        hint: 'Point --store (or PIPE_STORE) at postgres://user@host:5432/db, and start pipe worker with the same store; or run without --detach.',
      })
    const start = await storeSettings(settings, store, options.signal)
    const at = {now: options.now?.() ?? new Date(), user: options.user ?? currentUser(), queue: options.queue}
    const births = []
    // Each run's trace begins with its enqueue: the worker that drives it, and every later session, join it there.
    const tracing = await openTracing()
    const sessions: RunSession[] = []
    for (const inputs of batch) {
      const birth = await birthOf(store, {...start, inputs}, at)
      const session = tracing.session({pipeline: birth.draft.pipeline.name, event: 'enqueued', queue: options.queue})
      if (session.context) birth.draft.trace = session.context
      sessions.push(session)
      births.push({draft: birth.draft, now: birth.now, event: birth.created})
    }
    // The workspace it needs, by repository (a worker started for another checkout of it serves it too).
    const {id, root, sub} = await workspaceOf(options.cwd)
    let records
    try {
      // A schedule's slot fired already by another process: nothing is queued (records is empty).
      records = await work.createQueued(births, options.queue, {id, root, sub}, options.firing)
    } catch (error) {
      for (const session of sessions) await session.close({thrown: error})
      throw error
    }
    records.forEach((record, i) => sessions[i]!.identify(record.run_id))
    for (const session of sessions) await session.close({status: 'queued'})
    const warning = unserved(await work.liveWorkers(options.queue), id, options.queue)
    return records.map((record) => ({run_id: record.run_id, status: 'queued', queue: options.queue, workspace: id, ...(warning ? {warning} : {})}))
  } finally {
    await store.close?.()
  }
}

/** Why no live worker would take a run of `workspace` on `queue` now, or undefined when one would. */
function unserved(live: readonly LiveWorker[], workspace: string, queue: string): string | undefined {
  if (live.some((w) => w.workspaces.some((s) => s.id === workspace))) return undefined
  const start = `start one where this repository is checked out: pipe worker --queue ${queue} (in the checkout, or with --workspace DIR)`
  if (live.length === 0) return `no live worker takes runs from queue ${queue} now: the run waits until one does; ${start}`
  const serve = [...new Set(live.flatMap((w) => w.workspaces.map((s) => `${s.label} (${s.id}) on ${w.host}`)))].join(', ')
  return `no live worker of queue ${queue} serves workspace ${workspace} (they serve ${serve || 'nothing'}): the run waits until one does; ${start}`
}
