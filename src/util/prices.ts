/**
 * What a model's tokens cost: the pipeline's provider.prices when it gives them (they are the
 * pipeline's own terms, for every model it uses), else the defaults shipped in
 * default-prices.json, dated, for well-known models. Unknown: undefined, never a guess.
 */
import defaults from './default-prices.json' with {type: 'json'}
import type {ProviderSettings} from '../types/pipeline.js'

export type Prices = NonNullable<ProviderSettings['prices']>

const KNOWN: Readonly<Record<string, {prompt_per_1k: number; completion_per_1k: number}>> = defaults.models

/** The date the default prices were published on. */
export const DEFAULT_PRICES_AS_OF: string = defaults.as_of

/** The model a provider without one set uses (select.ts, openai/provider.ts). */
export const DEFAULT_MODEL = 'gpt-4o-mini'

export function pricesFor(model: string, own: Prices | undefined): Prices | undefined {
  if (own) return own
  const known = Object.hasOwn(KNOWN, model) ? KNOWN[model] : undefined
  return known ? {...known, currency: defaults.currency} : undefined
}

/** The cost of the tokens at the prices, rounded to a millionth. */
export function costOf(tokens: {prompt_tokens: number; completion_tokens: number}, prices: Prices): number {
  return Math.round(((tokens.prompt_tokens / 1000) * prices.prompt_per_1k + (tokens.completion_tokens / 1000) * prices.completion_per_1k) * 1e6) / 1e6
}
