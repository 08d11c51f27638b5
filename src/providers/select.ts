/** Chooses the model provider for a run, and creates it on first use. */
import {PipeError} from '../errors.js'
import type {ProviderSettings} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import {OFFLINE_MODEL, type Provider} from './types.js'

export type ProviderChoice = 'auto' | 'offline' | 'openai'

export interface ProviderPlan {
  record: RunRecord['provider']
  create: () => Promise<Provider>
}

/**
 * --provider wins over the pipeline's provider.kind. auto means openai when OPENAI_API_KEY or
 * OPENAI_BASE_URL is set, else the offline rules provider. The key itself is never recorded.
 */
export function planProvider(choice: ProviderChoice | undefined, settings: ProviderSettings | undefined, env: NodeJS.ProcessEnv = process.env): ProviderPlan {
  const wanted = choice && choice !== 'auto' ? choice : (settings?.kind ?? 'auto')
  const apiKey = env.OPENAI_API_KEY || undefined
  const baseURL = env.OPENAI_BASE_URL || undefined
  const kind = wanted === 'auto' ? (apiKey || baseURL ? 'openai' : 'offline') : wanted
  let provider: Provider | undefined
  if (kind === 'offline') {
    return {
      record: {kind: 'offline', model: OFFLINE_MODEL, endpoint_host: null},
      create: async () => {
        if (!provider) {
          const {OfflineProvider} = await import('./offline/provider.js')
          provider = new OfflineProvider()
        }
        return provider
      },
    }
  }
  if (!apiKey && !baseURL) {
    throw new PipeError('E_CONFIG', 'the openai provider needs an endpoint, but neither OPENAI_API_KEY nor OPENAI_BASE_URL is set', {
      hint: 'Set OPENAI_API_KEY (and OPENAI_BASE_URL for another OpenAI-compatible server), or use --provider offline.',
    })
  }
  let host: string
  try {
    host = new URL(baseURL ?? 'https://api.openai.com/v1').host
  } catch {
    throw new PipeError('E_CONFIG', `OPENAI_BASE_URL is not a URL: ${baseURL}`, {hint: 'For example http://127.0.0.1:11434/v1 for Ollama.'})
  }
  const model = settings?.model ?? 'gpt-4o-mini'
  return {
    record: {kind: 'openai', model, endpoint_host: host},
    create: async () => {
      if (!provider) {
        const [{OpenAIProvider}, {LiveTransport}] = await Promise.all([import('./openai/provider.js'), import('./openai/transport.js')])
        const transport = new LiveTransport({...(apiKey ? {apiKey} : {}), ...(baseURL ? {baseURL} : {}), ...(settings?.timeout_ms !== undefined ? {timeoutMs: settings.timeout_ms} : {})})
        provider = new OpenAIProvider({settings: settings ?? {}, transport})
      }
      return provider
    },
  }
}
