/**
 * Cron expressions read by croner (a maintained parser, not one of pipe's own), loaded only by the
 * code that reads a schedule: every other command starts without it.
 */
import type {Cron as CronType} from 'croner'

export type CronClass = typeof CronType

export async function loadCron(): Promise<CronClass> {
  return (await import('croner')).Cron
}

/** Whether `zone` is an IANA timezone this Node knows (Intl is the same table croner converts with). */
export function timezoneProblem(zone: string): string | undefined {
  try {
    new Intl.DateTimeFormat('en', {timeZone: zone})
    return undefined
  } catch {
    return `unknown timezone ${JSON.stringify(zone)}`
  }
}

/** The cron expression read in `zone`, or why it cannot be. */
export function parseCron(Cron: CronClass, expression: string, zone: string): {cron: CronType; problem?: undefined} | {cron?: undefined; problem: string} {
  const tz = timezoneProblem(zone)
  if (tz !== undefined) return {problem: tz}
  // croner also reads a seventh field (the year) and more: pipe's schedules say five or six, and a
  // year field would make a schedule that stops firing one day without a word.
  const fields = expression.trim().split(/\s+/)
  if (fields[0]!.startsWith('@') && fields.length > 1) {
    return {
      problem: `cron expression ${JSON.stringify(expression)} is not one pipe reads: a nickname stands alone (@hourly, @daily, @weekly, @monthly, @yearly), or give five fields`,
    }
  }
  if (!(fields.length === 1 && fields[0]!.startsWith('@')) && fields.length !== 5 && fields.length !== 6) {
    return {
      problem: `cron expression ${JSON.stringify(expression)} has ${fields.length} field(s): give five (minute hour day-of-month month day-of-week) or six with seconds first`,
    }
  }
  try {
    const cron = new Cron(expression, {timezone: zone, paused: true})
    // A valid pattern that never fires (30 February) is as useless as a wrong one.
    if (cron.nextRun(new Date(0)) === null) return {problem: `cron expression ${JSON.stringify(expression)} never fires`}
    return {cron}
  } catch (error) {
    return {problem: `bad cron expression ${JSON.stringify(expression)}: ${(error as Error).message.replace(/^CronPattern: /, '')}`}
  }
}

/** A slot is on time until this long after it: later, it was missed, and catch_up says what to do with it. */
export const ON_TIME_MS = 60_000

/** At most this many missed slots fire at once (catch_up: all). */
export const CATCH_UP_CAP = 100

export type CatchUp = 'none' | 'latest' | 'all'

/**
 * The slots to fire at `now`, oldest first: the slots after `last` (the latest slot fired, or none
 * yet: then only a slot on time counts, as a schedule starts when it is first seen) up to `now`,
 * as `catchUp` says for those missed. `skipped`: missed slots left out (catch_up none or latest, or
 * beyond the cap of all).
 */
export function dueSlots(cron: CronType, now: Date, last: Date | null, catchUp: CatchUp): {fire: Date[]; skipped: number; capped: boolean} {
  const floor = last ?? new Date(now.getTime() - ON_TIME_MS)
  // previousRuns is strictly before its reference: a slot at `now` exactly is due.
  const recent = cron
    .previousRuns(CATCH_UP_CAP + 1, new Date(now.getTime() + 1))
    .filter((d) => d.getTime() > floor.getTime())
    .reverse()
  const capped = recent.length > CATCH_UP_CAP
  const slots = capped ? recent.slice(1) : recent
  const onTime = slots.filter((d) => now.getTime() - d.getTime() < ON_TIME_MS)
  const missed = slots.filter((d) => now.getTime() - d.getTime() >= ON_TIME_MS)
  const beyond = capped ? 1 : 0
  // Past the cap the missed slots are not counted (a year of minutes): `skipped` is then a floor.
  if (catchUp === 'all') return {fire: slots, skipped: beyond, capped}
  if (catchUp === 'latest') {
    const latest = onTime.length > 0 ? onTime : missed.slice(-1)
    return {fire: latest, skipped: slots.length - latest.length + beyond, capped}
  }
  return {fire: onTime, skipped: missed.length + beyond, capped}
}
