/**
 * Who may decide at a gate (issue 40): the policy's approvals rules, the people they name, and the
 * one check every vote passes — pipe review, confirm and answer, and whatever else asks a person
 * (a budget grant, the view's buttons) through the app layer.
 */
import type {ApprovalRule, Policy} from '../types/policy.js'
import type {RunRecord} from '../types/run.js'
import type {LoadedPolicy} from './policy.js'

/** A person as pipe records them: a stable id and where they acted from. */
export interface Person {
  id: string
  user: string
  host: string
  /** The trusted key's name they decided as (--as NAME), only when their signing key is that key. */
  name?: string
}

/** A gate a person decides at: a review, a confirmation, answers, or more money for a budget the run paused at (pipe budget). */
export type GateKind = 'review' | 'confirm' | 'answers' | 'budget'

/** A rule as it applies: its key in policy.yaml (named in every refusal) and its values with their defaults. */
export interface AppliedRule {
  name: string
  required: number
  /** Every person id `from` resolves to, groups expanded. */
  people: string[]
  self_approval: boolean
  timeout_s?: number
  on_timeout: 'wait' | 'deny' | 'cancel'
  remind_after_s?: number
  /** The policy's target (under targets:) the reminder goes through. */
  remind_target?: string
}

/**
 * The rule of a gate: the step's own (keyed by its id) before its kind's; null when the policy has
 * none. A budget grant is under the `budget` rule only: a step's own rule is about what the step
 * waits for (its review, its confirmation), not about the money it spends.
 */
export function approvalRule(policy: LoadedPolicy | Policy, gate: {step: string; kind: GateKind}): AppliedRule | null {
  const values = 'policy' in policy ? policy.policy : policy
  const rules = values.approvals ?? {}
  const name = gate.kind !== 'budget' && rules[gate.step] !== undefined ? gate.step : rules[gate.kind] !== undefined ? gate.kind : null
  if (name === null) return null
  const rule = rules[name]!
  return {
    name,
    required: rule.required ?? 1,
    people: resolveFrom(rule, values.people ?? {}),
    self_approval: rule.self_approval ?? true,
    ...(rule.timeout_s !== undefined ? {timeout_s: rule.timeout_s} : {}),
    on_timeout: rule.on_timeout ?? 'wait',
    ...(rule.remind_after_s !== undefined ? {remind_after_s: rule.remind_after_s} : {}),
    ...(rule.remind_target !== undefined ? {remind_target: rule.remind_target} : {}),
  }
}

/** The distinct person ids a rule's from names (an unknown group names nobody: validation refuses it first). */
export function resolveFrom(rule: ApprovalRule, people: Record<string, string[] | undefined>): string[] {
  const ids = rule.from.flatMap((entry) => (entry.startsWith('@') ? (people[entry.slice(1)] ?? []) : [entry]))
  return [...new Set(ids)]
}

/** What is wrong with a policy's approvals and people, each with the path it is at and the bad value quoted. */
export function approvalProblems(policy: Pick<Policy, 'approvals' | 'people' | 'targets'>): Array<{path: Array<string | number>; message: string}> {
  const problems: Array<{path: Array<string | number>; message: string}> = []
  const people = policy.people ?? {}
  for (const [name, rule] of Object.entries(policy.approvals ?? {})) {
    if (!rule) continue
    const at = (...rest: Array<string | number>) => ['approvals', name, ...rest]
    rule.from.forEach((entry, i) => {
      if (entry.startsWith('@') && people[entry.slice(1)] === undefined) {
        const known = Object.keys(people)
        problems.push({
          path: at('from', i),
          message: `"${entry}" names no group under people: (${known.length > 0 ? `its groups are ${known.map((g) => `@${g}`).join(', ')}` : 'the policy defines none'})`,
        })
      }
    })
    if (rule.from.length === 0) problems.push({path: at('from'), message: 'from names nobody, so no one could ever decide at this gate'})
    const required = rule.required ?? 1
    const count = resolveFrom(rule, people).length
    if (required < 1) problems.push({path: at('required'), message: `required: ${required} must be at least 1`})
    else if (required > count && rule.from.length > 0)
      problems.push({
        path: at('required'),
        message: `required: ${required} is more than the ${count} distinct ${count === 1 ? 'person' : 'people'} from names, so the gate could never open`,
      })
    for (const key of ['timeout_s', 'remind_after_s'] as const) {
      const value = rule[key]
      if (value !== undefined && !(value > 0)) problems.push({path: at(key), message: `${key}: ${value} must be more than 0 seconds`})
    }
    // A reminder needs both when and where: one without the other would be a rule that silently sends nothing.
    const targets = Object.keys(policy.targets ?? {})
    if (rule.remind_after_s !== undefined && rule.remind_target === undefined)
      problems.push({
        path: at('remind_after_s'),
        message: `remind_after_s: ${rule.remind_after_s} needs remind_target, the webhook under targets: the reminder goes through`,
      })
    if (rule.remind_target !== undefined && rule.remind_after_s === undefined)
      problems.push({path: at('remind_target'), message: `remind_target: "${rule.remind_target}" needs remind_after_s, the seconds after which to remind`})
    if (rule.remind_target !== undefined && !targets.includes(rule.remind_target))
      problems.push({
        path: at('remind_target'),
        message: `"${rule.remind_target}" names no target under targets: (${targets.length > 0 ? `its targets are ${targets.join(', ')}` : 'the policy defines none'})`,
      })
    if (rule.remind_after_s !== undefined && rule.timeout_s !== undefined && rule.remind_after_s >= rule.timeout_s)
      problems.push({
        path: at('remind_after_s'),
        message: `remind_after_s: ${rule.remind_after_s} is not before timeout_s: ${rule.timeout_s}, so the reminder would come after the deadline`,
      })
  }
  return problems
}

/** When a gate paused at `since` runs out under its rule, and what then happens unless it is `wait`; undefined without timeout_s. */
export function gateDeadline(rule: AppliedRule, since: Date): {deadline: string; on_timeout?: 'deny' | 'cancel'} | undefined {
  if (rule.timeout_s === undefined) return undefined
  const deadline = new Date(since.getTime() + Math.round(rule.timeout_s * 1000)).toISOString()
  return rule.on_timeout === 'wait' ? {deadline} : {deadline, on_timeout: rule.on_timeout}
}

/** A vote already at the gate. */
export interface CastVote {
  by: Person
  decision: string
}

/**
 * Whether `person` may vote `approve` (or refuse) at the gate of `run` under `rule`: null when they
 * may, else why not, naming the rule. The one check: pipe review, confirm and answer call it, and so
 * may a budget grant or the view.
 */
export function checkApproval(
  rule: AppliedRule,
  person: Person,
  run: Pick<RunRecord, 'run_id' | 'started_by'> & {pending?: {votes?: CastVote[]} | undefined},
  approve: boolean,
): string | null {
  const where = `the policy's approvals.${rule.name}`
  if (!rule.people.includes(person.id))
    return `${person.id} is not among the people ${where} names (from: ${rule.people.join(', ')}), so may not decide at this gate`
  if ((run.pending?.votes ?? []).some((v) => v.by.id === person.id))
    return `${person.id} has already voted at this gate of run ${run.run_id}; ${where} counts each person once`
  if (approve && !rule.self_approval && run.started_by?.id === person.id)
    return `${person.id} started run ${run.run_id}, and ${where} says self_approval: false: another person must approve it`
  return null
}

/** The people who may still approve at a gate: those the rule names who have not voted, less the starter under self_approval: false. */
export function stillToVote(rule: AppliedRule, votes: readonly CastVote[], startedBy?: string): string[] {
  return rule.people.filter((id) => !votes.some((v) => v.by.id === id) && (rule.self_approval || id !== startedBy))
}
