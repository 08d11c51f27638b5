/**
 * `pipe budget`, `pipe confirm` and `pipe resume` (with the environment its process would have) in this process, through the same app-layer sessions the commands
 * call (each is thin over its session), with the exit code the command would give and the error it would
 * print. As test/helpers/in-process.ts does for resume, review and cancel: a file whose matrix of
 * grants, votes and refusals spawned a `pipe` per case keeps one real process per distinct behaviour
 * (what is printed, the exit code) and decides the rest here. `env` is what the command's process
 * would have: the model endpoint (OPENAI_BASE_URL) a continued run asks, and PIPE_USER, who decides.
 */
import path from 'node:path'
import {budgetSession} from '../../src/app/sessions/budget.js'
import {confirmSession, type ConfirmSession} from '../../src/app/sessions/confirm.js'
import {resumeSession} from '../../src/app/sessions/resume.js'
import type {RunOutcome} from '../../src/engine/engine.js'
import {toPipeError} from '../../src/errors.js'
import {exitCodeForStatus} from '../../src/cli/run-result.js'
import {AUDIT_KEY_ENV} from '../../src/store/trail/integrity.js'

export interface Decided {
  /** The exit code the command gives for this outcome or error. */
  code: number
  outcome?: RunOutcome
  error?: {code: string; message: string; hint?: string}
}

/** The session's outcome as the command ends it, with no audit key (the CLI helper passes none on; records are sealed as its processes seal them). */
async function settle(session: () => Promise<RunOutcome>): Promise<Decided> {
  const key = process.env[AUDIT_KEY_ENV]
  delete process.env[AUDIT_KEY_ENV]
  try {
    const outcome = await session()
    return {code: exitCodeForStatus(outcome.status, outcome.error?.code), outcome}
  } catch (raw) {
    const error = toPipeError(raw)
    return {code: error.exitCode, error: {code: error.code, message: error.message, ...(error.hint !== undefined ? {hint: error.hint} : {})}}
  } finally {
    if (key !== undefined) process.env[AUDIT_KEY_ENV] = key
  }
}

/** The environment the command's process would see: the test's own, with `env` over it (the CLI helper drops these, so must we). */
function processEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = {...process.env}
  for (const name of ['PIPE_STORE', 'OPENAI_API_KEY', 'OPENAI_BASE_URL', 'PIPE_AUDIT_KEY', 'PIPE_USER']) delete base[name]
  return {...base, ...env}
}

/** `pipe budget RUN --add-tokens N | --add-usd X [--note TEXT]` in this process (the folder store under cwd). */
export function budgetHere(
  cwd: string,
  runId: string,
  grant: {addTokens?: number; addUsd?: number; note?: string},
  env: Record<string, string>,
): Promise<Decided> {
  return settle(() => budgetSession({cwd, store: path.join(cwd, '.pipe'), runId, ...grant, env: processEnv(env)}))
}

/** `pipe confirm RUN --yes | --no [--note TEXT] [--accept-cassette]` in this process (the folder store under cwd). */
export function confirmHere(
  cwd: string,
  runId: string,
  answer: {decision: 'yes' | 'no'; note?: string; acceptCassette?: boolean},
  env: Record<string, string>,
): Promise<Decided> {
  // The session hands its options on to castVote (who decides) and resumeSession (the endpoint), which read env.
  const options: ConfirmSession & {env: NodeJS.ProcessEnv} = {cwd, store: path.join(cwd, '.pipe'), runId, ...answer, env: processEnv(env)}
  return settle(() => confirmSession(options))
}

/** `pipe resume RUN` in this process, with the environment its process would have (test/helpers/in-process.ts's resumeHere reads this process's own). */
export function resumeWith(cwd: string, runId: string, env: Record<string, string>): Promise<Decided> {
  return settle(() => resumeSession({cwd, store: path.join(cwd, '.pipe'), runId, env: processEnv(env)}))
}
