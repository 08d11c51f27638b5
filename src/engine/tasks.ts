/**
 * A person's ways out of BLOCKED for one task (seed 001): a task is an item of a step that starts
 * child runs (a foreach), named by its key (the step's key: value, else its index), and the child
 * run that works on it. Skipping one is recorded on the parent, as a person's decision with its
 * own timeline line; the step that started the child reads it when the run goes on
 * (ChildRuns.skipped) and ends the child. Nothing here knows a kind: a task is a child run's link.
 */
import {PipeError} from '../errors.js'
import {childrenOf} from '../store/queries.js'
import type {RunStore} from '../store/types.js'
import type {RunRecord} from '../types/run.js'
import {isFinal} from './lifecycle.js'

export type TaskSkip = NonNullable<RunRecord['skips']>[number]

/** What a person asks when skipping tasks (pipe resume RUN --skip KEY --note TEXT [--run-dependents]). */
export interface SkipRequest {
  keys: string[]
  note: string
  runDependents: boolean
}

/** How a child run's item is named: its key, else its index. */
export function taskKey(record: RunRecord): string {
  const link = record.parent!
  return link.key ?? String(link.index ?? 0)
}

/**
 * The child run that works on task `key` of run `parent`: the latest child whose item has that key
 * (a redrive's children continue the earlier ones, so the latest is the one a resume continues).
 * Unknown keys are E_INVALID_ARGS naming the run's tasks.
 */
export async function findTask(store: RunStore, parent: RunRecord, key: string): Promise<RunRecord> {
  const children = await childrenOf(store, parent.run_id)
  const matching = children.filter((c) => taskKey(c) === key)
  const found = matching.reduce<RunRecord | undefined>((latest, c) => (latest === undefined || latest.created_at <= c.created_at ? c : latest), undefined)
  if (found) return found
  const keys = [...new Set(children.map(taskKey))]
  throw new PipeError(
    'E_INVALID_ARGS',
    `run ${parent.run_id} has no task ${JSON.stringify(key)}${keys.length > 0 ? `; its tasks: ${keys.map((k) => JSON.stringify(k)).join(', ')}` : ' (it started no child runs)'}`,
    {
      hint:
        keys.length > 0
          ? `Name a task by its key (the foreach key:, else its index), as pipe runs show ${parent.run_id} lists them.`
          : 'Only a run whose foreach (or pipeline) step started child runs has tasks to skip.',
    },
  )
}

/** Only a task that waits for a person can be skipped: a finished one has its result, a running one is someone's. */
function assertWaiting(parent: RunRecord, task: RunRecord, key: string): void {
  if (task.status === 'blocked' || task.status === 'awaiting_input' || task.status === 'interrupted') return
  const skipped = (parent.skips ?? []).some((s) => s.run_id === task.run_id)
  throw new PipeError(
    'E_STATE',
    `task ${JSON.stringify(key)} of run ${parent.run_id} (child run ${task.run_id}) is ${skipped ? 'skipped already' : task.status}, not waiting for a person; nothing was skipped`,
    {
      hint: isFinal(task.status)
        ? `A task that ended keeps its result; pipe runs show ${parent.run_id} shows which tasks wait.`
        : `It is being worked on; pipe runs show ${parent.run_id} follows it.`,
    },
  )
}

/**
 * The skips a request makes of `parent`'s tasks, checked before anything is written: the run must
 * be blocked (a task waits for a person), each key must name a task that waits, and a note says why.
 */
export async function plannedSkips(store: RunStore, parent: RunRecord, request: SkipRequest, person: {by: string; at: string}): Promise<TaskSkip[]> {
  if (parent.status !== 'blocked') {
    throw new PipeError('E_STATE', `run ${parent.run_id} is ${parent.status}, not blocked; only a blocked run's tasks can be skipped`, {
      hint: isFinal(parent.status)
        ? `The run has ended (${parent.status}); pipe runs show ${parent.run_id} shows how.`
        : `pipe runs show ${parent.run_id} shows what it waits for.`,
    })
  }
  if (request.note.trim() === '')
    throw new PipeError('E_INVALID_ARGS', 'a skip needs a reason: --note TEXT is recorded with it', {
      hint: `pipe resume ${parent.run_id} --skip ${request.keys[0] ?? 'KEY'} --note "why it can be left out"`,
    })
  const out: TaskSkip[] = []
  for (const key of new Set(request.keys)) {
    const task = await findTask(store, parent, key)
    assertWaiting(parent, task, key)
    const link = task.parent!
    out.push({
      step: link.step,
      key,
      index: link.index ?? 0,
      run_id: task.run_id,
      by: person.by,
      at: person.at,
      note: request.note,
      run_dependents: request.runDependents,
    })
  }
  return out
}

/** The timeline line of one skip. */
export function skipReason(skip: TaskSkip): string {
  return `task ${JSON.stringify(skip.key)} (child run ${skip.run_id}) skipped: ${skip.note}; ${skip.run_dependents ? 'the tasks that depend on it run as if it had succeeded' : 'the tasks that depend on it are not run'}`
}
