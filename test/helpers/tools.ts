/**
 * The system tools some tests run for real (bubblewrap, faketime, PostgreSQL). On a machine without
 * one, its tests are skipped (mocha counts them as pending) and .mocharc.cjs says so once at the
 * start; under CI (CI set, as .ci/run sets it), where the tools are installed on purpose, a missing
 * one fails its tests loudly instead, so that a broken install never reads as a green suite.
 */
import {existsSync, readdirSync} from 'node:fs'
import path from 'node:path'
import {findBwrap} from '../../src/policy/sandbox.js'

export type Tool = 'bubblewrap' | 'faketime' | 'postgresql' | 'zsh'

/** How to install each (Debian or Ubuntu), as the README says. Keep in step with .mocharc.cjs. */
export const install: Record<Tool, string> = {
  bubblewrap: 'sudo apt-get install bubblewrap',
  faketime: 'sudo apt-get install faketime',
  postgresql: 'sudo apt-get install postgresql',
  zsh: 'sudo apt-get install zsh',
}

/**
 * libfaketime itself (node is multithreaded: the MT build), preloaded straight into the processes
 * that must see another clock. Not through Debian's `faketime` wrapper: the wrapper opens a named
 * semaphore first and fails (`sem_open: File exists`) when another process left one behind.
 */
export const LIBFAKETIME = [
  '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/local/lib/faketime/libfaketimeMT.so.1',
].find((f) => existsSync(f))

/**
 * The environment of a process (and its children) whose clock is `spec` in libfaketime's terms:
 * `@2031-07-09 04:05:06` starts there and runs on, `+2h` is two hours on. No shared memory: inside
 * bubblewrap's read-only /dev libfaketime could not open it, and no test needs clocks shared.
 */
export function clockAt(spec: string): Record<string, string> {
  if (!LIBFAKETIME) throw new Error('libfaketime is not installed (Debian package faketime; .ci/run installs it): these tests need another date')
  return {LD_PRELOAD: LIBFAKETIME, FAKETIME: spec, FAKETIME_DISABLE_SHM: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1'}
}

const onPath = (name: string): boolean => (process.env.PATH ?? '').split(path.delimiter).some((d) => d !== '' && existsSync(path.join(d, name)))

function installed(tool: Tool): boolean {
  if (tool === 'bubblewrap') return findBwrap() !== null
  if (tool === 'faketime') return LIBFAKETIME !== undefined
  // zsh completes only on a terminal: util-linux's script gives it one.
  if (tool === 'zsh') return onPath('zsh') && onPath('script')
  const base = '/usr/lib/postgresql'
  return existsSync(base) && readdirSync(base).some((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
}

/** CI=true (or any value but false/0): the tools are expected. */
export const inCi = (): boolean => !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase())

/**
 * In a `before` hook (`before(function () { needs(this, 'faketime') })`): skips the suite when the
 * tool is missing, or fails it under CI.
 */
export function needs(context: Mocha.Context, tool: Tool): void {
  if (installed(tool)) return
  if (inCi()) throw new Error(`${tool} is not installed and CI is set, so its tests fail rather than skip: ${install[tool]}`)
  context.skip()
}
