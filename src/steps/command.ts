import {PipeError} from '../errors.js'
import {runCommand, type CommandResult} from '../policy/exec.js'
import {outputsOf} from './outputs.js'
import type {StepHandler} from './types.js'

export type CommandOutputs = {command: CommandResult}
export const commandResult = outputsOf<CommandOutputs>()('command')

export const command: StepHandler<'command'> = {
  kind: 'command',
  summary: 'run one allowed command in the repository root; outcome success on exit 0, else failure',
  outcomes: () => ['success', 'failure'],
  failures: {failure: {code: 'E_BUILD_FAIL', hint: ({run_id, step}) => `Read the command's output with pipe snapshot show ${run_id} --step ${step}, fix the cause and run again; or route the outcome with on: {failure: STEP} in the pipeline.`}},
  changesSpec: false,
  commands: (step) => [{argv: step.run, at: ['run']}],
  // A command may change the world; the engine never repeats one on its own.
  safeToRetry: false,
  exportRole: {
    attempt: 'joins',
    files(snapshot) {
      const result = commandResult.of(snapshot)
      return result ? {logs: [{label: snapshot.step.name, result}]} : {}
    },
  },
  async run({step, policy, cwd, signal, slotsDir}) {
    const result = await runCommand(policy, cwd, {
      argv: step.run,
      ...(step.cwd ? {cwd: step.cwd} : {}),
      ...(step.env ? {env: Object.fromEntries(Object.entries(step.env).filter((e): e is [string, string] => e[1] !== undefined))} : {}),
      ...(step.command_timeout_ms ? {timeoutMs: step.command_timeout_ms} : {}),
      signal,
      slotsDir,
    })
    if (result.spawn_error) {
      throw new PipeError('E_IO', `could not start ${step.run[0]}: ${result.spawn_error}`, {hint: 'Check that the program is installed and on PATH.', details: {command: result}})
    }
    if (result.timed_out) {
      throw new PipeError('E_TOOL_TIMEOUT', `${JSON.stringify(step.run)} ran longer than ${step.command_timeout_ms ?? policy.policy.resource_limits.command_timeout_ms} ms; its process tree was killed`, {
        hint: 'Raise command_timeout_ms on the step or resource_limits.command_timeout_ms in the policy.',
        details: {command: result},
      })
    }
    const ok = result.exit_code === 0
    return {
      type: 'done',
      outcome: ok ? 'success' : 'failure',
      reason: `${step.run.join(' ')} exited ${result.exit_code ?? `by ${result.signal}`} in ${result.duration_ms} ms`,
      inputs: {argv: step.run, cwd: result.cwd},
      outputs: {command: result} satisfies CommandOutputs,
    }
  },
}
