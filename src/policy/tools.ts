/**
 * Agent tools under the policy (seed 003): each tool's permission level, which levels pause for a
 * person, and the argument vectors a person has approved in advance.
 */
import {confirmPolicy} from './confirm.js'
import {DEFAULT_POLICY, type LoadedPolicy} from './policy.js'
import {checkCommand, type CommandPlace} from './rules.js'

export type ToolLevel = 'safe' | 'moderate' | 'dangerous'

export const DEFAULT_TOOL_LEVELS: Readonly<Record<string, ToolLevel | undefined>> = DEFAULT_POLICY.tools

const RANK: Readonly<Record<ToolLevel, number>> = {safe: 0, moderate: 1, dangerous: 2}

/**
 * A tool's level. `declared` is the level a pipeline gives a tool it declares: the policy, which
 * bounds every pipeline run under it, may only make it stricter, never looser.
 */
export function toolLevel(policy: LoadedPolicy, tool: string, declared?: ToolLevel): ToolLevel {
  const own = (policy.policy.tools as Record<string, ToolLevel | undefined> | undefined)?.[tool]
  if (declared !== undefined) return own !== undefined && RANK[own] > RANK[declared] ? own : declared
  // A tool the policy does not know is treated as the most dangerous.
  return own ?? DEFAULT_TOOL_LEVELS[tool] ?? 'dangerous'
}

export function needsConfirmation(policy: LoadedPolicy, level: ToolLevel): boolean {
  return confirmPolicy(policy).levels.includes(level)
}

/** The tools_preapproved entry that matches the argv whole (as allowed_commands matches), or null. */
export function preapproval(policy: LoadedPolicy, argv: readonly string[], place: CommandPlace): string | null {
  const entries = policy.policy.tools_preapproved ?? []
  if (entries.length === 0) return null
  const verdict = checkCommand({...policy, policy: {...policy.policy, allowed_commands: entries}}, argv, place)
  return verdict.allowed ? verdict.rule.replace(/^allowed_commands/, 'tools_preapproved') : null
}
