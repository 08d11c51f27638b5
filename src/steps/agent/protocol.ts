/**
 * The conversation's protocol with the model: the instructions, the tools offered (native function
 * tools, or one JSON object per reply when the endpoint refuses them), and each reply read as tool
 * calls, a final answer or giving up.
 */
import {PipeError} from '../../errors.js'
import type {ChatMessage, ChatReply, ToolCall, ToolSpec} from '../../providers/chat.js'
import {parseReply} from '../../providers/openai/provider.js'
import {redactDeep} from '../../util/redact.js'
import type {AgentStep, ExecutedCall, Protocol} from './state.js'
import type {AgentTool} from './tools.js'

export const DEFAULT_MAX_TURNS = 20
export const GIVE_UP = 'give_up'

export function systemText(step: AgentStep, protocol: Protocol, tools: readonly AgentTool[], outputSchema: Record<string, unknown> | null): string {
  const lines = [
    `You are the agent step "${step.id}" of pipe, a pipeline runner. You work on the task the user gives you inside a repository, only through the tools offered. Think, act with a tool, observe its result, reflect, and repeat until the task is done.`,
    `You have at most ${step.max_turns ?? DEFAULT_MAX_TURNS} replies. Some tool calls may be refused by the policy or by a person; then find another way, or give up.`,
  ]
  const final = outputSchema ? `a JSON object that matches this JSON Schema: ${JSON.stringify(outputSchema)}` : 'a short summary of what you did'
  if (protocol === 'native') {
    lines.push(`When the task is done, reply without tool calls with your final answer: ${final}. If you cannot do it, call ${GIVE_UP} with the reason.`)
  } else {
    lines.push(
      'Reply with exactly one JSON object and nothing else, one of:',
      '{"tool": "<name>", "arguments": {...}}  to call a tool (one per reply);',
      `{"final": ...}  when the task is done, where ... is ${final};`,
      `{"${GIVE_UP}": "<reason>"}  when you cannot do it.`,
      'The tools, with the JSON Schema of their arguments:',
      ...tools.map((t) => `- ${t.name}: ${t.description.replace(/\n/g, '\n  ')}\n  arguments: ${JSON.stringify(t.parameters)}`),
    )
  }
  return lines.join('\n')
}

export function toolSpecs(tools: readonly AgentTool[]): ToolSpec[] {
  return [
    ...tools.map((t) => ({type: 'function' as const, function: {name: t.name, description: t.description, parameters: t.parameters}})),
    {
      type: 'function' as const,
      function: {
        name: GIVE_UP,
        description: 'Stop: you cannot do the task. Say why.',
        parameters: {type: 'object', additionalProperties: false, required: ['reason'], properties: {reason: {type: 'string'}}},
      },
    },
  ]
}

export function stableKey(name: string, args: unknown): string {
  const sort = (v: unknown): unknown =>
    v === null || typeof v !== 'object'
      ? v
      : Array.isArray(v)
        ? v.map(sort)
        : Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, sort((v as Record<string, unknown>)[k])]),
          )
  return `${name}:${JSON.stringify(sort(args))}`
}

/** The endpoint refused function tools (400 about tools): the step goes on with the JSON protocol. */
export function rejectsTools(error: unknown): boolean {
  if (!(error instanceof PipeError) || error.code !== 'E_MODEL') return false
  const status = (error.details as {status?: number} | undefined)?.status
  return status === 400 && /tool|function/i.test(error.message)
}

/** A conversation held with native tool calls, retold for the JSON protocol. */
export function toJsonProtocol(messages: ChatMessage[], system: string): ChatMessage[] {
  return messages.map((m, i): ChatMessage => {
    if (i === 0 && m.role === 'system') return {role: 'system', content: system}
    if (m.role === 'assistant' && m.tool_calls?.length) {
      const call = m.tool_calls[0]!
      return {role: 'assistant', content: JSON.stringify({tool: call.function.name, arguments: safeParse(call.function.arguments)})}
    }
    if (m.role === 'tool') return {role: 'user', content: `Result of call ${m.tool_call_id}:\n${m.content}`}
    return m
  })
}

export function safeParse(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/** One model reply, read as tool calls, a final answer, or giving up. */
export type Reading = {calls: ToolCall[]} | {final: unknown; text: string} | {giveUp: string} | {unreadable: string}

export function readReply(reply: ChatReply, protocol: Protocol, turn: number): Reading {
  if (protocol === 'native') {
    const calls = reply.message.tool_calls ?? []
    const giveUp = calls.find((c) => c.function.name === GIVE_UP)
    if (giveUp) {
      const reason = (safeParse(giveUp.function.arguments) as {reason?: unknown} | null)?.reason
      return {giveUp: typeof reason === 'string' ? reason : 'no reason given'}
    }
    if (calls.length > 0) return {calls}
    const text = reply.message.content ?? ''
    return {final: text, text}
  }
  const parsed = parseReply(reply.message.content ?? '')
  if (!parsed.ok || parsed.value === null || typeof parsed.value !== 'object' || Array.isArray(parsed.value)) {
    return {unreadable: parsed.ok ? 'the reply is not a JSON object' : parsed.error}
  }
  const value = parsed.value as Record<string, unknown>
  if (typeof value['tool'] === 'string') {
    return {calls: [{id: `call_json_${turn}`, type: 'function', function: {name: value['tool'], arguments: JSON.stringify(value['arguments'] ?? {})}}]}
  }
  if (GIVE_UP in value) return {giveUp: typeof value[GIVE_UP] === 'string' ? value[GIVE_UP] : 'no reason given'}
  if ('final' in value) return {final: value['final'], text: typeof value['final'] === 'string' ? value['final'] : JSON.stringify(value['final'])}
  return {unreadable: `the reply has none of "tool", "final" or "${GIVE_UP}"`}
}

/**
 * The calls with ids no earlier call of the conversation (or of the reply) has: a model that
 * numbers its calls afresh each reply (call_0 every time) would otherwise have a later call taken
 * for one already confirmed, run or interrupted. Renamed in the transcript too, so every result
 * still answers its call.
 */
export function withUniqueIds(
  calls: ToolCall[],
  messages: readonly ChatMessage[],
  turn: number,
  executed: Readonly<Record<string, ExecutedCall>> = {},
): ToolCall[] {
  const used = new Set(messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : [])))
  return calls.map((call, i) => {
    let id = call.id || `call_${turn}_${i + 1}`
    // A call an earlier attempt ran keeps its id only when it is that call again (then it is answered from the record).
    const ran = executed[id]
    if (used.has(id) || (ran && ran.key !== stableKey(call.function.name, safeParse(call.function.arguments)))) id = `${id}_t${turn}_${i + 1}`
    while (used.has(id)) id = `${id}_`
    used.add(id)
    return id === call.id ? call : {...call, id}
  })
}

export function resultMessage(protocol: Protocol, call: ToolCall, content: Record<string, unknown>): ChatMessage {
  // Masked value by value: in the JSON text a secret with a quote or a backslash is escaped, and would not be found.
  const text = JSON.stringify(redactDeep(content))
  return protocol === 'native'
    ? {role: 'tool', tool_call_id: call.id, content: text}
    : {role: 'user', content: `Result of ${call.function.name} (${call.id}):\n${text}`}
}
