/**
 * The one seam every model request goes through: a chat-completions request as pipe composed it,
 * and the reply. The live transport sends it to an OpenAI-compatible endpoint; wrappers around a
 * transport can record requests and replies, answer from a recording or a cache, or count them,
 * without the provider or the steps knowing. Requests are plain JSON, so a request can be hashed
 * and compared.
 */

export interface ToolCall {
  id: string
  type: 'function'
  function: {name: string; arguments: string}
}

export type ChatMessage =
  | {role: 'system'; content: string}
  | {role: 'user'; content: string}
  | {role: 'assistant'; content: string | null; tool_calls?: ToolCall[]}
  | {role: 'tool'; content: string; tool_call_id: string}

export interface ToolSpec {
  type: 'function'
  function: {name: string; description?: string; parameters: Record<string, unknown>}
}

export type ResponseFormat = {type: 'json_schema'; json_schema: {name: string; schema: Record<string, unknown>; strict: boolean}} | {type: 'json_object'}

export interface ChatRequest {
  model: string
  messages: ChatMessage[]
  temperature?: number
  max_tokens?: number
  response_format?: ResponseFormat
  tools?: ToolSpec[]
  tool_choice?: 'auto' | 'none' | 'required'
}

export interface ChatReply {
  /** The model the endpoint says answered. */
  model: string
  message: {role: 'assistant'; content: string | null; tool_calls?: ToolCall[]}
  finish_reason: string
  usage?: {prompt_tokens: number; completion_tokens: number}
  /** Where the reply came from when no endpoint was asked: a cassette or the store's reply cache. */
  source?: 'cassette' | 'cache'
  /** The request's key, when a recording or the reply cache keeps the reply under it (see reject). */
  key?: string
}

/** Who asks: named in errors and recordings, never part of what identifies a request. */
export interface ChatCall {
  signal: AbortSignal
  /** The pipeline step the request is for. */
  step: string
  run?: string
  /** The budgets the request counts against (engine/budget.ts), when the run or step has any. */
  budget?: ChatBudget
}

/**
 * A run's spending limits as a request meets them. `check` runs before a request is sent (or
 * answered from a recording) and throws when its estimated size would pass a limit; `spent` counts
 * each reply's usage, whatever answered it, until the step's snapshot records it.
 */
export interface ChatBudget {
  check(request: ChatRequest): Promise<void>
  /** The reply to `request` (checked before): its usage replaces what was held for it. */
  spent(reply: ChatReply, request: ChatRequest): Promise<void>
  /** `request` got no reply: what was held for it is let go. */
  failed(request: ChatRequest): Promise<void>
}

export interface ChatTransport {
  /** Where requests go, for messages (host only, never a key). */
  readonly endpointHost: string | null
  complete(request: ChatRequest, call: ChatCall): Promise<ChatReply>
  /**
   * The caller found the reply kept under `key` invalid (it broke the step's output schema): it
   * must never answer that request again from the reply cache, so a redrive asks the model anew.
   */
  reject?(key: string, problem: string): Promise<void>
}
