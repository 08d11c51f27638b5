/**
 * A lock file per shared resource, taken by exclusive create and holding the owner's pid and host.
 * A lock whose owner process is gone is taken over, so a crash never leaves a resource locked.
 */
import {readFile, unlink} from 'node:fs/promises'
import os from 'node:os'
import {PipeError} from '../errors.js'
import {createFileExclusive} from './fs.js'

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export interface Holder {
  pid: number
  host: string
}

export async function lockHolder(file: string): Promise<(Holder & {alive: boolean}) | null> {
  const holder = await readFile(file, 'utf8')
    .then((t) => JSON.parse(t) as Holder)
    .catch(() => null)
  if (!holder) return null
  return {...holder, alive: holder.host === os.hostname() && processAlive(holder.pid)}
}

/**
 * Takes the lock, waiting up to `waitMs` for a live holder to let go. Throws E_CONFLICT with
 * `busy` as the message when it cannot.
 */
export async function acquireLock(file: string, options: {waitMs?: number; busy: (holder: Holder) => string; hint: string}): Promise<() => Promise<void>> {
  const me = {pid: process.pid, host: os.hostname(), at: new Date().toISOString()}
  const deadline = Date.now() + (options.waitMs ?? 0)
  for (;;) {
    if (await createFileExclusive(file, JSON.stringify(me), {sync: false})) return async () => void (await unlink(file).catch(() => undefined))
    const holder = await lockHolder(file)
    if (holder && !holder.alive && holder.host === me.host) {
      await unlink(file).catch(() => undefined)
      continue
    }
    if (!holder) {
      // Unreadable (being written this instant) or just removed: try again.
      await new Promise((r) => setTimeout(r, 10))
      if (Date.now() < deadline + 1000) continue
    }
    if (Date.now() >= deadline) throw new PipeError('E_CONFLICT', options.busy(holder ?? {pid: 0, host: '?'}), {hint: options.hint})
    await new Promise((r) => setTimeout(r, 50))
  }
}
