/**
 * The file store's id allocation (the formats are ./trail/ids.ts's). Allocation needs no lock: an ID is taken by creating its record exclusively, so
 * of two processes racing for one number exactly one wins and the other moves on. A small hint
 * file remembers the last number so that allocation does not scan history.
 */
import {readdir} from '../../util/fs-async.js'
import path from 'node:path'
import {formatId, latestDay, todayKey, type DatedPrefix} from '../trail/ids.js'
import {makeDirs, readSmallFile, writeFileAtomic} from '../../util/fs.js'

export {assertId, compareIds, dayKey, formatId, ID_PATTERNS, idKey, latestDay, NAME_PATTERNS, todayKey, type DatedPrefix} from '../trail/ids.js'

/**
 * The number a counter (hint) file names, or null when it is missing, not a regular file (a FIFO
 * or a device must not hang or flood a reader) or does not hold a plain non-negative number.
 */
export async function readCounter(file: string): Promise<number | null> {
  const text = (await readSmallFile(file))?.trim()
  if (text === undefined || !/^\d{1,15}$/.test(text)) return null
  return Number(text)
}

/**
 * Replaces a counter file (never synced: a hint). Renamed into place, so that whatever was put
 * there instead (a symlink to another file, a FIFO that would block the write) is replaced, not
 * written through; a folder in its place is left, and the hint with it.
 */
async function writeCounter(file: string, n: number): Promise<void> {
  await writeFileAtomic(file, String(n), {sync: false}).catch(async (error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') return
    // No ids folder (a new store, or one removed by hand): made the first time a hint is written.
    try {
      makeDirs(path.dirname(file))
    } catch {
      // A hint only: the ids are right without it.
      return
    }
    await writeFileAtomic(file, String(n), {sync: false}).catch(() => undefined)
  })
}

/**
 * The key (day, or year for features) a dated id is numbered in: today's, or the latest one the
 * store already numbered ids of the series in when the clock went back, so that an id never sorts
 * before one allocated earlier (ids order runs, versions and features; the times in records stay
 * the clock's, and pipe audit verify notes where they run backwards). The counters in `idsDir` are
 * the state: one per key.
 */
export async function allocationDay(idsDir: string, prefix: DatedPrefix, now: Date): Promise<string> {
  return latestDay(await readdir(idsDir).catch(() => [] as string[]), prefix, todayKey(prefix, now))
}

/**
 * Allocates the next free ID of a series: `take(id)` must create the record exclusively and
 * return false when the ID is already taken.
 */
export async function allocateId(idsDir: string, prefix: 'R' | 'S' | 'F' | 'E', key: string, take: (id: string) => Promise<boolean>): Promise<string> {
  const hint = hintFile(idsDir, prefix, key)
  let n = (await readCounter(hint)) ?? 0
  for (let tries = 0; tries < 1_000_000; tries++) {
    n++
    const id = formatId(prefix, key, n)
    // The hint is a starting point for allocation (a lost or stale one costs a few retries, never a
    // duplicate) and the newest-first index of spec versions: written before the take, it never
    // names less than what exists, even when the process dies right after taking.
    await writeCounter(hint, n)
    if (await take(id)) return id
  }
  throw new Error(`could not allocate an ID in series ${prefix}${key ? `-${key}` : ''}`)
}

function hintFile(idsDir: string, prefix: string, key: string): string {
  return path.join(idsDir, key ? `${prefix}-${key}` : prefix)
}

/** The next `count` ids of a series as the hint sees them: candidates, not reservations. */
export async function peekIds(idsDir: string, prefix: 'R' | 'S' | 'F' | 'E', key: string, count: number): Promise<string[]> {
  const n = (await readCounter(hintFile(idsDir, prefix, key))) ?? 0
  return Array.from({length: count}, (_, i) => formatId(prefix, key, n + i + 1))
}

/** Moves the hint past an id taken without allocateId (a journalled candidate). */
export async function noteIdTaken(idsDir: string, prefix: 'R' | 'S' | 'F' | 'E', key: string, id: string): Promise<void> {
  const n = Number(id.slice(id.lastIndexOf('-') + 1))
  const file = hintFile(idsDir, prefix, key)
  if (!(n > ((await readCounter(file)) ?? 0))) return
  await writeCounter(file, n)
}
