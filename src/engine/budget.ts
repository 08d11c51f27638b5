/**
 * Budgets (issue 40): a pipeline's and a step's limits on model tokens and money. What was spent is
 * read from the records every time a step starts — its run's snapshots and its child runs' — never
 * kept in a process's memory, so a resume, a crash or another worker never resets it; only what the
 * running step spent since it started is counted here, from its replies, until its snapshot records
 * it. Before each model request the request's estimated size is added: a request that would pass a
 * limit is not sent, and the step pauses for a person (pipe budget) or ends over_budget.
 */
import {PipeError} from '../errors.js'
import type {ChatBudget, ChatReply, ChatRequest} from '../providers/chat.js'
import {costOf, DEFAULT_MODEL, pricesFor, tokensText, usdText, type Prices} from '../util/prices.js'
import {holdKey, holdsOf, type BudgetHold} from '../store/budget-holds.js'
import type {RunStore} from '../store/types.js'
import type {Budget, Pipeline, Step} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'

/** What a budget's scope has spent: tokens (prompt and completion) and US dollars. */
export interface Spend {
  prompt_tokens: number
  completion_tokens: number
  tokens: number
  usd: number
}

export type PendingBudget = NonNullable<NonNullable<RunRecord['pending']>['budget']>

/** The budget that a request would pass, as the run's pause and the step's outcome record it. */
export interface Exceeded {
  on_exceed: 'pause' | 'fail'
  pending: PendingBudget
  reason: string
}

export const PIPELINE_SCOPE = 'pipeline'

const none = (): Spend => ({prompt_tokens: 0, completion_tokens: 0, tokens: 0, usd: 0})

function plus(a: Spend, b: Spend): Spend {
  return {
    prompt_tokens: a.prompt_tokens + b.prompt_tokens,
    completion_tokens: a.completion_tokens + b.completion_tokens,
    tokens: a.tokens + b.tokens,
    usd: Math.round((a.usd + b.usd) * 1e6) / 1e6,
  }
}

/** The prices the budget counts a model's tokens at: the pipeline's own, else the shipped defaults. */
export function budgetPrices(pipeline: Pipeline, model: string | null | undefined, inherited?: Prices): Prices | undefined {
  return pricesFor(model ?? pipeline.provider?.model ?? DEFAULT_MODEL, pipeline.provider?.prices ?? inherited)
}

function spendOf(tokens: {prompt_tokens: number; completion_tokens: number}, prices: Prices | undefined): Spend {
  return {
    prompt_tokens: tokens.prompt_tokens,
    completion_tokens: tokens.completion_tokens,
    tokens: tokens.prompt_tokens + tokens.completion_tokens,
    // Only dollars count toward cost_usd; validate refuses a cost budget without a price for the model.
    usd: prices && (prices.currency ?? 'USD') === 'USD' ? costOf(tokens, prices) : 0,
  }
}

/** What one snapshot spent: the usage its step recorded, priced for the model that answered. */
export function snapshotSpend(snapshot: Snapshot, pipeline: Pipeline, inherited?: Prices): Spend {
  const usage = snapshot.meta.usage
  if (!usage) return none()
  return spendOf(usage, budgetPrices(pipeline, snapshot.meta.llm_model, inherited))
}

/**
 * What a run spent with its child runs (theirs counted once, in their own snapshots), or, with
 * `step`, what that step spent over all its visits and retries, with the child runs it started.
 * Spend a step made before a budget pause (never in a snapshot: the step runs again) is in the
 * grants' records (`unrecorded`).
 */
export async function recordedSpend(
  store: RunStore,
  run: RunRecord,
  snapshots: readonly Snapshot[],
  pipeline: Pipeline,
  step?: string,
  inherited?: Prices,
  /** Collects each snapshot read, as `RUN#STEP#SEQ` (store/budget-holds.ts holdKey). */
  seen?: Set<string>,
): Promise<Spend> {
  let total = none()
  for (const s of snapshots) {
    seen?.add(holdKey({run_id: s.run_id, step: s.step.name, seq: s.step.seq}))
    if (step === undefined || s.step.name === step) total = plus(total, snapshotSpend(s, pipeline, inherited))
  }
  for (const grant of run.budget_grants ?? [])
    if (grant.unrecorded && (step === undefined || grant.unrecorded.step === step))
      total = plus(total, spendOf(grant.unrecorded, budgetPrices(pipeline, null, inherited)))
  const children = (await store.listChildren(run.run_id)).filter((c) => step === undefined || c.parent?.step === step)
  for (const child of children)
    total = plus(total, await recordedSpend(store, child, await store.readSnapshots(child.run_id), pipeline, undefined, inherited, seen))
  return total
}

/** A budget's limits with what people granted on top (grants are for the scope that paused). */
export function limitsOf(budget: Budget, run: RunRecord, scope: string): {tokens?: number; usd?: number} {
  const grants = (run.budget_grants ?? []).filter((g) => g.scope === scope)
  const add = (pick: (g: (typeof grants)[number]) => number | undefined): number => grants.reduce((sum, g) => sum + (pick(g) ?? 0), 0)
  return {
    ...(budget.tokens !== undefined ? {tokens: budget.tokens + add((g) => g.tokens)} : {}),
    ...(budget.cost_usd !== undefined ? {usd: Math.round((budget.cost_usd + add((g) => g.usd)) * 1e6) / 1e6} : {}),
  }
}

/**
 * A request's estimated size before it is sent: its text (messages, tools, response format) at four
 * characters a token, plus the completion it allows (max_tokens, when set).
 */
export function estimateOf(request: ChatRequest): {prompt_tokens: number; completion_tokens: number} {
  const text = JSON.stringify({messages: request.messages, tools: request.tools, response_format: request.response_format})
  return {prompt_tokens: Math.ceil(text.length / 4), completion_tokens: request.max_tokens ?? 0}
}

/** A run above a child run whose budgets the child's requests count against: its pipeline's, and the step that started the child's. */
export interface BudgetParent {
  run_id: string
  pipeline: Pipeline
  step: Step
  inherited?: Prices
}

export interface StepBudgetOf {
  store: RunStore
  run: RunRecord
  snapshots: readonly Snapshot[]
  pipeline: Pipeline
  step: Step
  /** The step's seq in its run: its hold is this visit's, and no longer counted once its snapshot is recorded. */
  seq: number
  inherited?: Prices
  /** The runs above this one, nearest first (a foreach's child: the foreach's run). */
  parents?: readonly BudgetParent[]
}

/** One budget a request is checked against; `owner` is the run above whose budget it is (absent: this run's). */
interface Scope {
  scope: string
  budget: Budget
  owner?: BudgetParent
  /** `OWNER_RUN:SCOPE`: the budget's one name, which every hold on it carries (store/budget-holds.ts). */
  key: string
}

/** What was recorded against each budget, and which steps' snapshots that includes (their holds are not counted again). */
interface Recorded {
  spend: Map<string, {spend: Spend; run: RunRecord}>
  steps: Set<string>
}

/** The guard a step's model requests pass (ChatCall.budget), shared by its attempts; undefined when no budget applies. */
export class StepBudget implements ChatBudget {
  /** Set when a request was refused: the attempt turns it into a pause or the outcome over_budget. */
  exceeded: Exceeded | undefined
  /** What this run of the step spent so far, its failed attempts included. */
  private running = none()
  /** The requests under way, each with its estimate, held against the budgets until its reply settles it. */
  private readonly inflight: Array<{request: ChatRequest; estimate: Spend}> = []
  private calls = 0
  /** The model the step's last request asked for: the one its snapshot records and its tokens are priced at (a reply may name another). */
  private model: string | undefined
  /** This run's own records, read once per run of the step: they do not change under a running step's own requests. */
  private own: Promise<Recorded> | undefined

  private constructor(
    private readonly of: StepBudgetOf,
    private readonly scopes: readonly Scope[],
  ) {}

  static for(of: StepBudgetOf): StepBudget | undefined {
    const own = of.run.run_id
    const scopes: Scope[] = [
      ...(of.step.budget ? [{scope: of.step.id, budget: of.step.budget, key: `${own}:${of.step.id}`}] : []),
      ...(of.pipeline.budget ? [{scope: PIPELINE_SCOPE, budget: of.pipeline.budget, key: `${own}:${PIPELINE_SCOPE}`}] : []),
      // A child's requests spend its parents' money too: the step that started it and their pipelines.
      ...(of.parents ?? []).flatMap((owner) => [
        ...(owner.step.budget ? [{scope: owner.step.id, budget: owner.step.budget, owner, key: `${owner.run_id}:${owner.step.id}`}] : []),
        ...(owner.pipeline.budget ? [{scope: PIPELINE_SCOPE, budget: owner.pipeline.budget, owner, key: `${owner.run_id}:${PIPELINE_SCOPE}`}] : []),
      ]),
    ]
    return scopes.length > 0 ? new StepBudget(of, scopes) : undefined
  }

  /** What this run of the step spent since it started, as a step's usage: recorded with the outcome over_budget. */
  get usage(): {prompt_tokens: number; completion_tokens: number; calls: number} | undefined {
    return this.calls === 0 ? undefined : {prompt_tokens: this.running.prompt_tokens, completion_tokens: this.running.completion_tokens, calls: this.calls}
  }

  async check(request: ChatRequest): Promise<void> {
    const {of} = this
    this.model = request.model
    const prices = budgetPrices(of.pipeline, request.model, of.inherited)
    // Validate refuses a cost budget without a price for the models a pipeline names; a child
    // pipeline's models (another file) meet its parents' cost budgets only here: refused, never counted as $0.
    const costly = this.scopes.find((s) => s.budget.cost_usd !== undefined)
    if (costly && (!prices || (prices.currency ?? 'USD') !== 'USD'))
      throw new PipeError(
        'E_CONFIG',
        `step ${of.step.id} asks model "${request.model}", whose price in US dollars pipe does not know, under ${costly.owner ? `parent run ${costly.owner.run_id}'s ` : ''}${costly.scope === PIPELINE_SCOPE ? 'pipeline' : `step ${costly.scope}'s`} budget of cost_usd; the request was not sent`,
        {
          hint: `Add provider.prices {prompt_per_1k, completion_per_1k} in USD to ${costly.owner ? "the parent pipeline (its children inherit them) or this step's pipeline" : 'the pipeline'}, or budget in tokens; then start the run again.`,
        },
      )
    const estimate = spendOf(estimateOf(request), prices)
    // The estimate is held against every budget at once, checked with what is recorded and what
    // other running steps hold, under the budgets' lock: siblings see it before their own requests.
    const holds = holdsOf(of.store)
    const ok = await holds.reserve(this.hold(estimate), async (others) => {
      const recorded = await this.recorded()
      for (const s of this.scopes) {
        const {spend, run} = recorded.spend.get(s.key)!
        const held = others.filter((h) => h.keys.includes(s.key) && !recorded.steps.has(holdKey(h)))
        const heldSpend = held.reduce((sum, h) => plus(sum, {prompt_tokens: 0, completion_tokens: 0, tokens: h.tokens, usd: h.usd}), none())
        const inflight = this.inflight.reduce((sum, f) => plus(sum, f.estimate), none())
        if (this.refuse(s, plus(plus(plus(spend, this.running), inflight), heldSpend), limitsOf(s.budget, run, s.scope), estimate, held.length)) return false
      }
      return true
    })
    if (!ok) {
      const {exceeded} = this
      throw new PipeError('E_BUDGET', exceeded!.reason, {
        hint: `Raise the budget with pipe budget ${exceeded!.pending.run_id ?? of.run.run_id} --add-tokens N (or --add-usd X), or set a larger budget in the pipeline.`,
      })
    }
    this.inflight.push({request, estimate})
  }

  async spent(reply: ChatReply, request: ChatRequest): Promise<void> {
    this.calls++
    if (reply.usage) this.running = plus(this.running, spendOf(reply.usage, budgetPrices(this.of.pipeline, this.model, this.of.inherited)))
    await this.settle(request)
  }

  async failed(request: ChatRequest): Promise<void> {
    await this.settle(request)
  }

  /** The request's estimate gives way to what its reply used (already in `running`), in this step's hold too. */
  private async settle(request: ChatRequest): Promise<void> {
    const at = this.inflight.findIndex((f) => f.request === request)
    if (at >= 0) this.inflight.splice(at, 1)
    await holdsOf(this.of.store).settle(this.hold(none()))
  }

  /** This step's hold: what it spent, what it has under way, and `more` about to be. */
  private hold(more: Spend): BudgetHold {
    const total = [...this.inflight.map((f) => f.estimate), this.running, more].reduce(plus, none())
    return {run_id: this.of.run.run_id, step: this.of.step.id, seq: this.of.seq, keys: this.scopes.map((s) => s.key), tokens: total.tokens, usd: total.usd}
  }

  /** What each budget has recorded: this run's as read when the step started, a parent's as it is now (its other children spend meanwhile). */
  private async recorded(): Promise<Recorded> {
    const {of} = this
    this.own ??= (async () => {
      const out: Recorded = {spend: new Map(), steps: new Set()}
      for (const s of this.scopes.filter((x) => !x.owner)) {
        const step = s.scope === PIPELINE_SCOPE ? undefined : s.scope
        out.spend.set(s.key, {spend: await recordedSpend(of.store, of.run, of.snapshots, of.pipeline, step, of.inherited, out.steps), run: of.run})
      }
      return out
    })()
    const own = await this.own
    const out: Recorded = {spend: new Map(own.spend), steps: new Set(own.steps)}
    const read = new Map<string, {run: RunRecord; snapshots: Snapshot[]}>()
    for (const s of this.scopes) {
      if (!s.owner) continue
      const step = s.scope === PIPELINE_SCOPE ? undefined : s.scope
      let records = read.get(s.owner.run_id)
      if (!records) read.set(s.owner.run_id, (records = {run: await of.store.readRun(s.owner.run_id), snapshots: await of.store.readSnapshots(s.owner.run_id)}))
      // This run's own snapshots are in it (a child is counted in its parent): the running step's spend is its hold.
      out.spend.set(s.key, {
        spend: await recordedSpend(of.store, records.run, records.snapshots, s.owner.pipeline, step, s.owner.inherited, out.steps),
        run: records.run,
      })
    }
    return out
  }

  /** Whether `spent` and the estimate pass the budget; when they do, says so in `exceeded`. */
  private refuse(s: Scope, spent: Spend, limit: {tokens?: number; usd?: number}, estimate: Spend, siblings: number): boolean {
    const {scope, budget, owner} = s
    const overTokens = limit.tokens !== undefined && spent.tokens + estimate.tokens > limit.tokens
    const overUsd = limit.usd !== undefined && spent.usd + estimate.usd > limit.usd
    if (!overTokens && !overUsd) return false
    const what = `${owner ? `parent run ${owner.run_id}'s ` : ''}${scope === PIPELINE_SCOPE ? (owner ? 'pipeline budget' : "the pipeline's budget") : `step ${scope}'s budget`}`
    const spentText = `${tokensText(spent.tokens)}${limit.usd !== undefined ? ` (${usdText(spent.usd, budget.cost_usd)})` : ''}`
    const limitText = [limit.tokens !== undefined ? tokensText(limit.tokens) : '', limit.usd !== undefined ? usdText(limit.usd, budget.cost_usd) : '']
      .filter(Boolean)
      .join(' and ')
    const under = siblings > 0 ? `, ${siblings} other running step(s)' requests included` : ''
    const reason = `step ${this.of.step.id}'s next model request (about ${tokensText(estimate.tokens)}) would pass ${what} of ${limitText}: ${spentText} spent so far${under}; it was not sent`
    this.exceeded = {
      on_exceed: budget.on_exceed ?? 'pause',
      reason,
      pending: {
        scope,
        ...(owner ? {run_id: owner.run_id} : {}),
        ...(limit.tokens !== undefined ? {limit_tokens: limit.tokens} : {}),
        ...(limit.usd !== undefined ? {limit_usd: limit.usd} : {}),
        spent_tokens: spent.tokens,
        spent_usd: spent.usd,
        estimate_tokens: estimate.tokens,
        ...(this.running.tokens > 0
          ? {unrecorded: {step: this.of.step.id, prompt_tokens: this.running.prompt_tokens, completion_tokens: this.running.completion_tokens}}
          : {}),
      },
    }
    return true
  }
}

export type BudgetGrant = NonNullable<RunRecord['budget_grants']>[number]

/**
 * Records a raised budget on the run and its timeline (budget_granted), the one place both a run's
 * own grant (pipe budget RUN) and a parent's grant for its paused children (`because`) write it.
 */
export async function recordBudgetGrant(
  store: RunStore,
  runId: string,
  grant: BudgetGrant,
  line: {step: string; because?: string; extra?: Record<string, unknown>},
): Promise<void> {
  const raised = [grant.tokens !== undefined ? tokensText(grant.tokens) : '', grant.usd !== undefined ? usdText(grant.usd) : ''].filter(Boolean).join(' and ')
  const scope = grant.scope === PIPELINE_SCOPE ? "the pipeline's budget" : `step ${grant.scope}'s budget`
  await store.updateRun(
    runId,
    (r) => {
      r.budget_grants = [...(r.budget_grants ?? []), grant]
      r.updated_at = grant.at
    },
    {
      at: grant.at,
      event: 'budget_granted',
      step: line.step,
      reason: `${raised} more for ${scope}${line.because ? `, ${line.because}` : ''}${grant.note ? `: ${grant.note}` : ''}`,
      by: grant.by,
      ...line.extra,
    },
  )
}
