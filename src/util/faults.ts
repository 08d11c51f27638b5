/**
 * Fault injection for the crash tests: PIPE_FAULT_KILL_AT=point (or point#n for its n-th hit) kills
 * the process with SIGKILL when that point is reached; PIPE_FAULT_TRACE=FILE appends every point
 * reached to FILE. Both unset (always, outside tests), a point costs one comparison.
 */
import {appendFileSync} from 'node:fs'

const killAt = process.env.PIPE_FAULT_KILL_AT
const trace = process.env.PIPE_FAULT_TRACE
const hits = new Map<string, number>()

export const faultsEnabled = Boolean(killAt || trace)

export function faultPoint(point: string): void {
  if (!faultsEnabled) return
  const n = (hits.get(point) ?? 0) + 1
  hits.set(point, n)
  if (trace) appendFileSync(trace, `${point}#${n}\n`)
  if (killAt && (killAt === `${point}#${n}` || (killAt === point && n === 1))) process.kill(process.pid, 'SIGKILL')
}
