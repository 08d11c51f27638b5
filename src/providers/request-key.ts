/**
 * A model request's key: the sha256 of the request normalised to the fields that decide the reply,
 * redacted, in its stable form (pipe's ids aliased, the times pipe writes masked), so a recording
 * replays in another store, folder or year. Used by cassettes, the reply cache and replay --check.
 */
import {hashJson} from '../util/hash.js'
import {redactDeep} from '../util/redact.js'
import {IdAliases, maskPipeTimes, maskTimes} from '../util/stable-text.js'
import type {ChatMessage, ChatRequest} from './chat.js'

/** The request as it identifies itself: only the fields that decide the reply, redacted, absent ones left out. */
export function normaliseRequest(request: ChatRequest): ChatRequest {
  const message = (m: ChatMessage): ChatMessage => {
    const out: Record<string, unknown> = {role: m.role, content: m.content}
    if (m.role === 'assistant' && m.tool_calls && m.tool_calls.length > 0)
      out['tool_calls'] = m.tool_calls.map((c) => ({id: c.id, type: c.type, function: {name: c.function.name, arguments: c.function.arguments}}))
    if (m.role === 'tool') out['tool_call_id'] = m.tool_call_id
    return out as unknown as ChatMessage
  }
  const out: ChatRequest = {model: request.model, messages: request.messages.map(message)}
  if (request.temperature !== undefined) out.temperature = request.temperature
  if (request.max_tokens !== undefined) out.max_tokens = request.max_tokens
  if (request.response_format !== undefined) out.response_format = request.response_format
  if (request.tools !== undefined && request.tools.length > 0) out.tools = request.tools
  if (request.tool_choice !== undefined) out.tool_choice = request.tool_choice
  // Through JSON: drops undefined deep inside (a tool's description) so equal requests hash equal.
  return redactDeep(JSON.parse(JSON.stringify(out)) as ChatRequest)
}

/**
 * The request with what pipe makes differently on every run taken out of its text: pipe's ids
 * (they carry the date and the store's counter: each distinct one becomes an alias in order of
 * first mention, so which mentions are the same id still counts) and the times pipe writes (see
 * maskPipeTimes). A run recorded today in one store replays a year later in another, where the same
 * step asks with other ids; a requirement that names another date is another request.
 */
export function stableRequest(request: ChatRequest): ChatRequest {
  return stableWith(request, maskPipeTimes)
}

function stableWith(request: ChatRequest, mask: (text: string) => string): ChatRequest {
  const aliases = new IdAliases()
  const stable = (value: unknown): unknown => {
    if (typeof value === 'string') return mask(aliases.replace(value))
    if (Array.isArray(value)) return value.map(stable)
    if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, stable(v)]))
    return value
  }
  return {...request, messages: stable(request.messages) as ChatMessage[]}
}

/** A request's key: the hash of its stable, normalised form. */
export function requestKey(request: ChatRequest): string {
  return hashJson(stableRequest(normaliseRequest(request)))
}

/** The key a pipe-cassette/2 file gave a request: every ISO time masked, a requirement's dates too. */
export function requestKeyV2(request: ChatRequest): string {
  return hashJson(stableWith(normaliseRequest(request), maskTimes))
}

/** The key a pipe-cassette/1 file gave a request: the hash of its normalised form, ids and times included. */
export function requestKeyV1(request: ChatRequest): string {
  return hashJson(normaliseRequest(request))
}
