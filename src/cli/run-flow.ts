/** The shared end of every command that drives a run: ask at the terminal if it can, print, set the exit code. */
import path from 'node:path'
import type {RunOutcome} from '../engine/engine.js'
import type {SessionOptions} from '../engine/session.js'
import {canPrompt, continueAtTerminal} from './interactive.js'
import {exitCodeForStatus, renderRunResult, toRunResult, type RunResult} from './run-result.js'

export async function finishRun(outcome: RunOutcome, options: SessionOptions, json: boolean, storeFlag: string | undefined, ask = true): Promise<RunResult> {
  const final = ask && canPrompt(json) ? await continueAtTerminal(outcome, options) : outcome
  const result = toRunResult(final, path.resolve(options.cwd, options.store), storeFlag)
  if (!json) process.stdout.write(renderRunResult(result))
  process.exitCode = exitCodeForStatus(result.status, result.error?.code)
  return result
}
