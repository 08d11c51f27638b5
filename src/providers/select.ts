/** Chooses the model provider for a run, and creates it on first use. */
import {PipeError} from '../errors.js'
import type {ProviderSettings} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import {addSecret} from '../util/redact.js'
import type {Cassette} from './cassette.js'
import type {ReplyStore} from './reply-transport.js'
import {ReplyLog} from './reply-transport.js'
import {OFFLINE_MODEL, type Provider} from './types.js'

export type ProviderChoice = 'auto' | 'offline' | 'openai'

export interface ProviderPlan {
  record: RunRecord['provider']
  create: () => Promise<Provider>
  /** What answered each model request, by run and step (the engine writes it into the step's snapshot). */
  replies: ReplyLog
}

/** Where model replies may come from besides the live endpoint. */
export interface ReplySources {
  /** An opened cassette (--record / --replay). */
  cassette?: Cassette
  /** reuse: answer a request the store's reply cache holds from it. */
  cache?: 'off' | 'reuse'
  /** The store's reply cache, which keeps every live reply. */
  replyCache?: ReplyStore
}

/**
 * --provider wins over the pipeline's provider.kind. auto means openai when OPENAI_API_KEY or
 * OPENAI_BASE_URL is set, or a cassette is replayed, else the offline rules provider. A replayed
 * cassette needs no endpoint: with neither variable set, the cassette alone answers. The key itself
 * is never recorded.
 */
/**
 * One provider per plan, however many steps ask for it at once: a foreach's children start side by
 * side, and two made at once would each have their own transport, so identical requests in flight
 * would no longer share one live call. A failed creation is tried again by the next caller.
 */
function once(make: () => Promise<Provider>): () => Promise<Provider> {
  let made: Promise<Provider> | undefined
  return () =>
    (made ??= make().catch((error: unknown) => {
      made = undefined
      throw error
    }))
}

export function planProvider(
  choice: ProviderChoice | undefined,
  settings: ProviderSettings | undefined,
  env: NodeJS.ProcessEnv = process.env,
  sources: ReplySources = {},
): ProviderPlan {
  const wanted = choice && choice !== 'auto' ? choice : (settings?.kind ?? 'auto')
  const apiKey = env.OPENAI_API_KEY || undefined
  const baseURL = env.OPENAI_BASE_URL || undefined
  // The key never reaches a record, a cassette or the reply cache, whichever environment it came from.
  addSecret(apiKey)
  const {cassette} = sources
  const kind = wanted === 'auto' ? (apiKey || baseURL || cassette ? 'openai' : 'offline') : wanted
  const replies = new ReplyLog()
  if (kind === 'offline') {
    if (cassette) {
      throw new PipeError(
        'E_INVALID_ARGS',
        `--${cassette.options.mode} records and replays the replies of the openai provider, but this run uses the offline rules provider, which asks no model`,
        {
          hint: "Leave out --provider offline (or the pipeline's provider.kind: offline), or leave out the cassette.",
        },
      )
    }
    return {
      record: {kind: 'offline', model: OFFLINE_MODEL, endpoint_host: null},
      replies,
      create: once(async () => {
        const {OfflineProvider} = await import('./offline/provider.js')
        return new OfflineProvider()
      }),
    }
  }
  // Replaying with missing requests an error, no endpoint is asked, so none is needed (nor recorded).
  const needsLive = !cassette || cassette.options.mode === 'record' || cassette.options.missing === 'live'
  if (needsLive && !apiKey && !baseURL) {
    throw new PipeError(
      'E_CONFIG',
      `the openai provider needs an endpoint${cassette ? ` to ${cassette.options.mode === 'record' ? 'record from' : 'fill what the cassette is missing'}` : ''}, but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set`,
      {
        hint: cassette
          ? 'Set OPENAI_BASE_URL (and OPENAI_API_KEY) for the server to record from, or replay without --replay-missing live.'
          : 'Set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server), or use --provider offline.',
      },
    )
  }
  let host: string | null = null
  if (needsLive) {
    let url: URL
    try {
      url = new URL(baseURL ?? 'https://api.openai.com/v1')
    } catch {
      // Not echoed: a URL that does not parse may still hold a password.
      throw new PipeError('E_CONFIG', 'OPENAI_BASE_URL is not a URL', {hint: 'For example http://127.0.0.1:11434/v1 for Ollama.'})
    }
    // The client would send them nowhere (it authenticates with the key alone) and the failure would
    // read as an endpoint that cannot be reached; named here, the URL never printed.
    if (url.username || url.password)
      throw new PipeError('E_CONFIG', 'OPENAI_BASE_URL holds credentials (USER:PASSWORD@ before the host), which pipe does not send', {
        hint: 'Remove them from OPENAI_BASE_URL and put the API key in OPENAI_API_KEY (sent as Authorization: Bearer KEY).',
      })
    host = url.host
  }
  const model = settings?.model ?? 'gpt-4o-mini'
  const cache = sources.cache === 'reuse' ? {cache: 'reuse' as const} : {}
  const recordCassette = cassette
    ? {
        cassette: {
          file: cassette.file,
          mode: cassette.options.mode,
          ...(cassette.options.mode === 'replay' ? {missing: cassette.options.missing ?? 'error'} : {}),
          ...(cassette.options.mode === 'replay' && cassette.options.append ? {append: true} : {}),
          ...(cassette.options.mode === 'replay' && cassette.sha256 ? {sha256: cassette.sha256} : {}),
        },
      }
    : {}
  return {
    record: {kind: 'openai', model, endpoint_host: host, ...recordCassette, ...cache},
    replies,
    create: once(async () => {
      const [{OpenAIProvider}, {ReplyTransport}] = await Promise.all([import('./openai/provider.js'), import('./reply-transport.js')])
      let live = null
      if (needsLive) {
        const {LiveTransport} = await import('./openai/transport.js')
        live = new LiveTransport({
          ...(apiKey ? {apiKey} : {}),
          ...(baseURL ? {baseURL} : {}),
          ...(settings?.timeout_ms !== undefined ? {timeoutMs: settings.timeout_ms} : {}),
        })
      }
      const transport = new ReplyTransport({
        live,
        log: replies,
        ...(settings?.name ? {providerName: settings.name} : {}),
        ...(cassette ? {cassette} : {}),
        ...(sources.replyCache ? {cache: {store: sources.replyCache, reuse: sources.cache === 'reuse'}} : {}),
      })
      return new OpenAIProvider({settings: settings ?? {}, transport})
    }),
  }
}
