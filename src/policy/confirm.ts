/**
 * What pauses a run for a person (seed 000 AWAITING_CONFIRMATION, seed 003 MODERATE/DANGEROUS):
 * the policy's `confirm:` in either form, as one shape. The list form names agent tool levels; the
 * map form adds step kinds, command-line patterns and a deadline for the person.
 */
import type {ConfirmRules} from '../types/policy.js'
import {destructiveMatch} from './destructive.js'
import {DEFAULT_POLICY, type LoadedPolicy} from './policy.js'
import {checkCommand, preapproval, type CommandPlace} from './rules.js'

type Level = 'safe' | 'moderate' | 'dangerous'

export interface ConfirmPolicy {
  levels: readonly Level[]
  kinds: readonly string[]
  commands: readonly string[]
  /** Seconds a person has to answer; absent: no deadline. */
  timeout_s?: number
  /** What a passed deadline does; `wait` keeps the run paused, saying so. */
  on_timeout: 'wait' | 'deny' | 'cancel'
  /** Whether a step's destructive command (./destructive.ts) waits for a person although allowed. */
  destructive: 'ask' | 'allow'
}

const BUILT_IN_LEVELS = DEFAULT_POLICY.confirm as readonly Level[]

export function confirmPolicy(policy: LoadedPolicy): ConfirmPolicy {
  const given = policy.policy.confirm as Policyish
  if (given === undefined || isLevels(given)) return {levels: given ?? BUILT_IN_LEVELS, kinds: [], commands: [], on_timeout: 'wait', destructive: 'ask'}
  return {
    levels: given.levels ?? BUILT_IN_LEVELS,
    kinds: given.kinds ?? [],
    commands: given.commands ?? [],
    ...(given.timeout_s !== undefined ? {timeout_s: given.timeout_s} : {}),
    on_timeout: given.on_timeout ?? 'wait',
    destructive: given.destructive ?? 'ask',
  }
}
type Policyish = readonly Level[] | ConfirmRules | undefined
const isLevels = (given: readonly Level[] | ConfirmRules): given is readonly Level[] => Array.isArray(given)

/**
 * A command-line pattern as a test over an argument vector joined by single spaces: `*` any text,
 * `?` one character, the rest literal. A pattern ending in " *" also matches the command with no
 * further arguments ("git push *" covers a bare `git push`).
 */
export function commandPatternMatches(pattern: string, argv: readonly string[]): boolean {
  const line = argv.join(' ')
  const body = (p: string): string =>
    p
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '[\\s\\S]*')
      .replace(/\?/g, '[\\s\\S]')
  if (new RegExp(`^${body(pattern)}$`).test(line)) return true
  return pattern.endsWith(' *') && new RegExp(`^${body(pattern.slice(0, -2))}$`).test(line)
}

/**
 * Why a step must be confirmed before it acts, or null: its own `confirm: true`, the policy's
 * confirm.kinds naming its kind, a confirm.commands pattern matching a command it would run, or a
 * destructive command (./destructive.ts) that neither tools_preapproved nor confirm.destructive:
 * allow lifts. `place` is where its commands run (tools_preapproved's {path} entries are judged there).
 */
export function stepConfirmRule(
  policy: LoadedPolicy,
  step: {kind: string; confirm?: boolean},
  commands: ReadonlyArray<readonly string[]>,
  place?: CommandPlace,
): string | null {
  if (step.confirm === true) return 'the step says confirm: true'
  const rules = confirmPolicy(policy)
  const kind = rules.kinds.indexOf(step.kind)
  if (kind >= 0) return `the policy's confirm.kinds[${kind}] names the kind ${step.kind}`
  return commandConfirmRule(policy, commands) ?? destructiveRule(policy, commands, place)
}

/** The reason a destructive command waits for a person, with how to pre-approve it, or null. */
export function destructiveRule(policy: LoadedPolicy, commands: ReadonlyArray<readonly string[]>, place?: CommandPlace): string | null {
  if (confirmPolicy(policy).destructive === 'allow') return null
  const at = place ?? {root: process.cwd()}
  for (const argv of commands) {
    const match = destructiveMatch(argv)
    // A command the policy does not allow is denied where it would run: a person is never asked to
    // confirm what they could not make it do.
    if (!match || preapproval(policy, argv, at) !== null || !checkCommand(policy, argv, at).allowed) continue
    return (
      `the built-in destructive command "${match.pattern}" matches ${JSON.stringify(argv.join(' '))}; ` +
      `pre-approve it with tools_preapproved: [${JSON.stringify(argv)}] in policy.yaml, or confirm.destructive: allow`
    )
  }
  return null
}

/**
 * The policy's confirm.commands pattern that matches one of the argument vectors, said as the
 * reason a person is asked, or null. Agent tool calls meet it too: a pattern is about the command,
 * whichever step or tool would run it.
 */
export function commandConfirmRule(policy: LoadedPolicy, commands: ReadonlyArray<readonly string[]>): string | null {
  for (const [i, pattern] of confirmPolicy(policy).commands.entries()) {
    const argv = commands.find((a) => commandPatternMatches(pattern, a))
    if (argv) return `the policy's confirm.commands[${i}] ${JSON.stringify(pattern)} matches ${JSON.stringify(argv.join(' '))}`
  }
  return null
}

/**
 * When a confirmation asked for at `since` runs out under the policy, and what then happens when
 * the policy says more than "keep waiting"; undefined without timeout_s.
 */
export function confirmDeadline(policy: LoadedPolicy, since: Date): {deadline: string; on_timeout?: 'deny' | 'cancel'} | undefined {
  const rules = confirmPolicy(policy)
  if (rules.timeout_s === undefined) return undefined
  const deadline = new Date(since.getTime() + Math.round(rules.timeout_s * 1000)).toISOString()
  return rules.on_timeout === 'wait' ? {deadline} : {deadline, on_timeout: rules.on_timeout}
}
