/**
 * The action a confirm pause shows a person for a tool call, sealed with the hash their answer is
 * bound to (confirm-action.ts), and the one a resume of a saved state would run first.
 */
import {toolLevel, type ToolLevel} from '../../policy/tools.js'
import type {LoadedPolicy} from '../../policy/policy.js'
import type {ToolCall} from '../../providers/chat.js'
import {redactDeep} from '../../util/redact.js'
import {sealedAction, type ConfirmAction} from '../confirm-action.js'
import {safeParse} from './protocol.js'
import type {AgentState} from './state.js'
import {commandSegments} from './tools.js'

/** The argument vectors a run_command call would run (what the person is shown and preapprovals are matched against), or undefined. */
export function argvOf(tool: string, args: Record<string, unknown>, policy: LoadedPolicy, root: string): string[][] | undefined {
  if (tool !== 'run_command') return undefined
  const planned = commandSegments(args, {policy, root})
  return planned.ok ? planned.segments.map((s) => s.argv) : undefined
}

/** The action a confirm pause shows for a call, with the hash a confirmation binds (see confirm-action.ts). */
export function shownAction(call: ToolCall, args: Record<string, unknown>, level: ToolLevel, argv: string[][] | undefined, cwd: string): ConfirmAction {
  return sealedAction({call_id: call.id, tool: call.function.name, level, arguments: redactDeep(args), ...(argv ? {argv: redactDeep(argv)} : {}), cwd})
}

/** The action a resume of this saved state would run first (StepHandler.pendingAction): what pipe confirm compares with the one shown. */
export function pendingActionOf(state: unknown, where: {policy: LoadedPolicy; cwd: string}): ConfirmAction | null {
  const call = (state as Partial<AgentState> | null)?.pending?.[0]
  if (!call || typeof call.function?.name !== 'string' || typeof call.function.arguments !== 'string') return null
  const parsed = call.function.arguments.trim() === '' ? {} : safeParse(call.function.arguments)
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return null
  const args = parsed as Record<string, unknown>
  const saved = state as Partial<AgentState>
  const name = call.function.name
  // A pipeline's own tool: its declared level, and the argv it paused with (built from these arguments).
  const argv = saved.planned?.call_id === call.id ? saved.planned.argv : argvOf(name, args, where.policy, where.cwd)
  return shownAction(call, args, toolLevel(where.policy, name, saved.declared_levels?.[name]), argv, where.cwd)
}
