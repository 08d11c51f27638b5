/**
 * The wall clock the time-driven rules of a waiting run are judged by (a gate's deadline, its
 * reminder): PIPE_NOW (an ISO time) when set, else the system's. A test moves PIPE_NOW past a
 * deadline instead of waiting for it, as it does for a schedule's slot.
 */
import {PipeError} from '../errors.js'

export function policyNow(env: NodeJS.ProcessEnv = process.env): Date {
  const set = env['PIPE_NOW']
  if (set === undefined || set === '') return new Date()
  const at = new Date(set)
  if (Number.isNaN(at.getTime()))
    throw new PipeError('E_INVALID_ARGS', `PIPE_NOW=${set} is not a time`, {
      hint: 'Give PIPE_NOW as an ISO time (2026-11-28T02:00:30Z), or unset it to use the clock.',
    })
  return at
}
