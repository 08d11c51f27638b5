import {runCommand, type CommandResult} from '../policy/exec.js'
import {outputsOf} from './outputs.js'
import type {StepHandler} from './types.js'
import {commandResult, list, nullable, obj, oneOf, str} from './output-schemas.js'

type Stage = 'static' | 'tests' | 'acceptance'
const ORDER: Stage[] = ['static', 'tests', 'acceptance']

export interface Verdict {
  status: 'pass' | 'fail'
  failed_stage: Stage | null
  error_category: 'lint_error' | 'import_error' | 'test_fail' | 'behavior_mismatch' | 'env_fail' | null
  top_errors: string[]
  /** Where the full output is: paths into this snapshot's outputs. */
  full_logs: string[]
}

function text(result: CommandResult): string {
  return [result.stdout.head, result.stdout.tail, result.stderr.head, result.stderr.tail].join('\n')
}

/** The lines a person should read first: error and failure lines, else the last lines. */
export function topErrors(output: string, max = 10): string[] {
  const lines = output.split('\n').map((l) => l.trim()).filter(Boolean)
  const flagged = lines.filter((l) => /\b(error|errors|fail|failed|failing|failure|assert\w*|exception|traceback|not ok)\b|✗|✖/i.test(l))
  const chosen = flagged.length > 0 ? flagged : lines.slice(-5)
  return [...new Set(chosen)].slice(0, max).map((l) => (l.length > 300 ? `${l.slice(0, 297)}...` : l))
}

export function categorize(stage: Stage, result: CommandResult): NonNullable<Verdict['error_category']> {
  if (result.spawn_error || result.timed_out) return 'env_fail'
  if (/Cannot find module|ERR_MODULE_NOT_FOUND|ModuleNotFoundError|ImportError|No module named|cannot import/i.test(text(result))) return 'import_error'
  return stage === 'static' ? 'lint_error' : stage === 'tests' ? 'test_fail' : 'behavior_mismatch'
}

export type QaOutputs = {verdict: Verdict; stages: Array<{stage: Stage; commands: CommandResult[]}>}

const field = outputsOf<QaOutputs>()
export const qaVerdict = field('verdict')
export const qaStages = field('stages')

export const qa: StepHandler<'qa'> = {
  kind: 'qa',
  summary: 'static checks, tests, acceptance commands in order; a verdict; outcome pass or fail',
  outcomes: () => ['pass', 'fail'],
  failures: {fail: {code: 'E_BUILD_FAIL', hint: ({run_id, step}) => `Read the verdict with pipe snapshot show ${run_id} --step ${step}, fix the code and run again; or route the outcome with on: {fail: STEP} in the pipeline.`}},
  changesSpec: false,
  commands: (step) => ORDER.flatMap((stage) => (step.stages[stage] ?? []).map((argv, i) => ({argv, at: ['stages', stage, i]}))),
  safeToRetry: false,
  outputsSchema: () => obj({verdict: obj({status: oneOf(['pass', 'fail']), failed_stage: nullable(oneOf(['static', 'tests', 'acceptance'])), error_category: nullable(str), top_errors: list(str), full_logs: list(str)}), stages: list(obj({stage: str, commands: list(commandResult)}))}),
  exportRole: {
    attempt: 'once',
    files(snapshot) {
      const verdict = qaVerdict.of(snapshot)
      return {
        logs: (qaStages.of(snapshot) ?? []).flatMap((stage) => stage.commands.map((result) => ({label: stage.stage, result}))),
        ...(verdict ? {verdict} : {}),
      }
    },
    timeline(snapshot) {
      const verdict = qaVerdict.of(snapshot)
      return verdict ? [`QA ${verdict.status}${verdict.failed_stage ? ` at ${verdict.failed_stage}` : ''}`] : []
    },
  },
  async run({step, policy, cwd, signal, slotsDir}) {
    const stages: Array<{stage: Stage; commands: CommandResult[]}> = []
    let verdict: Verdict = {status: 'pass', failed_stage: null, error_category: null, top_errors: [], full_logs: []}
    outer: for (const stage of ORDER) {
      const commands = step.stages[stage]
      if (!commands || commands.length === 0) continue
      const ran: CommandResult[] = []
      stages.push({stage, commands: ran})
      for (const argv of commands) {
        const result = await runCommand(policy, cwd, {argv, ...(step.command_timeout_ms ? {timeoutMs: step.command_timeout_ms} : {}), signal, slotsDir})
        ran.push(result)
        if (result.exit_code !== 0 || result.timed_out || result.spawn_error) {
          verdict = {
            status: 'fail',
            failed_stage: stage,
            error_category: categorize(stage, result),
            top_errors: result.spawn_error ? [result.spawn_error] : result.timed_out ? [`${argv.join(' ')} timed out`] : topErrors(text(result)),
            full_logs: [`outputs.stages[${stages.length - 1}].commands[${ran.length - 1}]`],
          }
          break outer
        }
      }
    }
    const count = stages.reduce((n, s) => n + s.commands.length, 0)
    return {
      type: 'done',
      outcome: verdict.status,
      reason: verdict.status === 'pass' ? `all ${count} QA command(s) passed` : `${verdict.failed_stage} failed (${verdict.error_category}): ${verdict.top_errors[0] ?? 'see the output'}`,
      inputs: {stages: step.stages, ...(step.task ? {task: step.task} : {})},
      outputs: {verdict, stages} satisfies QaOutputs,
    }
  },
}
