/**
 * What an id is (seed 002): R-YYYYMMDD-NNNN and S-YYYYMMDD-NNNN counted per day, F-YYYY-NNN per
 * year, E-NNNN overall; how one is written, ordered and checked. Pure: where a store keeps its
 * counters is its own (../ids.ts for the file store, counter rows in PostgreSQL, a map in memory).
 */
import {PipeError} from '../../errors.js'

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

export function dayKey(date: Date): string {
  return date.toISOString().slice(0, 10).replace(/-/g, '')
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
