/**
 * What pipe stats says of budgets: for each run whose pipeline has one (its own or a step's), the
 * limits with the grants, against what was spent, counted as the budget counts it (engine/budget.ts:
 * the run's snapshots and its child runs', and what a step spent before a pause). The limits are the
 * pipeline file's, read only when the file is still the one the run ran (its hash): a changed file's
 * budget is not the run's.
 */
import {loadPipeline} from '../config/pipeline.js'
import {limitsOf, PIPELINE_SCOPE, recordedSpend} from '../engine/budget.js'
import {kindCatalog} from '../steps/registry.js'
import type {RunStore} from '../store/types.js'
import type {Budget, Pipeline} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import {tokensText, usdText} from '../util/prices.js'

export interface BudgetLine {
  /** The limits as written, with what people granted on top (pipe budget). */
  tokens?: number
  cost_usd?: number
  on_exceed: 'pause' | 'fail'
  granted_tokens: number
  granted_usd: number
  spent_tokens: number
  spent_usd: number
  /** Whether what was spent passed a limit (a step ended over_budget or paused, or the limit was raised since). */
  over: boolean
}

/** Spent against the limit (grants included): "45000/44000 tokens, $0.01/$0.02", with "over" when it passed it. */
export function budgetText(b: BudgetLine): string {
  const parts = [
    ...(b.tokens !== undefined ? [`${Math.round(b.spent_tokens)}/${tokensText(b.tokens + b.granted_tokens)}`] : []),
    ...(b.cost_usd !== undefined ? [`${usdText(b.spent_usd, b.cost_usd)}/${usdText(b.cost_usd + b.granted_usd, b.cost_usd)}`] : []),
  ]
  return `${parts.join(', ')}${b.over ? ' over' : ''}`
}

/** The pipeline's budget and each step's own, by step id; null when there is none, or the file changed since the run. */
export type RunBudgetStats = {pipeline: BudgetLine | null; steps: Record<string, BudgetLine>} | null

/** A pipeline's runs under a budget: how many, how many passed one, and what they spent. */
export interface PipelineBudget {
  runs: number
  over: number
  spent_tokens: number
  spent_usd: number
}

export function addRunBudget(into: PipelineBudget | null, run: NonNullable<RunBudgetStats>): PipelineBudget {
  const lines = [...(run.pipeline ? [run.pipeline] : []), ...Object.values(run.steps)]
  const whole = run.pipeline ?? {spent_tokens: Math.max(0, ...lines.map((l) => l.spent_tokens)), spent_usd: Math.max(0, ...lines.map((l) => l.spent_usd))}
  const base = into ?? {runs: 0, over: 0, spent_tokens: 0, spent_usd: 0}
  return {
    runs: base.runs + 1,
    over: base.over + (lines.some((l) => l.over) ? 1 : 0),
    spent_tokens: base.spent_tokens + whole.spent_tokens,
    spent_usd: Math.round((base.spent_usd + whole.spent_usd) * 1e6) / 1e6,
  }
}

const pipelines = new Map<string, Promise<Pipeline | null>>()

function pipelineOf(record: RunRecord): Promise<Pipeline | null> {
  const key = `${record.pipeline.path}\u0000${record.pipeline.hash}`
  let found = pipelines.get(key)
  if (!found) {
    found = loadPipeline(record.pipeline.path, kindCatalog)
      .then((result) => (result.ok && result.loaded.hash === record.pipeline.hash ? result.loaded.pipeline : null))
      .catch(() => null)
    pipelines.set(key, found)
  }
  return found
}

async function line(store: RunStore, record: RunRecord, pipeline: Pipeline, budget: Budget, scope: string): Promise<BudgetLine> {
  const spent = await recordedSpend(store, record, await store.readSnapshots(record.run_id), pipeline, scope === PIPELINE_SCOPE ? undefined : scope)
  const limits = limitsOf(budget, record, scope)
  const grants = (record.budget_grants ?? []).filter((g) => g.scope === scope)
  return {
    ...(budget.tokens !== undefined ? {tokens: budget.tokens} : {}),
    ...(budget.cost_usd !== undefined ? {cost_usd: budget.cost_usd} : {}),
    on_exceed: budget.on_exceed ?? 'pause',
    granted_tokens: grants.reduce((n, g) => n + (g.tokens ?? 0), 0),
    granted_usd: Math.round(grants.reduce((n, g) => n + (g.usd ?? 0), 0) * 1e6) / 1e6,
    spent_tokens: spent.tokens,
    spent_usd: spent.usd,
    over:
      (budget.tokens !== undefined && spent.tokens > budget.tokens) ||
      (limits.usd !== undefined && budget.cost_usd !== undefined && spent.usd > budget.cost_usd),
  }
}

export async function runBudget(store: RunStore, record: RunRecord): Promise<RunBudgetStats> {
  const pipeline = await pipelineOf(record)
  if (!pipeline) return null
  const steps: Record<string, BudgetLine> = {}
  for (const step of pipeline.steps) if (step.budget) steps[step.id] = await line(store, record, pipeline, step.budget, step.id)
  if (!pipeline.budget && Object.keys(steps).length === 0) return null
  return {pipeline: pipeline.budget ? await line(store, record, pipeline, pipeline.budget, PIPELINE_SCOPE) : null, steps}
}
