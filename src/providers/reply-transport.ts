/**
 * Where a model request's reply comes from: a cassette, the store's reply cache (`--cache reuse`),
 * or the live endpoint, in that order, with what answered each request noted for the snapshot of
 * the step that asked. Identical requests in flight share one answer.
 */
import {PipeError} from '../errors.js'
import {tracing} from '../telemetry/tracing.js'
import {redactDeep} from '../util/redact.js'
import type {Interaction} from '../types/cassette.js'
import {Cassette, describeDifference, nearest} from './cassette.js'
import type {ChatCall, ChatReply, ChatRequest, ChatTransport} from './chat.js'
import {normaliseRequest, requestKey, stableRequest} from './request-key.js'

/** What answered a request: the model endpoint, a cassette, or the store's reply cache. */
export type ReplySource = 'live' | 'cassette' | 'cache'

type StoredReply = Omit<ChatReply, 'source' | 'key'>

function storedReply(reply: ChatReply): StoredReply {
  const {source: _source, key: _key, ...rest} = reply
  return redactDeep(JSON.parse(JSON.stringify(rest)) as StoredReply)
}

// What answered each request, for the snapshot of the step that asked.

export interface ModelCall {
  key: string
  source: ReplySource
}

/** The requests each (run, step) made since the engine last took them. */
export class ReplyLog {
  private readonly calls = new Map<string, ModelCall[]>()

  note(call: ChatCall, entry: ModelCall): void {
    if (call.run === undefined) return
    const id = `${call.run}\u0000${call.step}`
    const list = this.calls.get(id)
    if (list) list.push(entry)
    else this.calls.set(id, [entry])
  }

  take(run: string, step: string): ModelCall[] {
    const id = `${run}\u0000${step}`
    const list = this.calls.get(id) ?? []
    this.calls.delete(id)
    return list
  }
}

export interface ReplyStore {
  /** The cached request and reply under `key` (its file checked), or null; `rejected` when a step found the reply invalid. */
  read(key: string): Promise<{request: unknown; reply: unknown; rejected?: string} | null>
  write(key: string, request: unknown, reply: unknown, rejected?: string): Promise<void>
  fileOf(key: string): string
}

// The transport

function interaction(key: string, request: ChatRequest, call: ChatCall, reply: StoredReply): Interaction {
  return {type: 'interaction', key, step: call.step, request: normaliseRequest(request), reply}
}

export interface ReplyTransportOptions {
  /** The live endpoint; null when only recorded replies may answer. */
  live: ChatTransport | null
  cassette?: Cassette
  cache?: {store: ReplyStore; reuse: boolean}
  log: ReplyLog
  /** The pipeline's provider.name: whose models answer, for traces, when the endpoint's host does not say. */
  providerName?: string
}

/**
 * Answers each request from, in order: the cassette (replaying, or a repeat of a request this
 * session recorded), the store's reply cache (with reuse), the live endpoint. Every live or cassette reply goes
 * into the cache; with a recording cassette every reply goes into the cassette. Identical requests
 * asked at the same time share one live call, so a recording run and its replay get the same replies.
 */
export class ReplyTransport implements ChatTransport {
  readonly endpointHost: string | null
  private readonly pending = new Map<string, Promise<{reply: StoredReply; source: ReplySource}>>()

  constructor(private readonly options: ReplyTransportOptions) {
    this.endpointHost = options.live?.endpointHost ?? null
  }

  async complete(request: ChatRequest, call: ChatCall): Promise<ChatReply> {
    // Every model request passes here, whichever step kind asks: a request over budget is never sent.
    await call.budget?.check(request)
    const span = tracing().modelCall(call, request, {host: this.endpointHost, provider: this.options.providerName})
    let reply: ChatReply
    try {
      reply = await this.reply(request, call)
    } catch (error) {
      await call.budget?.failed(request)
      span.fail(error)
      throw error
    }
    await call.budget?.spent(reply, request)
    span.end(reply)
    return reply
  }

  private async reply(request: ChatRequest, call: ChatCall): Promise<ChatReply> {
    const key = requestKey(request)
    let answer = this.pending.get(key)
    let first = false
    if (!answer) {
      first = true
      answer = this.answer(key, request, call)
      this.pending.set(key, answer)
      answer.then(
        () => this.pending.delete(key),
        () => this.pending.delete(key),
      )
    }
    const {reply, source: own} = await answer
    // A request that waited for an identical one in flight got a recorded reply, not a live one.
    const source: ReplySource = first ? own : own === 'cache' ? 'cache' : 'cassette'
    // Its step may name the recording (the first step by name does, whichever asked first).
    if (!first && this.options.cassette?.records) await this.options.cassette.record(interaction(key, request, call, reply))
    this.options.log.note(call, {key, source})
    return {...structuredClone(reply), ...(source === 'live' ? {} : {source}), key}
  }

  /**
   * Marks the cached reply under `key` as rejected (kept for pipe replay --check, never reused), so
   * a redrive of a step whose reply broke its schema asks the model again instead of getting the
   * same reply. A cassette keeps it: replaying a recording gives what was recorded, repairs included.
   */
  async reject(key: string, problem: string): Promise<void> {
    const cache = this.options.cache
    if (!cache) return
    const cached = await cache.store.read(key)
    if (cached && cached.rejected === undefined) await cache.store.write(key, cached.request, cached.reply, problem)
  }

  private async answer(key: string, request: ChatRequest, call: ChatCall): Promise<{reply: StoredReply; source: ReplySource}> {
    const {cassette, cache, live} = this.options
    const recorded = cassette?.lookup(key)
    if (recorded) {
      // The store keeps every reply that answered one of its runs, so pipe replay --check can re-check a replayed run too.
      if (cache && (await cache.store.read(key)) === null) await cache.store.write(key, normaliseRequest(request), recorded.reply)
      return {reply: recorded.reply, source: 'cassette'}
    }
    if (cassette && cassette.options.mode === 'replay' && cassette.options.missing !== 'live') throw await this.missing(cassette, request, call)
    let reply: StoredReply | null = null
    let source: ReplySource = 'live'
    if (cache?.reuse) {
      const cached = await cache.store.read(key)
      // A reply its step rejected is asked for again: the same reply would fail the same way.
      if (cached && cached.rejected === undefined) {
        // The store checked the file's seal; the request must also be the one its name says.
        const actual = requestKey(cached.request as ChatRequest)
        if (actual !== key)
          throw new PipeError(
            'E_INTEGRITY',
            `the cached reply ${cache.store.fileOf(key)} holds a request whose hash is ${actual}, not its name ${key} (it was edited)`,
            {hint: `Delete ${cache.store.fileOf(key)} (the request is then asked again), or run with --cache off.`},
          )
        reply = cached.reply as StoredReply
        source = 'cache'
      }
    }
    if (!reply) {
      if (!live)
        throw new PipeError('E_CONFIG', `step ${call.step}: no model endpoint to ask (OPENAI_API_KEY or OPENAI_BASE_URL is needed)`, {
          hint: 'Set OPENAI_BASE_URL (and OPENAI_API_KEY), or replay a cassette that has the reply.',
        })
      reply = storedReply(await live.complete(request, call))
      if (cache) await cache.store.write(key, normaliseRequest(request), reply)
    }
    if (cassette?.records) await cassette.record(interaction(key, request, call, reply))
    return {reply, source}
  }

  private async missing(cassette: Cassette, request: ChatRequest, call: ChatCall): Promise<PipeError> {
    const now = normaliseRequest(request)
    const close = await nearest(cassette.candidates(call.step), now)
    const where = `the cassette ${cassette.file}`
    const hint = `If the change is intended, record again: pipe run ... --record ${cassette.file}; or fill the gap from the live endpoint with --replay-missing live (add --record ${cassette.file} to keep it).`
    if (!close) {
      const steps = cassette.steps()
      return new PipeError(
        'E_MODEL',
        `step ${call.step}: ${where} has no recorded reply for this request, and no recording for step ${call.step} at all (it has ${steps.length > 0 ? `steps ${steps.join(', ')}` : 'no recordings'})`,
        {hint, details: {step: call.step, key: requestKey(request), cassette: cassette.file}},
      )
    }
    // Compared as keyed: an id or a time that differs is no difference, and is not shown as one.
    const difference = await describeDifference(stableRequest(close.request as ChatRequest), stableRequest(now))
    return new PipeError(
      'E_MODEL',
      `step ${call.step}: ${where} has no recorded reply for this request; it differs from the nearest one recorded for step ${call.step} (${close.key}):\n${difference}`,
      {
        hint,
        details: {step: call.step, key: requestKey(request), nearest: close.key, cassette: cassette.file},
      },
    )
  }
}
