/**
 * The commands that continue a run (`pipe resume`, `review`, `cancel`, `budget`, `confirm`) in this
 * process, through the same app-layer sessions the commands call (each command is thin over its
 * session), with the exit code the command would give and the error it would print. A file whose
 * matrix of decisions, grants and refusals spawned a `pipe` per case keeps one real process per
 * distinct behaviour (what is printed, the exit code, a real SIGKILL, flag parsing) and decides the
 * rest here. `env` is what the command's process would have on top of the test's own: the model
 * endpoint (OPENAI_BASE_URL) a continued run asks, PIPE_USER who decides, PIPE_HOME.
 */
import path from 'node:path'
import {budgetSession} from '../../src/app/sessions/budget.js'
import {cancelSession} from '../../src/app/sessions/cancel.js'
import {confirmSession, type ConfirmSession} from '../../src/app/sessions/confirm.js'
import {resumeSession} from '../../src/app/sessions/resume.js'
import {reviewSession} from '../../src/app/sessions/review.js'
import type {RunOutcome} from '../../src/engine/engine.js'
import {toPipeError} from '../../src/errors.js'
import {ExitCode} from '../../src/exit-codes.js'
import {exitCodeForStatus} from '../../src/cli/run-result.js'
import {AUDIT_KEY_ENV} from '../../src/store/trail/integrity.js'

export interface InProcess {
  /** The exit code the command gives for this outcome or error. */
  code: number
  outcome?: RunOutcome
  error?: {code: string; message: string; hint?: string}
}

const byStatus = (outcome: RunOutcome): number => exitCodeForStatus(outcome.status, outcome.error?.code)

/**
 * The session's outcome as the command ends it. No audit key while it runs: the CLI helper passes
 * none on, so records are sealed as its processes seal them.
 */
async function settle(session: () => Promise<RunOutcome>, exitCode: (outcome: RunOutcome) => number = byStatus): Promise<InProcess> {
  const key = process.env[AUDIT_KEY_ENV]
  delete process.env[AUDIT_KEY_ENV]
  try {
    const outcome = await session()
    return {code: exitCode(outcome), outcome}
  } catch (raw) {
    const error = toPipeError(raw)
    return {code: error.exitCode, error: {code: error.code, message: error.message, ...(error.hint !== undefined ? {hint: error.hint} : {})}}
  } finally {
    if (key !== undefined) process.env[AUDIT_KEY_ENV] = key
  }
}

/** The environment the command's process would see: the test's own without what the CLI helper drops, `env` over it. */
function processEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {...process.env}
  for (const name of ['PIPE_STORE', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', AUDIT_KEY_ENV, 'PIPE_USER']) delete base[name]
  return {...base, ...env}
}

/** The folder store under cwd, as every command here is given it. */
const folder = (cwd: string): {cwd: string; store: string} => ({cwd, store: path.join(cwd, '.pipe')})

/** The options of a session that runs steps: the folder store, and the environment its provider reads. */
const session = (cwd: string, env: Record<string, string>): {cwd: string; store: string; env: NodeJS.ProcessEnv} => ({...folder(cwd), env: processEnv(env)})

/** `pipe resume RUN [--decision D]` in this process. */
export function resumeHere(cwd: string, runId: string, env: Record<string, string> = {}, decision?: 'go' | 'hold' | 'drop'): Promise<InProcess> {
  return settle(() => resumeSession({...session(cwd, env), runId, ...(decision ? {decision} : {})}))
}

/** `pipe review RUN --decision D` in this process. */
export function reviewHere(cwd: string, runId: string, decision: 'go' | 'hold' | 'drop'): Promise<InProcess> {
  return settle(() => reviewSession({...folder(cwd), runId, decision}))
}

/** `pipe cancel RUN --reason R` in this process: it exits 0 once the run is cancelled, as the command does. */
export function cancelHere(cwd: string, runId: string, reason: string): Promise<InProcess> {
  return settle(
    () => cancelSession({...folder(cwd), runId, reason}),
    (outcome) => (outcome.status === 'cancelled' ? ExitCode.OK : byStatus(outcome)),
  )
}

/** `pipe budget RUN --add-tokens N | --add-usd X [--note TEXT]` in this process. */
export function budgetHere(
  cwd: string,
  runId: string,
  grant: {addTokens?: number; addUsd?: number; note?: string},
  env: Record<string, string>,
): Promise<InProcess> {
  return settle(() => budgetSession({...session(cwd, env), runId, ...grant}))
}

/** `pipe confirm RUN --yes | --no [--note TEXT] [--accept-cassette]` in this process. */
export function confirmHere(
  cwd: string,
  runId: string,
  answer: {decision: 'yes' | 'no'; note?: string; acceptCassette?: boolean},
  env: Record<string, string>,
): Promise<InProcess> {
  // The session hands its options on to castVote (who decides) and resumeSession (the endpoint), which read env.
  const options: ConfirmSession & {env: NodeJS.ProcessEnv} = {...session(cwd, env), runId, ...answer}
  return settle(() => confirmSession(options))
}
