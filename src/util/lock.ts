/**
 * A lock file per shared resource, taken by exclusive create and holding the owner's pid, its
 * start time and host. A lock whose owner process is gone is taken over, so a crash never leaves
 * a resource locked. A pid alone does not name a process: once the owner is gone the kernel may
 * give its pid to another, so a holder is alive only while that pid still has the recorded start
 * time. Taking over is guarded: only the one process that creates the guard for that very dead
 * holder may remove it, and only while the lock still holds exactly what was seen, so a fresh lock
 * another process just took is never deleted.
 */
import {createHash, randomUUID} from 'node:crypto'
import {readFileSync, unlinkSync} from 'node:fs'
import {readFile, unlink} from './fs-async.js'
import os from 'node:os'
import {PipeError} from '../errors.js'
import {faultPoint} from './faults.js'
import {createFileExclusive} from './fs.js'

/** When the process started (clock ticks after boot, /proc/PID/stat field 22), or null where that cannot be read. */
export function processStartTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ")".
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Whether the process that had `pid` and started at `start` still runs (not another that reused the pid). */
export function sameProcessAlive(pid: number, start: string | null | undefined): boolean {
  if (!processAlive(pid)) return false
  if (!start) return true
  const now = processStartTime(pid)
  return now === null || now === start
}

/** This process's start time and host, read once: neither changes while it runs (undefined: not read yet). */
let self: {host: string; start: string | null} | undefined

/** This process, as a lock or a run records its owner. */
export function selfIdentity(): {pid: number; host: string; start_time?: string} {
  self ??= {host: os.hostname(), start: processStartTime(process.pid)}
  return {pid: process.pid, host: self.host, ...(self.start ? {start_time: self.start} : {})}
}

export interface Holder {
  pid: number
  host: string
  start_time?: string
}

function parseHolder(text: string | null): Holder | null {
  if (text === null) return null
  try {
    const holder = JSON.parse(text) as Holder
    return typeof holder.pid === 'number' && typeof holder.host === 'string' ? holder : null
  } catch {
    return null
  }
}

function isAlive(holder: Holder): boolean {
  return holder.host === os.hostname() && sameProcessAlive(holder.pid, holder.start_time)
}

function readQuietly(file: string): string | null {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    return null
  }
}

export async function lockHolder(file: string): Promise<(Holder & {alive: boolean}) | null> {
  const holder = parseHolder(await readFile(file, 'utf8').catch(() => null))
  if (!holder) return null
  return {...holder, alive: isAlive(holder)}
}

/**
 * Removes `file` if it still holds exactly `seen` (a dead holder's lock). Only the process that
 * creates the guard named after that content may do it; a guard whose own holder died is a dead
 * lock too, taken over the same way.
 */
async function takeOver(file: string, seen: string): Promise<void> {
  const guard = `${file}.takeover-${createHash('sha256').update(seen).digest('hex').slice(0, 16)}`
  const mine = JSON.stringify({...selfIdentity(), token: randomUUID()})
  if (!(await createFileExclusive(guard, mine, {sync: false}))) {
    const other = await readFile(guard, 'utf8').catch(() => null)
    const holder = parseHolder(other)
    if (other !== null && holder && !isAlive(holder) && holder.host === os.hostname()) await takeOver(guard, other)
    return
  }
  try {
    if ((await readFile(file, 'utf8').catch(() => null)) === seen) await unlink(file).catch(() => undefined)
  } finally {
    await unlink(guard).catch(() => undefined)
  }
}

/**
 * A lock's content for this process, and how to let go of it once it is in place: a lock file
 * written as part of something built elsewhere and renamed in whole (a run born held, see
 * Store.createRun) is released as one taken by acquireLock.
 */
export function newLock(): {holder: Holder & {at: string; token: string}; text: string; releaserOf: (file: string) => () => Promise<void>} {
  const holder = {...selfIdentity(), at: new Date().toISOString(), token: randomUUID()}
  const text = JSON.stringify(holder)
  return {
    holder,
    text,
    releaserOf: (file) => async () => {
      // Never remove a lock that is no longer ours. Synchronous calls, as the lock's creation (see util/fs.ts).
      if (readQuietly(file) === text) {
        try {
          unlinkSync(file)
        } catch {
          // Gone already.
        }
      }
    },
  }
}

/**
 * Takes the lock, waiting up to `waitMs` for a live holder to let go. Throws E_CONFLICT with
 * `busy` as the message when it cannot.
 */
export async function acquireLock(file: string, options: {waitMs?: number; busy: (holder: Holder) => string; hint: string}): Promise<() => Promise<void>> {
  const lock = newLock()
  const me = lock.holder
  const deadline = Date.now() + (options.waitMs ?? 0)
  for (;;) {
    if (await createFileExclusive(file, lock.text, {sync: false})) return lock.releaserOf(file)
    const seen = readQuietly(file)
    const holder = parseHolder(seen)
    if (seen !== null && holder && !isAlive(holder) && holder.host === me.host) {
      faultPoint('lock-stale')
      await takeOver(file, seen)
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
