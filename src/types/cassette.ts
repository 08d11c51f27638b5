/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * One line of a pipe cassette (JSON Lines, written by pipe run --record). The first line is the header; every other line is one model request and the reply it got, keyed by the sha256 of the normalised request. Keys are sorted and nothing run-specific (ids, times, hosts) is written, so recording the same run twice gives the same bytes. Secrets and Authorization headers are never written: the request and reply are redacted, and the key is computed over the redacted request.
 */
export interface CassetteLine {}
/**
 * This interface was referenced by `CassetteLine`'s JSON-Schema
 * via the `definition` "header".
 */
export interface Header {
  type: 'header'
  /**
   * The cassette format and version. /2 keys a request by its stable form (pipe's ids as aliases, ISO times masked), so a recording replays in another store, folder or year; /1 (keyed by the request as it was) is still read, and written as /2.
   */
  format: 'pipe-cassette/3' | 'pipe-cassette/2' | 'pipe-cassette/1'
  /**
   * What produced the recording (pipe run --record-note), e.g. which server answered.
   */
  note?: string
}
/**
 * This interface was referenced by `CassetteLine`'s JSON-Schema
 * via the `definition` "interaction".
 */
export interface Interaction {
  type: 'interaction'
  /**
   * sha256 of the canonical JSON of the normalised, redacted request in its stable form (pipe-cassette/3: ids as aliases, the times pipe writes — milliseconds and Z — masked; /2 masked every ISO time).
   */
  key: string
  /**
   * The pipeline step that asked (the first in name order, when several asked the same).
   */
  step: string
  request: Request
  reply: Reply
}
/**
 * The chat-completions request as pipe composed it, normalised: only the fields that identify it.
 *
 * This interface was referenced by `CassetteLine`'s JSON-Schema
 * via the `definition` "request".
 */
export interface Request {
  model: string
  messages: Message[]
  temperature?: number
  max_tokens?: number
  response_format?: {
    type: 'json_schema' | 'json_object'
  }
  tools?: {}[]
  tool_choice?: 'auto' | 'none' | 'required'
}
/**
 * This interface was referenced by `CassetteLine`'s JSON-Schema
 * via the `definition` "message".
 */
export interface Message {
  role: 'system' | 'user' | 'assistant' | 'tool'
  content: string | null
  tool_calls?: ToolCall[]
  tool_call_id?: string
}
/**
 * This interface was referenced by `CassetteLine`'s JSON-Schema
 * via the `definition` "toolCall".
 */
export interface ToolCall {
  id: string
  type: 'function'
  function: {
    name: string
    arguments: string
  }
}
/**
 * This interface was referenced by `CassetteLine`'s JSON-Schema
 * via the `definition` "reply".
 */
export interface Reply {
  /**
   * The model the endpoint said answered.
   */
  model: string
  message: {
    role: 'assistant'
    content: string | null
    tool_calls?: ToolCall[]
  }
  finish_reason: string
  usage?: {
    prompt_tokens: number
    completion_tokens: number
  }
}
