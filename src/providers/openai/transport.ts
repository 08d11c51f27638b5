/**
 * The live transport: chat-completions requests to an OpenAI-compatible endpoint through the openai
 * client, created on first use (it is a heavy import).
 */
import type OpenAI from 'openai'
import type {ChatCall, ChatReply, ChatRequest, ChatTransport} from '../chat.js'
import {cappedFetch} from './capped-fetch.js'
import {fromOpenAIError} from './errors.js'

export interface LiveOptions {
  apiKey?: string
  baseURL?: string
  timeoutMs?: number
}

export class LiveTransport implements ChatTransport {
  readonly endpointHost: string
  private client: OpenAI | undefined
  /** Set once the endpoint refused JSON-schema output: later requests ask for JSON mode instead. */
  private jsonModeOnly = false

  constructor(private readonly options: LiveOptions) {
    this.endpointHost = new URL(options.baseURL ?? 'https://api.openai.com/v1').host
  }

  private async openai(): Promise<OpenAI> {
    if (!this.client) {
      const {default: Client} = await import('openai')
      this.client = new Client({
        // A local server needs no key, but the client insists on one; it is sent and ignored.
        apiKey: this.options.apiKey ?? 'not-needed',
        ...(this.options.baseURL ? {baseURL: this.options.baseURL} : {}),
        // pipe retries whole steps itself, recording each attempt in the snapshot.
        maxRetries: 0,
        // One bound, cappedFetch's below: the client's own timer (set first) raced it on a busy machine, and the same
        // stall was said as "did not answer in time" or as "did not finish its reply". Its largest delay a timer takes.
        timeout: 2 ** 31 - 1,
        // Replies are read through a ceiling (capped-fetch.ts): an endless body fails the step instead of filling memory,
        // and one that stalls after its headers fails at the same timeout as a request that gets none.
        fetch: cappedFetch(this.endpointHost, undefined, undefined, this.options.timeoutMs ?? 60000),
      })
    }
    return this.client
  }

  async complete(request: ChatRequest, call: ChatCall): Promise<ChatReply> {
    const client = await this.openai()
    const sent = this.jsonModeOnly && request.response_format?.type === 'json_schema' ? {...request, response_format: {type: 'json_object' as const}} : request
    try {
      const completion = await client.chat.completions.create(sent as OpenAI.ChatCompletionCreateParamsNonStreaming, {signal: call.signal})
      const choice = completion.choices[0]
      const message = choice?.message
      const toolCalls = (message?.tool_calls ?? []).flatMap((c) =>
        c.type === 'function' ? [{id: c.id, type: 'function' as const, function: {name: c.function.name, arguments: c.function.arguments}}] : [],
      )
      return {
        model: completion.model ?? request.model,
        message: {role: 'assistant', content: message?.content ?? null, ...(toolCalls.length > 0 ? {tool_calls: toolCalls} : {})},
        finish_reason: choice?.finish_reason ?? 'stop',
        ...(completion.usage ? {usage: {prompt_tokens: completion.usage.prompt_tokens ?? 0, completion_tokens: completion.usage.completion_tokens ?? 0}} : {}),
      }
    } catch (error) {
      const status = (error as {status?: number}).status
      // Endpoints without JSON-schema output answer 400 about response_format: fall back to JSON mode for the rest of the run.
      if (
        status === 400 &&
        !this.jsonModeOnly &&
        sent.response_format?.type === 'json_schema' &&
        /response_format|json_schema/i.test(String((error as Error).message))
      ) {
        this.jsonModeOnly = true
        return this.complete(request, call)
      }
      if (call.signal.aborted) throw call.signal.reason
      throw fromOpenAIError(error, this.endpointHost, request.model)
    }
  }
}
