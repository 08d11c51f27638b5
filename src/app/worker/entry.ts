/** Where a run waits on a worker queue, for pipe runs show: its queue and, when no live worker serves its workspace, why it waits. */
import {isStoreUrl} from '../../store/open.js'
import type {RunStore} from '../../store/types.js'

export interface QueueWait {
  queue: string
  /** The workspace a worker must serve to take the run. */
  workspace?: string
  /** What the run waits for, in one line. */
  waits_for: string
}

export async function queueWait(location: string, store: RunStore, runId: string): Promise<QueueWait | null> {
  // Only a store workers share has a queue.
  if (!isStoreUrl(location)) return null
  if (!store.team) return null
  const entry = await store.team.entry(runId)
  if (!entry) return null
  const where = entry.workspace ? (entry.workspace.sub ? `${entry.workspace.root}/${entry.workspace.sub}` : entry.workspace.root) : null
  return {
    queue: entry.queue,
    ...(entry.workspace ? {workspace: entry.workspace.id} : {}),
    waits_for: entry.note ?? `a worker of queue ${entry.queue}${where ? ` that serves workspace ${where} (${entry.workspace!.id})` : ''}`,
  }
}
