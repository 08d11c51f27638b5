/**
 * The `budget-price` rule: a cost_usd budget needs a price for every model it would count, known
 * before the run starts (not at its tenth step): the pipeline's provider.prices in US dollars, or
 * pipe's dated defaults for well-known models (util/default-prices.json).
 */
import type {Diagnostic} from '../diagnostics.js'
import {diag} from '../positions.js'
import {DEFAULT_MODEL, DEFAULT_PRICES_AS_OF, pricesFor} from '../../util/prices.js'
import type {Rule} from './rule.js'

/** A step's own model, when it names one literally (an expression is the provider's at validate time). */
function stepModel(step: unknown): string | undefined {
  const model = (step as {model?: unknown}).model
  return typeof model === 'string' && !model.includes('${{') ? model : undefined
}

export const budgetPrice: Rule = {
  name: 'budget-price',
  check(loaded) {
    const {pipeline} = loaded
    const out: Diagnostic[] = []
    // The offline rules provider asks no model: it spends nothing.
    if (pipeline.provider?.kind === 'offline') return out
    const own = pipeline.provider?.prices
    const fallback = pipeline.provider?.model ?? DEFAULT_MODEL
    const check = (at: Array<string | number>, models: string[]): void => {
      if (own && (own.currency ?? 'USD') !== 'USD') {
        out.push(
          diag(
            loaded,
            [...at, 'cost_usd'],
            `cost_usd counts US dollars, but provider.prices are in ${own.currency}; give the prices in USD or budget in tokens`,
          ),
        )
        return
      }
      for (const model of new Set(models)) {
        if (pricesFor(model, own)) continue
        out.push(
          diag(
            loaded,
            [...at, 'cost_usd'],
            `cost_usd needs the price of model "${model}", which pipe's default prices (as of ${DEFAULT_PRICES_AS_OF}) do not know; add provider.prices {prompt_per_1k, completion_per_1k} in USD, or budget in tokens`,
          ),
        )
      }
    }
    if (pipeline.budget?.cost_usd !== undefined) check(['budget'], [fallback, ...pipeline.steps.flatMap((s) => stepModel(s) ?? [])])
    pipeline.steps.forEach((step, i) => {
      if (step.budget?.cost_usd !== undefined) check(['steps', i, 'budget'], [stepModel(step) ?? fallback])
    })
    return out
  },
}
