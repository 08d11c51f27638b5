/** The shared end of every command that drives a run: ask at the terminal if it can, print, set the exit code. */
import {storeLabel} from '../store/open.js'
import type {RunOutcome} from '../engine/engine.js'
import type {SessionOptions} from '../app/sessions/shared.js'
import {speak} from './error-channel.js'
import {redact} from '../util/redact.js'
import {canPrompt, continueAtTerminal} from './interactive.js'
import {exitCodeForStatus, renderRunResult, toRunResult, type RunResult} from './run-result.js'
import {withSignals} from './signals.js'
import {writeOut} from './std-streams.js'

/** What a command prints for a run it handed back to the workers (a detached run): `{"run_id", "status": "queued", "queue", "run_status"}`. */
export interface QueuedResult {
  run_id: string
  status: 'queued'
  queue: string
  /** The run's own status now (it stays awaiting_input, with the input recorded, until a worker takes it). */
  run_status: RunOutcome['status']
  store: string
}

/** The result of a run handed back to the workers, printed, or null when the run was driven here. */
export function finishQueued(outcome: RunOutcome, options: SessionOptions, json: boolean): QueuedResult | null {
  if (!outcome.queued) return null
  if (!json) writeOut(`${outcome.run_id} queued on ${outcome.queued}: a pipe worker continues it; pipe runs show ${outcome.run_id} follows it\n`)
  process.exitCode = 0
  return {run_id: outcome.run_id, status: 'queued', queue: outcome.queued, run_status: outcome.status, store: storeLabel(options.cwd, options.store)}
}

export async function finishRun(outcome: RunOutcome, options: SessionOptions, json: boolean, storeFlag: string | undefined, ask = true): Promise<RunResult> {
  // Ctrl-C stays honoured for the whole conversation: at a prompt, and in every session it drives.
  const final =
    ask && canPrompt(json)
      ? await withSignals(
          (signal) => continueAtTerminal(outcome, {...options, signal}),
          'stopping (at a prompt the run stays paused; a running step is recorded as interrupted)',
        )
      : outcome
  const result = toRunResult(final, storeLabel(options.cwd, options.store), storeFlag)
  const exitCode = exitCodeForStatus(result.status, result.error?.code)
  if (result.status === 'failed' || result.status === 'blocked') speakError(result, exitCode)
  if (!json) writeOut(renderRunResult(result))
  process.exitCode = exitCode
  return result
}

/**
 * A run that failed or needs a person speaks on the error channel (seed 002) like any other error:
 * stderr has the code, the message, the next action and the log path; the day's log has an entry;
 * the JSON result's `error` carries the same fields.
 */
function speakError(result: RunResult, exitCode: number): void {
  const error = result.error ?? {code: 'E_INTERNAL', message: result.reason ?? `run ${result.run_id} ${result.status}`}
  // The engine judged whether pipe resume can go on (an outage fixed outside the pipeline); only then is it offered.
  const next = result.next_command
  // A hint that already says what pipe resume does (a publish's) is not followed by the command again.
  const named = error.hint?.includes(`pipe resume ${result.run_id}`) === true
  const hint = [error.hint, next && !named ? `Then continue it with: ${next}` : ''].filter(Boolean).join(' ')
  const where = error.step ? ` at step ${error.step}` : ''
  const {log, trace_id} = speak(
    {code: error.code, message: error.message, hint, trace_id: error.trace_id},
    {
      level: result.status === 'failed' ? 'ERROR' : 'WARN',
      entry: `[${error.code}] run ${result.run_id} ${result.status}${where}: ${error.message}`,
      detail: hint || undefined,
    },
  )
  result.error = {...error, ...(hint ? {hint: redact(hint)} : {}), exit_code: exitCode, ...(log ? {log} : {}), trace_id}
}
