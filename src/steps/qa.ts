import {existsSync, realpathSync, statSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {PipeError} from '../errors.js'
import type {CommandResult} from '../policy/exec.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler} from './types.js'
import type {Snapshot} from '../types/snapshot.js'
import {maskTimes, maskTimings, relativeToRoot} from '../util/stable-text.js'

type Stage = 'static' | 'tests' | 'acceptance'
type Stages = Partial<Record<Stage, string[][]>>
const ORDER: Stage[] = ['static', 'tests', 'acceptance']

export interface Verdict {
  status: 'pass' | 'fail'
  failed_stage: Stage | null
  error_category: 'lint_error' | 'import_error' | 'test_fail' | 'behavior_mismatch' | 'env_fail' | 'patch_apply_fail' | null
  top_errors: string[]
  /**
   * The 20-50 lines of the failed command's output most worth reading (error lines with a little
   * context, else its last lines): what a fixing agent is shown (seed 004 §7.3).
   */
  log_lines: string[]
  /** Files of the repository the output names (stack frames, file:line), in order of first mention: where to look next. */
  files_to_read: string[]
  /** The failed command. */
  command: string[] | null
  /** Where the full output is: paths into this snapshot's outputs (written artifacts name their log files instead). */
  full_logs: string[]
}

function text(result: CommandResult): string {
  return [result.stdout.head, result.stdout.tail, result.stderr.head, result.stderr.tail].join('\n')
}

/** The lines a person should read first: error and failure lines, else the last lines. */
export function topErrors(output: string, max = 10): string[] {
  const lines = output
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
  const flagged = lines.filter((l) => /\b(error|errors|fail|failed|failing|failure|assert\w*|exception|traceback|not ok)\b|✗|✖/i.test(l))
  const chosen = flagged.length > 0 ? flagged : lines.slice(-5)
  return [...new Set(chosen)].slice(0, max).map((l) => (l.length > 300 ? `${l.slice(0, 297)}...` : l))
}

const FLAGGED = /\b(error|errors|fail|failed|failing|failure|assert\w*|exception|traceback|not ok|expected|actual|cannot|undefined)\b|✗|✖|^\s*at .*:\d+/i

/**
 * The output as a fixer should read it, the same on every machine: the workspace's path is dropped
 * (so `file:///tmp/x/a.test.js:3:7` reads `a.test.js:3:7`), timings are masked, and stack frames
 * inside Node itself are left out. A verdict that does not depend on where or how fast QA ran
 * keeps a recorded agent conversation replayable, and its lines are the ones about the code.
 */
export function stableOutput(output: string, root: string): string {
  const text = relativeToRoot(output, root)
    .split('\n')
    .filter((line) => !/\(node:[\w/]+:\d+:\d+\)\s*$|^\s*(at\s+)?node:[\w/]+:\d+:\d+\s*$|^\s*(at\s+)?(async\s+)?[\w.<>\s]*\(node:[\w/]+:\d+:\d+\)/.test(line))
    .join('\n')
  return maskTimes(maskTimings(text))
}

/**
 * The lines most worth reading: each flagged line with two lines before and three after, in
 * order, at most `max`; when that gives fewer than `min`, the last lines fill it up.
 */
export function relevantLines(output: string, min = 20, max = 50): string[] {
  const lines = output
    .split('\n')
    .map((l) => l.trimEnd())
    .filter((l) => l.trim() !== '')
  const keep = new Set<number>()
  for (let i = 0; i < lines.length && keep.size < max; i++) {
    if (!FLAGGED.test(lines[i]!)) continue
    for (let j = Math.max(0, i - 2); j <= Math.min(lines.length - 1, i + 3) && keep.size < max; j++) keep.add(j)
  }
  for (let j = lines.length - 1; j >= 0 && keep.size < Math.min(min, lines.length); j--) keep.add(j)
  return [...keep]
    .sort((a, b) => a - b)
    .map((i) => lines[i]!)
    .map((l) => (l.length > 300 ? `${l.slice(0, 297)}...` : l))
}

const PATHISH = /(file:\/\/\/?[^\s:'"()]+|(?:\.{0,2}\/)?[\w@.+-]+(?:\/[\w@.+-]+)*\.[A-Za-z][A-Za-z0-9]{0,5})(?::\d+)?/g

/** Files inside `root` that the output names, by their path relative to it, in order of first mention (at most `max`). */
export function filesNamed(output: string, root: string, max = 5): string[] {
  let base: string
  try {
    base = realpathSync(root)
  } catch {
    return []
  }
  const out: string[] = []
  for (const match of output.matchAll(PATHISH)) {
    let name = match[1]!
    if (name.startsWith('file://')) {
      try {
        name = fileURLToPath(name)
      } catch {
        continue
      }
    }
    const absolute = path.resolve(base, name)
    const relative = path.relative(base, absolute)
    if (
      relative === '' ||
      relative.startsWith('..') ||
      path.isAbsolute(relative) ||
      relative.split(path.sep).some((part) => part === 'node_modules' || part === '.git')
    )
      continue
    const posix = relative.split(path.sep).join('/')
    if (out.includes(posix)) continue
    try {
      if (!existsSync(absolute) || !statSync(absolute).isFile()) continue
    } catch {
      continue
    }
    out.push(posix)
    if (out.length >= max) break
  }
  return out
}

export function categorize(stage: Stage, result: CommandResult): NonNullable<Verdict['error_category']> {
  if (result.spawn_error || result.timed_out) return 'env_fail'
  if (/Cannot find module|ERR_MODULE_NOT_FOUND|ModuleNotFoundError|ImportError|No module named|cannot import/i.test(text(result))) return 'import_error'
  return stage === 'static' ? 'lint_error' : stage === 'tests' ? 'test_fail' : 'behavior_mismatch'
}

/**
 * The verdict of an attempt's step that ended in an error instead (seed 004: every QA round, and a
 * failed edit, leaves one): `env_fail` for QA that could not run (a denied command, a missing tool),
 * `patch_apply_fail` for an edit that did not apply. The error is its one top error.
 */
export function errorVerdict(snapshot: Snapshot, category: 'env_fail' | 'patch_apply_fail'): Verdict | undefined {
  const error = snapshot.errors.at(-1)
  if (!error) return undefined
  return {
    status: 'fail',
    failed_stage: null,
    error_category: category,
    top_errors: [`${error.code} ${error.message}`],
    log_lines: [],
    files_to_read: [],
    command: null,
    full_logs: [],
  }
}

/** The QA snapshot's verdict: the one it gave, or the one of its error. */
function verdictOf(snapshot: Snapshot): Verdict | undefined {
  return qaVerdict.of(snapshot) ?? errorVerdict(snapshot, 'env_fail')
}

export type QaOutputs = {verdict: Verdict; stages: Array<{stage: Stage; commands: CommandResult[]}>}

const field = outputsOf<QaOutputs>()
export const qaVerdict = field('verdict')
export const qaStages = field('stages')

export const qa: StepHandler<'qa'> = {
  kind: 'qa',
  summary: 'static checks, tests, acceptance commands in order; a verdict; outcome pass or fail',
  outcomes: () => ['pass', 'fail'],
  failures: {
    fail: {
      code: 'E_BUILD_FAIL',
      hint: ({run_id, step}) =>
        `Read the verdict with pipe snapshot show ${run_id} --step ${step}, fix the code and run again; or route the outcome with on: {fail: STEP} in the pipeline.`,
    },
  },
  changesSpec: false,
  // Stages an expression gives are known only when the step runs; the policy checks them then.
  commands: (step) =>
    typeof step.stages === 'string'
      ? []
      : ORDER.flatMap((stage) => ((step.stages as Stages)[stage] ?? []).map((argv, i) => ({argv, at: ['stages', stage, i]}))),
  safeToRetry: false,
  exportRole: {
    attempt: 'once',
    files(snapshot) {
      const verdict = verdictOf(snapshot)
      return {
        logs: (qaStages.of(snapshot) ?? []).flatMap((stage) => stage.commands.map((result) => ({label: stage.stage, result}))),
        ...(verdict ? {verdict} : {}),
      }
    },
    timeline(snapshot) {
      const verdict = verdictOf(snapshot)
      if (!verdict) return []
      // Seed 004's timeline: the QA result and its stage, and what failed (the first error line), in one entry.
      const failed =
        verdict.status === 'fail'
          ? `${verdict.error_category ? ` (${verdict.error_category})` : ''}${verdict.top_errors[0] ? `: ${verdict.top_errors[0].trim().slice(0, 200)}` : ''}`
          : ''
      return [`QA ${verdict.status}${verdict.failed_stage ? ` at ${verdict.failed_stage}` : ''}${failed}`]
    },
    metrics(snapshot) {
      const verdict = verdictOf(snapshot)
      return verdict ? {qa: {status: verdict.status, category: verdict.error_category, duration_ms: snapshot.step.duration_ms ?? 0}} : {}
    },
  },
  async run({step, policy, cwd, signal, slotsDir}) {
    const stages: Array<{stage: Stage; commands: CommandResult[]}> = []
    let verdict: Verdict = {
      status: 'pass',
      failed_stage: null,
      error_category: null,
      top_errors: [],
      log_lines: [],
      files_to_read: [],
      command: null,
      full_logs: [],
    }
    if (typeof step.stages === 'string')
      throw new PipeError('E_CONFIG', `step ${step.id}: stages ${step.stages} was not resolved to a mapping of stages`, {
        hint: 'Give stages as {static: [...], tests: [...], acceptance: [...]}, or one ${{ }} expression that gives such a mapping.',
      })
    const given = step.stages
    outer: for (const stage of ORDER) {
      const commands = given[stage]
      if (!commands || commands.length === 0) continue
      const ran: CommandResult[] = []
      stages.push({stage, commands: ran})
      for (const argv of commands) {
        const {runCommand} = await import('../policy/exec.js')
        const result = await runCommand(policy, cwd, {argv, ...(step.command_timeout_ms ? {timeoutMs: step.command_timeout_ms} : {}), signal, slotsDir})
        ran.push(result)
        if (result.exit_code !== 0 || result.timed_out || result.spawn_error) {
          const output = stableOutput(text(result), cwd)
          verdict = {
            status: 'fail',
            failed_stage: stage,
            error_category: categorize(stage, result),
            top_errors: result.spawn_error ? [stableOutput(result.spawn_error, cwd)] : result.timed_out ? [`${argv.join(' ')} timed out`] : topErrors(output),
            log_lines: relevantLines(output),
            // From the output with the root dropped: a path with a space in the checkout's folder is still one path.
            files_to_read: filesNamed(output, cwd),
            command: [...argv],
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
      reason:
        verdict.status === 'pass'
          ? `all ${count} QA command(s) passed`
          : `${verdict.failed_stage} failed (${verdict.error_category}): ${verdict.top_errors[0] ?? 'see the output'}`,
      inputs: {stages: step.stages, ...(step.task ? {task: step.task} : {})},
      outputs: {verdict, stages} satisfies QaOutputs & KindOutputs<'qa'>,
    }
  },
}
