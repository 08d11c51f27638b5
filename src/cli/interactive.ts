/**
 * Asking a person at the terminal: clarifying questions one at a time, and the review decision.
 * Prompts go to stderr so that stdout keeps to the result. PIPE_INTERACTIVE=1 forces prompting
 * when stdin is not a terminal (for expect-style scripts); PIPE_INTERACTIVE=0 turns it off.
 */
import {createRequire} from 'node:module'
import type {Interface} from 'node:readline'
import type {GateResult} from '../gates/evaluate.js'
import type {RunOutcome} from '../engine/engine.js'
import {answerSession} from '../app/sessions/answer.js'
import {confirmSession} from '../app/sessions/confirm.js'
import {confirmDeadlinePassed} from '../app/sessions/confirm-deadline.js'
import {reviewSession, reviewSummary} from '../app/sessions/review.js'
import type {Decision, SessionOptions} from '../app/sessions/shared.js'
import type {CanonicalSpec} from '../types/spec.js'
import type {InputDeclaration} from '../expr/index.js'
import {line as t, visible} from '../util/terminal-text.js'
import {decisionWord} from './decision.js'
import {stderrIsTerminal, stdinIsTerminal} from './std-streams.js'

export function canPrompt(json: boolean): boolean {
  if (process.env.PIPE_INTERACTIVE === '0') return false
  if (process.env.PIPE_INTERACTIVE === '1') return true
  return !json && stderrIsTerminal() && stdinIsTerminal()
}

/** Reads lines from stdin on demand; null at end of input. */
class LineReader {
  private readonly lines: string[] = []
  private readonly waiters: Array<(line: string | null) => void> = []
  private closed = false
  private readonly rl: Interface

  constructor() {
    // readline only when a person is asked: a run that asks nobody never loads it.
    const {createInterface} = createRequire(import.meta.url)('node:readline') as typeof import('node:readline')
    this.rl = createInterface({input: process.stdin, terminal: false})
    this.rl.on('line', (line) => {
      const waiter = this.waiters.shift()
      if (waiter) waiter(line)
      else this.lines.push(line)
    })
    this.rl.on('close', () => {
      this.closed = true
      for (const waiter of this.waiters.splice(0)) waiter(null)
    })
  }

  /** The next line; null when input ends or `signal` aborts (Ctrl-C at a prompt). */
  next(signal?: AbortSignal): Promise<string | null> {
    const line = this.lines.shift()
    if (line !== undefined) return Promise.resolve(line)
    if (this.closed || signal?.aborted) return Promise.resolve(null)
    return new Promise((resolve) => {
      const waiter = (value: string | null): void => {
        signal?.removeEventListener('abort', onAbort)
        resolve(value)
      }
      const onAbort = (): void => {
        const at = this.waiters.indexOf(waiter)
        if (at !== -1) this.waiters.splice(at, 1)
        resolve(null)
      }
      signal?.addEventListener('abort', onAbort, {once: true})
      this.waiters.push(waiter)
    })
  }

  close(): void {
    this.rl.close()
  }
}

// Prompts quote questions, spec fields and tool arguments: each value is escaped where it is put in (t``), and all once more here.
const say = (text: string): boolean => process.stderr.write(visible(text))

// One reader for the whole process, so lines typed (or piped) ahead are never lost between prompts.
let shared: LineReader | undefined
function reader(): LineReader {
  shared ??= new LineReader()
  return shared
}
function closeReader(): void {
  shared?.close()
  shared = undefined
}

/** Required pipeline inputs nobody gave, one prompt each; null when input ends first. */
export async function askInputs(
  missing: Array<{name: string; declaration: InputDeclaration}>,
  input: LineReader = reader(),
  signal?: AbortSignal,
): Promise<Record<string, string> | null> {
  const out: Record<string, string> = {}
  say(`The pipeline needs ${missing.length} input(s) that were not given (next time: -i NAME=VALUE).\n`)
  for (const {name, declaration} of missing) {
    const choices = declaration.enum ? ` one of ${declaration.enum.map((v) => JSON.stringify(v)).join(', ')}` : ''
    say(t`${name} (${declaration.type}${choices}${declaration.description ? `: ${declaration.description}` : ''})> `)
    const line = await input.next(signal)
    if (line === null) {
      say('\n')
      return Object.keys(out).length > 0 ? out : null
    }
    out[name] = line.trim()
  }
  return out
}

/** One question at a time; an answer may span lines and ends with an empty line. Null when input ends first. */
export async function askAnswers(
  questions: Array<{id: string; field?: string; question: string}>,
  input: LineReader = reader(),
  signal?: AbortSignal,
): Promise<Record<string, string> | null> {
  const answers: Record<string, string> = {}
  say(`\n${questions.length} question(s). Answer each in one or more lines and end it with an empty line ("TBD" leaves it open).\n`)
  try {
    for (const [i, q] of questions.entries()) {
      say(t`\n[${i + 1}/${questions.length}] ${q.id}${q.field ? ` (${q.field})` : ''}\n${q.question}\n> `)
      const lines: string[] = []
      for (;;) {
        const line = await input.next(signal)
        if (signal?.aborted) {
          say('\n(interrupted; the run stays paused)\n')
          return null
        }
        if (line === null) {
          if (lines.length > 0) break
          say('\n(input ended; the run stays paused)\n')
          return null
        }
        if (line.trim() === '') {
          if (lines.length > 0) break
          say('> ')
          continue
        }
        lines.push(line)
        say('> ')
      }
      answers[q.id] = lines.join('\n')
    }
    return answers
  } catch (error) {
    closeReader()
    throw error
  }
}

export function reviewText(spec: CanonicalSpec | null, gate: GateResult | null, reason: string): string {
  const lines = [t`\nReview: ${reason}`]
  if (spec) {
    lines.push(t`  ${spec.meta.spec_version} (${spec.meta.status}) ${spec.meta.title ?? ''}`)
    lines.push(t`  goal: ${spec.goal}`)
    lines.push(
      `  ${spec.features.length} feature(s) (${spec.features.filter((f) => f.priority === 'P0').length} P0), ${spec.acceptance_criteria.length} acceptance criteria, ${spec.non_functional.length} non-functional, ${spec.constraints.length} constraint(s), ${spec.tasks.length} task(s), ${spec.vv.length} V&V item(s)`,
    )
  }
  if (gate) {
    const gates = Object.entries(gate)
      .filter(([, v]) => v && typeof v === 'object' && !Array.isArray(v))
      .map(([name, v]) => `${name} ${(v as {pass: boolean}).pass ? 'pass' : 'FAIL'}`)
    lines.push(t`  gates: ${gates.join(', ')}${gate.completeness_score !== undefined ? `, completeness ${gate.completeness_score}` : ''}`)
  }
  return `${lines.join('\n')}\n`
}

export async function askDecision(input: LineReader = reader(), signal?: AbortSignal): Promise<{decision: Decision; note?: string} | null> {
  return askWithNote<Decision>('Decision [go/hold/drop]: ', decisionWord, 'go (yes, ok), hold or drop (no)', input, signal)
}

/**
 * One choice, asked again until it is one of the answers, then an optional one-line note; null
 * when input ends or the person interrupts (the run stays paused either way).
 */
async function askWithNote<T extends string>(
  prompt: string,
  parse: (answer: string) => T | null,
  expected: string,
  input: LineReader,
  signal?: AbortSignal,
): Promise<{decision: T; note?: string} | null> {
  try {
    for (;;) {
      say(prompt)
      const line = await input.next(signal)
      if (signal?.aborted || line === null) {
        say(`\n(${signal?.reason instanceof DeadlinePassed ? signal.reason.message : signal?.aborted ? 'interrupted' : 'input ended'}; the run stays paused)\n`)
        return null
      }
      const decision = parse(line.trim().toLowerCase())
      if (!decision) {
        say(t`"${line.trim()}" is not ${expected}.\n`)
        continue
      }
      say('Note (optional, one line): ')
      const note = (await input.next(signal))?.trim()
      if (signal?.aborted) {
        say('\n(interrupted; the run stays paused)\n')
        return null
      }
      return {decision, ...(note ? {note} : {})}
    }
  } catch (error) {
    closeReader()
    throw error
  }
}

/** The tool call (or the step) a run waits at, as a person decides on it. */
export function actionText(pending: NonNullable<RunOutcome['pending']>): string {
  const action = pending.action
  const lines = ['', t`${pending.reason}`]
  if (action) {
    if (action.rule !== undefined)
      lines.push(t`  step: ${pending.step} (${action.tool}, run ${action.call_id})`, t`  config: ${JSON.stringify(action.arguments)}`)
    else lines.push(t`  tool: ${action.tool} (${action.level}, call ${action.call_id})`, t`  arguments: ${JSON.stringify(action.arguments)}`)
    for (const argv of action.argv ?? []) lines.push(t`  argv: ${JSON.stringify(argv)}`)
  }
  if (pending.deadline) lines.push(t`  answer by ${pending.deadline}`)
  return `${lines.join('\n')}\n`
}

/** Why a prompt stopped asking: the confirmation's deadline passed (the run stays paused). */
class DeadlinePassed extends Error {}

/** A signal that aborts at `deadline` (an ISO time), and how to let it go. */
function deadlineSignal(deadline: string): {signal: AbortSignal; clear: () => void} {
  const controller = new AbortController()
  const ms = Math.max(0, Date.parse(deadline) - Date.now())
  const timer = setTimeout(() => controller.abort(new DeadlinePassed(`confirmation deadline passed at ${deadline}`)), ms)
  return {signal: controller.signal, clear: () => clearTimeout(timer)}
}

/** yes or no to a tool call, and an optional note (given to the model with a refusal); null when input ends. */
export async function askConfirm(input: LineReader = reader(), signal?: AbortSignal): Promise<{decision: 'yes' | 'no'; note?: string} | null> {
  return askWithNote<'yes' | 'no'>(
    'Run it? [yes/no]: ',
    (answer) => (answer === 'y' || answer === 'yes' ? 'yes' : answer === 'n' || answer === 'no' ? 'no' : null),
    'yes or no',
    input,
    signal,
  )
}

/**
 * Keeps a paused run going by asking at the terminal, until it ends, is put on hold, or input ends.
 * `options.signal` (Ctrl-C) stops a prompt with the run left paused, and interrupts a session it drives.
 */
export async function continueAtTerminal(outcome: RunOutcome, options: SessionOptions): Promise<RunOutcome> {
  try {
    return await keepAsking(outcome, options)
  } finally {
    closeReader()
  }
}

async function keepAsking(outcome: RunOutcome, options: SessionOptions): Promise<RunOutcome> {
  let current = outcome
  let answered: RunOutcome['pending'] | undefined
  const {signal} = options
  while (current.status === 'awaiting_input' && current.pending && !current.queued && !signal?.aborted) {
    // More money is not a question for a prompt: the run stays paused, and its output names pipe budget.
    if (current.pending.kind === 'budget') return current
    // The same gate still waiting after this person's vote: its approvals rule wants other people, not this prompt again.
    if (answered && current.pending.since === answered.since && current.pending.step === answered.step) return current
    answered = current.pending
    if (current.pending.kind === 'confirm') {
      say(actionText(current.pending))
      // The person has until the policy's deadline; then the prompt stops, and the run stays paused and says so.
      const deadline = current.pending.deadline ? deadlineSignal(current.pending.deadline) : undefined
      const asking = deadline ? (signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal) : signal
      const choice = await askConfirm(reader(), asking).finally(() => deadline?.clear())
      if (!choice) return deadline?.signal.aborted && !signal?.aborted ? confirmDeadlinePassed({...options, runId: current.run_id}) : current
      current = await confirmSession({...options, runId: current.run_id, decision: choice.decision, ...(choice.note ? {note: choice.note} : {})})
      continue
    }
    if (current.pending.kind === 'answers') {
      const answers = await askAnswers(current.pending.questions ?? [], reader(), signal)
      if (!answers) return current
      current = await answerSession({...options, runId: current.run_id, answers})
    } else {
      const summary = await reviewSummary({...options, runId: current.run_id})
      say(reviewText(summary.spec, summary.gate, summary.reason))
      const choice = await askDecision(reader(), signal)
      if (!choice) return current
      current = await reviewSession({...options, runId: current.run_id, decision: choice.decision, ...(choice.note ? {note: choice.note} : {})})
      if (choice.decision === 'hold') return current
    }
  }
  return current
}
