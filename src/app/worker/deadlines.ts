/**
 * A worker serving a store applies the passed confirmation deadlines of its runs that wait for a
 * person (policy confirm.on_timeout: deny or cancel): nobody has to run a command for the deadline
 * to act. Only runs of a workspace this worker serves: a refusal goes on with the run's next steps,
 * in its checkout.
 */
import {existsSync} from 'node:fs'
import {applyPassedDeadline} from '../sessions/confirm-deadline.js'
import {mayRemind} from '../sessions/remind.js'
import {dueTimeout, gateName, timeoutKey} from '../sessions/deadline-due.js'
import type {RunStore} from '../../store/types.js'
import type {TeamQueue} from '../../store/team.js'
import {relocator, workspaceOf} from './workspace.js'
import {pipeNow} from '../../util/clock.js'

export interface DeadlineSweep {
  store: RunStore
  work: TeamQueue
  location: string
  cwd: string
  /** The served workspaces: id -> this machine's root. */
  rootById: ReadonlyMap<string, string>
  signal: AbortSignal
  log: (line: string) => void
}

/** Applies every due deadline with an action; the runs it could not apply are returned, to be tried later. */
export async function applyDueDeadlines(sweep: DeadlineSweep, skip: ReadonlySet<string>): Promise<string[]> {
  const {store, work, rootById, log} = sweep
  const failed: string[] = []
  const now = pipeNow()
  let cursor: string | null = null
  do {
    const page = await store.listRuns({status: 'awaiting_input', ...(cursor ? {cursor} : {})})
    cursor = page.cursor
    for (const record of page.runs) {
      if (sweep.signal.aborted) return failed
      if (skip.has(record.run_id) || !(dueTimeout(record, now)?.action || mayRemind(record))) continue
      // The run's workspace as recorded with it, else the folder it names when that is on this machine.
      const recorded =
        (await work.workspaceOf(record.run_id)) ?? (record.workspace && existsSync(record.workspace) ? await workspaceOf(record.workspace) : null)
      const root = recorded ? rootById.get(recorded.id) : undefined
      if (!recorded || root === undefined) continue
      const relocate = relocator(recorded, root)
      try {
        const applied = await applyPassedDeadline({
          cwd: record.workspace ? relocate(record.workspace) : sweep.cwd,
          store: sweep.location,
          runId: record.run_id,
          opened: store,
          relocate,
          signal: sweep.signal,
        })
        if (applied)
          log(
            `pipe worker: ${record.run_id}: its ${gateName(applied.due)} deadline ${applied.due.deadline} passed; ${timeoutKey(applied.due)}: ${applied.due.action} -> ${applied.outcome.status}`,
          )
      } catch (error) {
        failed.push(record.run_id)
        log(
          `pipe worker: ${record.run_id}: its confirmation deadline passed, but [${(error as {code?: string}).code ?? 'E_INTERNAL'}] ${(error as Error).message}`,
        )
      }
    }
  } while (cursor !== null)
  return failed
}
