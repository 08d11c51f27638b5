/** What run-driving commands (run, resume, answer, review) print and return. */
import path from 'node:path'
import type {RunOutcome} from '../engine/engine.js'
import {ExitCode} from '../exit-codes.js'
import {isStoreUrl, storeInCommand} from '../store/location.js'
import {firstLine, line as t} from '../util/terminal-text.js'

export interface RunResult extends RunOutcome {
  store: string
  /** For a failed or blocked run, also what the error channel printed: the exit code and the log file. */
  error?: (NonNullable<RunOutcome['error']> & {exit_code?: number; log?: string}) | undefined
  /** The command that continues a paused or interrupted run. */
  next_command?: string
}

export function exitCodeForStatus(status: RunOutcome['status'], errorCode?: string): number {
  switch (status) {
    case 'succeeded':
      return ExitCode.OK
    case 'awaiting_input':
      return ExitCode.PAUSED
    case 'cancelled':
      return ExitCode.CANCELLED
    case 'interrupted':
      return ExitCode.INTERRUPTED
    case 'blocked':
      return ExitCode.BLOCKED
    default:
      return errorCode === 'E_POLICY_DENIED' ? ExitCode.POLICY_DENIED : ExitCode.FAILED
  }
}

export function toRunResult(outcome: RunOutcome, store: string, storeFlag: string | undefined): RunResult {
  // A folder as given: the command prints where it was typed, relative or not.
  const storeArg = storeFlag ? ` --store ${isStoreUrl(storeFlag) ? storeInCommand(process.cwd(), storeFlag) : storeFlag}` : ''
  let next: string | undefined
  if (outcome.status === 'awaiting_input' && outcome.pending?.kind === 'answers') next = `pipe answer ${outcome.run_id} --file answers.yaml${storeArg}`
  else if (outcome.status === 'awaiting_input' && outcome.pending?.kind === 'confirm')
    next = `pipe confirm ${outcome.run_id} --yes${storeArg}   (or --no --note TEXT)`
  else if (outcome.status === 'awaiting_input' && outcome.pending?.kind === 'budget')
    next = `pipe budget ${outcome.run_id} --add-tokens N --note TEXT${storeArg}   (or --add-usd X)`
  else if (outcome.status === 'awaiting_input') next = `pipe review ${outcome.run_id} --decision go${storeArg}   (or hold, drop)`
  else if (outcome.status === 'interrupted' || outcome.status === 'blocked') next = `pipe resume ${outcome.run_id}${storeArg}`
  // The engine judges, as pipe resume would, whether a failed run can be redriven from its failed step.
  else if (outcome.status === 'failed' && outcome.redrivable === true) next = `pipe resume ${outcome.run_id}${storeArg}`
  return {...outcome, store, ...(next ? {next_command: next} : {})}
}

export function renderRunResult(result: RunResult): string {
  const lines = [
    t`run ${result.run_id}  ${result.status}  feature ${result.feature_id}  spec ${result.spec_version ?? '-'}  (${result.steps_run} step(s) this session)`,
  ]
  // Which policy bounds the run is no detail for --json only: a policy.yaml found in a folder above can change what a run may do.
  if (result.policy !== undefined)
    lines.push(
      result.policy === null ? 'policy: the built-in default (no policy.yaml found; pipe policy init writes one)' : t`policy: ${shownPath(result.policy)}`,
    )
  // A failed or blocked run's error went to stderr in full: a long one (a cassette miss's diff) is not said twice.
  if (result.reason && result.status !== 'succeeded')
    lines.push(t`reason: ${result.status === 'failed' || result.status === 'blocked' ? firstLine(result.reason, 'the error on stderr') : result.reason}`)
  // The error itself went to stderr (see run-flow.ts); stdout keeps to the result.
  const questions = result.pending?.questions ?? []
  if (questions.length > 0) {
    lines.push('', 'Questions (answer them in a YAML file, keyed by id or by field):')
    for (const q of questions) lines.push(t`  ${q.id}${q.field ? ` [${q.field}]` : ''}  ${q.question}`)
    lines.push('', 'answers.yaml:', 'answers:')
    for (const q of questions) lines.push(t`  ${q.id}: "..."`)
  }
  const action = result.pending?.action
  if (action) {
    // A step's own confirmation names what asked for it; an agent's names the tool call.
    if (action.rule !== undefined)
      lines.push('', t`The step asks to run (${action.rule}):`, t`  ${action.tool} step ${result.pending!.step} ${JSON.stringify(action.arguments)}`)
    else lines.push('', t`The agent asks to run (${action.level}, call ${action.call_id}):`, t`  ${action.tool} ${JSON.stringify(action.arguments)}`)
    for (const argv of action.argv ?? []) lines.push(t`  argv: ${JSON.stringify(argv)}`)
  }
  if (result.pending?.deadline) lines.push(t`Confirm by ${result.pending.deadline}; after that the run stays paused (it never goes on by itself).`)
  if (result.next_command)
    lines.push('', t`${result.status === 'failed' ? 'Once the cause is fixed, redrive it with' : 'Continue with'}:\n  ${result.next_command}`)
  if (result.status === 'succeeded' || result.status === 'failed') lines.push(t`Audit it with:\n  pipe snapshot list ${result.run_id}`)
  return `${lines.join('\n')}\n`
}

/** A file as the person at this folder would name it: relative when that is shorter. */
function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file)
  return relative.length > 0 && relative.length < file.length ? relative : file
}
