/**
 * ID formats (seed 002): R-YYYYMMDD-NNNN and S-YYYYMMDD-NNNN counted per day, F-YYYY-NNN per year,
 * E-NNNN overall. Allocation needs no lock: an ID is taken by creating its record exclusively, so
 * of two processes racing for one number exactly one wins and the other moves on. A small hint
 * file remembers the last number so that allocation does not scan history.
 */
import {mkdir, readdir} from '../util/fs-async.js'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {readSmallFile, writeFileAtomic} from '../util/fs.js'

export const ID_PATTERNS = {
  run: /^R-\d{8}-\d{4,}$/,
  spec: /^S-\d{8}-\d{4,}$/,
  feature: /^F-\d{4}-\d{3,}$/,
  evidence: /^E-\d{4,}$/,
} as const

/** Names users give on the command line that are not store ids: step ids and publish target names (schemas/pipeline.schema.json). */
export const NAME_PATTERNS = {
  step: /^[a-z][a-z0-9_]{0,63}$/,
  target: /^[a-z][a-z0-9_-]{0,63}$/,
} as const

const ID_FORMATS: Record<keyof typeof ID_PATTERNS | keyof typeof NAME_PATTERNS, {what: string; format: string; hint: string}> = {
  run: {what: 'a run id', format: 'R-YYYYMMDD-NNNN', hint: 'pipe runs list shows the run ids.'},
  spec: {what: 'a spec version', format: 'S-YYYYMMDD-NNNN', hint: 'pipe spec list shows the versions.'},
  feature: {
    what: 'a feature id',
    format: 'F-YYYY-NNN',
    hint: 'pipe runs list shows the feature of each run; omit --feature on pipe run to allocate a new one.',
  },
  evidence: {what: 'an evidence id', format: 'E-NNNN', hint: 'pipe snapshot show RUN lists the evidence of each step.'},
  step: {what: 'a step id', format: 'lower case letters, digits and _', hint: 'pipe runs show RUN lists the steps of a run.'},
  target: {what: 'a publish target name', format: 'lower case letters, digits, _ and -', hint: "The pipeline's publish step names its targets."},
}

/**
 * Refuses an id or name given on the command line that cannot be one, before anything is read or
 * written: an id becomes a file name in the store, so `../x` must never get that far.
 */
export function assertId(kind: keyof typeof ID_FORMATS, value: string, label?: string): void {
  const pattern = kind in ID_PATTERNS ? ID_PATTERNS[kind as keyof typeof ID_PATTERNS] : NAME_PATTERNS[kind as keyof typeof NAME_PATTERNS]
  if (pattern.test(value)) return
  const format = ID_FORMATS[kind]
  throw new PipeError('E_INVALID_ARGS', `${label ? `${label}: ` : ''}${JSON.stringify(value)} is not ${format.what} (${format.format})`, {hint: format.hint})
}

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
    await mkdir(path.dirname(file), {recursive: true}).catch(() => undefined)
    await writeFileAtomic(file, String(n), {sync: false}).catch(() => undefined)
  })
}

export function dayKey(date: Date): string {
  return date.toISOString().slice(0, 10).replace(/-/g, '')
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

export type DatedPrefix = 'R' | 'S' | 'F'

/** The key of `now` in a dated series: its day (R, S) or its year (F). */
export function todayKey(prefix: DatedPrefix, now: Date): string {
  return prefix === 'F' ? String(now.getUTCFullYear()) : dayKey(now)
}

/** max(today, the latest key among the counter names `names` of the series). */
export function latestDay(names: Iterable<string>, prefix: DatedPrefix, today: string): string {
  let day = today
  const pattern = new RegExp(`^${prefix}-(\\d{${today.length}})$`)
  for (const name of names) {
    const counted = pattern.exec(name)?.[1]
    if (counted !== undefined && counted > day) day = counted
  }
  return day
}

/** The key an id of a series was numbered in ('20261121' of S-20261121-0001, '' of E-0001). */
export function idKey(id: string): string {
  const first = id.indexOf('-')
  const last = id.lastIndexOf('-')
  return last > first ? id.slice(first + 1, last) : ''
}

export function formatId(prefix: 'R' | 'S' | 'F' | 'E', key: string, n: number): string {
  const digits = prefix === 'F' ? 3 : 4
  const number = String(n).padStart(digits, '0')
  return key ? `${prefix}-${key}-${number}` : `${prefix}-${number}`
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

/**
 * Allocation order of ids of one series: a counter past its fourth digit (R-20261121-10000) sorts
 * after R-20261121-9999, which plain string order gets wrong once a day holds 10,000 runs or versions.
 */
export function compareIds(a: string, b: string): number {
  // Called ~n log n times when a big store's folder is sorted: no allocation, no regex.
  const i = a.lastIndexOf('-')
  const j = b.lastIndexOf('-')
  if (i !== j || a.slice(0, i) !== b.slice(0, j)) return a < b ? -1 : a > b ? 1 : 0
  if (a.length !== b.length) return a.length - b.length
  return a < b ? -1 : a > b ? 1 : 0
}
