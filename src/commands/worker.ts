import * as Flags from '@oclif/core/flags'
import {PipeCommand} from '../cli/base-command.js'
import {withSignals} from '../cli/signals.js'
import {writeErr} from '../cli/std-streams.js'
import {resumeSession} from '../app/sessions/resume.js'
import {PipeError} from '../errors.js'
import {isStoreUrl, openStore, safeUrl} from '../store/open.js'
import type {PostgresStore} from '../store/postgres/store.js'

/** How often an idle worker looks at the queue (PIPE_WORKER_POLL_MS). */
const pollMs = (): number => (Number(process.env.PIPE_WORKER_POLL_MS) >= 10 ? Number(process.env.PIPE_WORKER_POLL_MS) : 500)

export interface WorkerSummary {
  queue: string
  store: string
  /** The runs this worker drove, with the status each stopped in. */
  driven: Array<{run_id: string; status: string}>
}

export default class Worker extends PipeCommand {
  static override summary = 'Claim queued runs from a PostgreSQL store and drive them, until stopped.'
  static override description = `Drives the runs that pipe run --detach put on a queue of the store, up to --concurrency at a time, with the same engine as pipe run. A run is held under a lease on its row that the worker renews while it drives it: a worker that dies (SIGKILL, a lost machine) loses its runs to another worker once the lease runs out (PIPE_LEASE_MS, default 30000), and a worker frozen past its lease cannot commit when it wakes (the run's epoch has moved on). The step that was in flight then runs again on the new worker.

A run stays queued until it stops: it ends, or waits for a person (answers, a review, a confirmation). SIGTERM or SIGINT drains the worker: it takes no new run, hands back what it drives (recorded as interrupted, still queued, so another worker goes on from the last snapshot) and exits 0.

Steps run in the workspace the run was created in (its folder on this machine): start workers where that folder is.`
  static override examples = [
    {
      description: 'Four runs at a time from the team database',
      command: '<%= config.bin %> <%= command.id %> --concurrency 4 --store postgres://pipe@db.example:5432/pipe',
    },
    {description: 'A queue of its own', command: 'PIPE_STORE=postgres://pipe@db.example:5432/pipe <%= config.bin %> <%= command.id %> --queue nightly'},
  ]
  static override flags = {
    concurrency: Flags.integer({description: 'How many runs this worker drives at once.', default: 1, min: 1, max: 256}),
    queue: Flags.string({description: 'The queue to take runs from (pipe run --detach --queue NAME).', default: 'default', helpValue: 'NAME'}),
    name: Flags.string({description: 'A name for this worker, shown with its host and pid by pipe runs show as the holder of a run.', helpValue: 'NAME'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<WorkerSummary> {
    const {flags} = await this.parse(Worker)
    const location = this.storeDir(flags.store)
    if (!isStoreUrl(location)) {
      throw new PipeError('E_INVALID_ARGS', `pipe worker needs a PostgreSQL store: ${location} is a folder`, {
        hint: 'Give --store postgres://user@host:5432/db (or PIPE_STORE), the store pipe run --detach queued the runs in.',
      })
    }
    const store = (await openStore(location, 'existing')) as PostgresStore
    ;(await import('../store/postgres/store.js')).nameHolder(flags.name)
    const driven: WorkerSummary['driven'] = []
    writeErr(
      `pipe worker${flags.name ? ` ${flags.name}` : ''}: queue ${flags.queue} of ${safeUrl(location)}, ${flags.concurrency} at a time (pid ${process.pid})\n`,
    )
    try {
      await withSignals(async (signal) => {
        const active = new Map<string, Promise<void>>()
        let wake: () => void = () => undefined
        const drive = async (runId: string): Promise<void> => {
          try {
            const record = await store.readRun(runId)
            const outcome = await resumeSession({cwd: record.workspace ?? process.cwd(), store: location, runId, signal})
            // Handed back (drained) or still driven elsewhere: it stays queued for the next worker.
            if (outcome.status !== 'interrupted' && outcome.status !== 'running') await store.dequeue(runId)
            driven.push({run_id: runId, status: outcome.status})
            writeErr(`pipe worker: ${runId} ${outcome.status}\n`)
          } catch (error) {
            const code = (error as {code?: string}).code
            // Another worker took it first, or took it over from this one (its lease ran out while
            // it was frozen): the run is the other's, and nothing of this worker's was recorded.
            if (code === 'E_CONFLICT') {
              writeErr(`pipe worker: ${runId}: [E_CONFLICT] ${(error as Error).message}\n`)
              return
            }
            // Ended already (cancelled by hand): nothing left to drive.
            if (code === 'E_STATE') await store.dequeue(runId).catch(() => undefined)
            writeErr(`pipe worker: ${runId}: [${code ?? 'E_INTERNAL'}] ${(error as Error).message}\n`)
            driven.push({run_id: runId, status: 'error'})
          } finally {
            active.delete(runId)
            wake()
          }
        }
        while (!signal.aborted) {
          if (active.size < flags.concurrency) {
            const candidates = await store.claimable(flags.queue, flags.concurrency + active.size).catch((error: unknown) => {
              // The database went away for a moment: the loop tries again.
              writeErr(`pipe worker: ${(error as Error).message}\n`)
              return [] as string[]
            })
            for (const runId of candidates) {
              if (active.size >= flags.concurrency || signal.aborted) break
              if (!active.has(runId)) active.set(runId, drive(runId))
            }
          }
          await new Promise<void>((resolve) => {
            const done = (): void => {
              clearTimeout(timer)
              signal.removeEventListener('abort', done)
              resolve()
            }
            const timer = setTimeout(done, pollMs())
            wake = done
            signal.addEventListener('abort', done, {once: true})
          })
        }
        await Promise.all(active.values())
      }, 'draining: taking no new run, handing back the runs in progress (recorded as interrupted, still queued)')
    } finally {
      await store.close()
    }
    process.exitCode = 0
    return {queue: flags.queue, store: safeUrl(location), driven}
  }
}
