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

/** Tokens as a whole number, as a budget counts them. */
export function tokensText(tokens: number): string {
  return `${Math.round(tokens)} tokens`
}

/**
 * Dollars as a person writes them: cents at least, and as many places as the budget was given with
 * (`written`, e.g. 0.125), or as the amount needs, up to a millionth.
 */
export function usdText(usd: number, written?: number): string {
  const places = (n: number | undefined): number => {
    if (n === undefined) return 0
    const text = String(Math.round(n * 1e6) / 1e6)
    return text.includes('.') ? text.split('.')[1]!.length : 0
  }
  return `$${usd.toFixed(Math.min(6, Math.max(2, places(written), places(usd))))}`
}
