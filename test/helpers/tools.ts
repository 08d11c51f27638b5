/**
 * The system tools some tests run for real (bubblewrap, faketime, PostgreSQL). On a machine without
 * one, its tests are skipped (mocha counts them as pending) and .mocharc.cjs says so once at the
 * start; under CI (CI set, as .ci/run sets it), where the tools are installed on purpose, a missing
 * one fails its tests loudly instead, so that a broken install never reads as a green suite.
 */
import {existsSync, readdirSync} from 'node:fs'
import path from 'node:path'
import {findBwrap} from '../../src/policy/sandbox.js'

export type Tool = 'bubblewrap' | 'faketime' | 'postgresql'

/** How to install each (Debian or Ubuntu), as the README says. Keep in step with .mocharc.cjs. */
export const install: Record<Tool, string> = {
  bubblewrap: 'sudo apt-get install bubblewrap',
  faketime: 'sudo apt-get install faketime',
  postgresql: 'sudo apt-get install postgresql',
}

export const FAKETIME = ['/usr/bin/faketime', '/usr/local/bin/faketime'].find((f) => existsSync(f))

function installed(tool: Tool): boolean {
  if (tool === 'bubblewrap') return findBwrap() !== null
  if (tool === 'faketime') return FAKETIME !== undefined
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
