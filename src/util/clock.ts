/**
 * The wall clock pipe's time-driven rules are judged by (a gate's deadline, its reminder, a
 * schedule's slots): PIPE_NOW when set, else the system's. A test moves PIPE_NOW past a deadline or
 * a slot instead of waiting for it. One parser for every use, and a strict one.
 */
import {PipeError} from '../errors.js'

export function pipeNow(env: NodeJS.ProcessEnv = process.env): Date {
  const set = env['PIPE_NOW']
  if (set === undefined || set === '') return new Date()
  const at = isoInstant(set)
  if (at === undefined)
    throw new PipeError('E_INVALID_ARGS', `PIPE_NOW=${JSON.stringify(set)} is not an ISO 8601 time with its timezone`, {
      hint: 'Give PIPE_NOW as YYYY-MM-DDTHH:MM[:SS[.sss]] and Z or an offset (2026-11-28T02:00:30Z, 2026-11-28T03:00:30+01:00), or unset it to use the clock.',
    })
  return at
}

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2}))$/

/**
 * The instant `text` names, only in the one form docs/team.md gives. Date's own parser takes far
 * more ("1" is the year 2001, a time without a zone is the machine's local time, February 30th is
 * March 2nd): a mistyped clock would fire the wrong slots, or act on a deadline, without a word.
 */
function isoInstant(text: string): Date | undefined {
  const m = INSTANT.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second = '0', offsetHours = '0', offsetMinutes = '0'] = m.slice(1)
  const days = new Date(Date.UTC(Number(year), Number(month), 0)).getUTCDate()
  const fits =
    Number(month) >= 1 &&
    Number(month) <= 12 &&
    Number(day) >= 1 &&
    Number(day) <= days &&
    Number(hour) <= 23 &&
    Number(minute) <= 59 &&
    Number(second) <= 59 &&
    Number(offsetHours) <= 23 &&
    Number(offsetMinutes) <= 59
  const at = new Date(text)
  return fits && !Number.isNaN(at.getTime()) ? at : undefined
}
