/**
 * A run continued in this process through the same app-layer session the command calls (`pipe resume`, `pipe review`, `pipe cancel` are thin over these), with the exit
 * code the command would give. What only a process shows (a real SIGKILL, what is printed, flag
 * parsing) stays a process in the tests.
 */
import path from 'node:path'
import {cancelSession} from '../../src/app/sessions/cancel.js'
import {resumeSession} from '../../src/app/sessions/resume.js'
import {reviewSession} from '../../src/app/sessions/review.js'
import type {RunOutcome} from '../../src/engine/engine.js'
import {toPipeError} from '../../src/errors.js'
import {ExitCode} from '../../src/exit-codes.js'
import {exitCodeForStatus} from '../../src/cli/run-result.js'

export interface InProcess {
  /** The exit code the command gives for this outcome or error. */
  code: number
  outcome?: RunOutcome
  error?: {code: string; message: string}
}

/** What the run-driving commands do with a session's outcome: its status's exit code, or the error's. */
async function settle(session: Promise<RunOutcome>, exitCode: (outcome: RunOutcome) => number): Promise<InProcess> {
  try {
    const outcome = await session
    return {code: exitCode(outcome), outcome}
  } catch (raw) {
    const error = toPipeError(raw)
    return {code: error.exitCode, error: {code: error.code, message: error.message}}
  }
}

const byStatus = (outcome: RunOutcome): number => exitCodeForStatus(outcome.status, outcome.error?.code)

/** The options the command passes (decisions are recorded as the user running the tests, as a `pipe` process would). */
const session = (cwd: string): {cwd: string; store: string} => ({cwd, store: path.join(cwd, '.pipe')})

/** `pipe resume RUN` in this process (the folder store under cwd). */
export function resumeHere(cwd: string, runId: string): Promise<InProcess> {
  return settle(resumeSession({...session(cwd), runId}), byStatus)
}

/** `pipe review RUN --decision D` in this process. */
export function reviewHere(cwd: string, runId: string, decision: 'go' | 'hold' | 'drop'): Promise<InProcess> {
  return settle(reviewSession({...session(cwd), runId, decision}), byStatus)
}

/** `pipe cancel RUN --reason R` in this process: it exits 0 once the run is cancelled, as the command does. */
export function cancelHere(cwd: string, runId: string, reason: string): Promise<InProcess> {
  return settle(cancelSession({...session(cwd), runId, reason}), (outcome) => (outcome.status === 'cancelled' ? ExitCode.OK : byStatus(outcome)))
}
