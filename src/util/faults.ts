/**
 * Fault injection for the crash and race tests: PIPE_FAULT_KILL_AT=point (or point#n for its n-th
 * hit) kills the process with SIGKILL when that point is reached; PIPE_FAULT_TRACE=FILE appends
 * every point reached to FILE; PIPE_FAULT_PAUSE_AT=point with PIPE_FAULT_PAUSE_DIR=DIR stops the
 * process at the point's first hit, after creating DIR/reached.PID, until DIR/go exists;
 * PIPE_FAULT_THROW_AT=point throws a plain Error there (a bug in pipe, as the error channel sees one:
 * E_INTERNAL). All unset (always, outside tests), a point costs one comparison.
 */
import {appendFileSync, existsSync, writeFileSync} from 'node:fs'
import path from 'node:path'

const killAt = process.env.PIPE_FAULT_KILL_AT
const trace = process.env.PIPE_FAULT_TRACE
const pauseAt = process.env.PIPE_FAULT_PAUSE_AT
const pauseDir = process.env.PIPE_FAULT_PAUSE_DIR
const throwAt = process.env.PIPE_FAULT_THROW_AT
const hits = new Map<string, number>()

export const faultsEnabled = Boolean(killAt || trace || pauseAt || throwAt)

function pause(): void {
  if (!pauseDir) return
  writeFileSync(path.join(pauseDir, `reached.${process.pid}`), '')
  // A synchronous wait: the point must hold this process exactly here, whatever else is pending.
  const cell = new Int32Array(new SharedArrayBuffer(4))
  while (!existsSync(path.join(pauseDir, 'go'))) Atomics.wait(cell, 0, 0, 20)
}

export function faultPoint(point: string): void {
  if (!faultsEnabled) return
  const n = (hits.get(point) ?? 0) + 1
  hits.set(point, n)
  if (trace) appendFileSync(trace, `${point}#${n}\n`)
  if (killAt && (killAt === `${point}#${n}` || (killAt === point && n === 1))) process.kill(process.pid, 'SIGKILL')
  if (pauseAt === point && n === 1) pause()
  if (throwAt && (throwAt === `${point}#${n}` || (throwAt === point && n === 1))) throw new Error(`fault injected at ${point}#${n}`)
}
