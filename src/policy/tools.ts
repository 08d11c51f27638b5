/**
 * Agent tools under the policy (seed 003): each tool's permission level, which levels pause for a
 * person, and the argument vectors a person has approved in advance.
 */
import {confirmPolicy} from './confirm.js'
import {DEFAULT_POLICY, type LoadedPolicy} from './policy.js'

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

// Steps' destructive commands meet tools_preapproved too (./confirm.ts), so it lives beside checkCommand.
export {preapproval} from './rules.js'
