/**
 * `pipe run`'s core, called with parsed arguments by its oclif command (commands/run.ts) and by
 * bin/run.js's fast path (cli/fast-run.ts). Nothing here imports oclif.
 */
import {progressPrinter} from './progress.js'
import {finishRun} from './run-flow.js'
import type {RunResult} from './run-result.js'
import {withSignals} from './signals.js'
import {planSession, type RunPlan} from '../engine/sessions/plan.js'
import {startSession} from '../engine/sessions/start.js'
import type {StartSession} from '../engine/sessions/shared.js'
import {decisionFlag} from './decision.js'
import {renderPlan} from './views.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/ids.js'
import {askInputs, canPrompt} from './interactive.js'
import {replyOptions, type ReplyFlagValues} from './reply-options.js'
import {jsonText} from '../util/terminal-text.js'
import {storeDir, type CommandOutput} from './command-io.js'
import {writeOut} from './std-streams.js'

export interface RunArgs {
  pipeline: string
}

/** The flags of `pipe run` as its oclif command declares them (commands/run.ts). */
export interface RunFlags extends ReplyFlagValues {
  input?: string | undefined
  set?: string[] | undefined
  inputs?: string | undefined
  text?: string | undefined
  feature?: string | undefined
  answers?: string | undefined
  decision?: string | undefined
  note?: string | undefined
  policy?: string | undefined
  provider?: string | undefined
  store?: string | undefined
  'dry-run'?: boolean | undefined
}

export async function runCommand(args: RunArgs, flags: RunFlags, output: CommandOutput): Promise<RunResult | RunPlan> {
  if (flags.feature !== undefined) assertId('feature', flags.feature, '--feature')
  const store = storeDir(flags.store)
  for (const pair of flags.set ?? []) {
    // -i used to name the requirement file; say so rather than report an odd input name.
    if (!pair.includes('=')) {
      throw new PipeError('E_INVALID_ARGS', `-i ${pair}: -i sets a pipeline input and takes NAME=VALUE`, {
        hint: `To run on a requirement file, use --input ${pair}; to set an input, write -i NAME=VALUE.`,
      })
    }
  }
  const options: StartSession = {
    cwd: process.cwd(),
    store,
    pipeline: args.pipeline,
    stdin: readStdin,
    ...(flags.input !== undefined ? {input: flags.input} : {}),
    ...(flags.text !== undefined ? {text: flags.text} : {}),
    ...(flags.feature ? {feature: flags.feature} : {}),
    ...(flags.answers ? {answers: flags.answers} : {}),
    ...(flags.decision !== undefined ? {decision: decisionFlag(flags.decision)!} : {}),
    ...(flags.note ? {note: flags.note} : {}),
    ...(flags.policy ? {policy: flags.policy} : {}),
    ...(flags.provider ? {provider: flags.provider as 'auto' | 'offline' | 'openai'} : {}),
    ...(flags.set ? {inputValues: flags.set} : {}),
    ...(flags.inputs ? {inputsFile: flags.inputs} : {}),
    ...replyOptions(flags, process.cwd()),
    ...(canPrompt(output.json) ? {askInputs: (missing: Parameters<typeof askInputs>[0]) => askInputs(missing)} : {}),
  }
  if (flags['dry-run']) {
    const plan = await planSession(options)
    if (!output.json) writeOut(renderPlan(plan))
    if (plan.denied.length > 0) {
      if (output.json) {
        writeOut(`${jsonText(plan)}\n`)
        output.jsonPrinted = true
      }
      throw new PipeError('E_POLICY_DENIED', `the policy denies ${plan.denied.length} command(s) of the pipeline; the run would fail at them`, {
        hint: `Add the commands to allowed_commands in ${plan.policy.file ?? 'a policy.yaml (the built-in policy allows no command; pipe policy init writes a starter)'}, or change the steps; the plan lists each at its line.`,
      })
    }
    return plan
  }
  const outcome = await withSignals((signal) => startSession({...options, signal, onProgress: progressPrinter()}))
  return finishRun(outcome, {cwd: process.cwd(), store, onProgress: progressPrinter()}, output.json, flags.store)
}

function readStdin(): NodeJS.ReadStream {
  if (process.stdin.isTTY) process.stderr.write('Reading the requirement from standard input; end it with Ctrl-D.\n')
  return process.stdin
}
