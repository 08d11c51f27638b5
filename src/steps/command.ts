import {PipeError} from '../errors.js'
import type {CommandResult} from '../policy/exec.js'
import {narrowed} from './output-schemas.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler, StepOf} from './types.js'

type Parse = NonNullable<StepOf<'command'>['parse']>
const PARSED: readonly Parse[] = ['lines', 'json', 'text']

/** The whole captured stream, or null when the capture cap dropped part of it. */
function whole(stream: CommandResult['stdout']): string | null {
  return stream.omitted_bytes > 0 ? null : stream.head + stream.tail
}

/** outputs.lines / .json / .text from stdout, as `parse:` asks. Invalid JSON fails a step that exited 0. */
function parsed(parse: Parse | undefined, result: CommandResult, ok: boolean): Pick<KindOutputs<'command'>, Parse> {
  if (parse === undefined) return {}
  const text = whole(result.stdout)
  if (text === null) {
    if (!ok) return parse === 'json' ? {json: null} : parse === 'lines' ? {lines: null} : {text: null}
    throw new PipeError(
      'E_IO',
      `stdout was ${result.stdout.total_bytes} bytes, more than the policy's max_output_bytes keeps, so parse: ${parse} cannot read it whole`,
      {
        hint: 'Raise resource_limits.max_output_bytes in the policy, or make the command print less.',
        details: {command: result},
      },
    )
  }
  if (parse === 'text') return {text}
  if (parse === 'lines') return {lines: text.split(/\r?\n/).filter((line) => line.trim() !== '')}
  try {
    return {json: JSON.parse(text) as unknown}
  } catch (error) {
    if (!ok) return {json: null}
    throw new PipeError('E_BUILD_FAIL', `stdout of ${JSON.stringify(result.argv)} is not JSON (${(error as Error).message}), but the step says parse: json`, {
      hint: 'Make the command print one JSON document, or use parse: lines or parse: text.',
      details: {command: result},
    })
  }
}

export type CommandOutputs = {command: CommandResult}
export const commandResult = outputsOf<CommandOutputs>()('command')

export const command: StepHandler<'command'> = {
  kind: 'command',
  summary: 'run one allowed command in the repository root; outcome success on exit 0, else failure',
  outcomes: () => ['success', 'failure'],
  failures: {
    failure: {
      code: 'E_BUILD_FAIL',
      hint: ({run_id, step}) =>
        `Read the command's output with pipe snapshot show ${run_id} --step ${step}, fix the cause and run again; or route the outcome with on: {failure: STEP} in the pipeline.`,
    },
  },
  changesSpec: false,
  commands: (step) => [{argv: step.run, at: ['run']}],
  // A command may change the world; the engine never repeats one on its own.
  safeToRetry: false,
  // Of lines, json and text, only the field its parse: names is there.
  outputsSchema: (step) =>
    narrowed(
      'command',
      {},
      PARSED.filter((field) => field !== step.parse),
    ),
  exportRole: {
    attempt: 'joins',
    files(snapshot) {
      const result = commandResult.of(snapshot)
      return result ? {logs: [{label: snapshot.step.name, result}]} : {}
    },
  },
  async run({step, policy, cwd, signal, slotsDir}) {
    // The process runner and its sandbox are run code: loaded on the step's first run, never to validate a pipeline.
    const {runCommand} = await import('../policy/exec.js')
    const result = await runCommand(policy, cwd, {
      argv: step.run,
      ...(step.cwd ? {cwd: step.cwd} : {}),
      ...(step.env ? {env: Object.fromEntries(Object.entries(step.env).filter((e): e is [string, string] => e[1] !== undefined))} : {}),
      ...(step.command_timeout_ms ? {timeoutMs: step.command_timeout_ms} : {}),
      signal,
      slotsDir,
    })
    if (result.spawn_error) {
      throw new PipeError('E_IO', `could not start ${step.run[0]}: ${result.spawn_error}`, {
        hint: 'Check that the program is installed and on PATH.',
        details: {command: result},
      })
    }
    if (result.timed_out) {
      throw new PipeError(
        'E_TOOL_TIMEOUT',
        `${JSON.stringify(step.run)} ran longer than ${step.command_timeout_ms ?? policy.policy.resource_limits.command_timeout_ms} ms; its process tree was killed`,
        {
          hint: 'Raise command_timeout_ms on the step or resource_limits.command_timeout_ms in the policy.',
          details: {command: result},
        },
      )
    }
    const ok = result.exit_code === 0
    return {
      type: 'done',
      outcome: ok ? 'success' : 'failure',
      // No duration in the reason: it is in outputs.duration_ms, and a reason reaches goldens and prompts.
      reason: `${step.run.join(' ')} exited ${result.exit_code ?? `by ${result.signal}`}`,
      inputs: {argv: step.run, cwd: result.cwd},
      // The flat fields are what expressions read; `command` keeps the full record (head/tail, caps).
      outputs: {
        exit_code: result.exit_code,
        stdout: result.stdout.head + result.stdout.tail,
        stderr: result.stderr.head + result.stderr.tail,
        duration_ms: result.duration_ms,
        command: result,
        ...parsed(step.parse, result, ok),
      } satisfies KindOutputs<'command'>,
    }
  },
}
