/**
 * A grant of a parent's budget its children paused at (issue 40): a foreach's child run counts
 * against its parent's budgets, and pauses at them (engine/budget.ts), while its parent stops
 * blocked at the step waiting for it. pipe budget PARENT raises the parent's budget — the grant
 * goes on the parent's record, where every child's check reads it — and continues the parent,
 * which continues its children. What the paused children's steps had spent (no snapshot records
 * it: they run again) goes with the grant, counted once, toward the step that started them.
 */
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {currentUser} from '../../util/user.js'
import {recordBudgetGrant, type BudgetGrant} from '../../engine/budget.js'

/** A run below `runId` paused at `runId`'s budget, with the step of `runId` whose child it descends from. */
export interface WaitingChild {
  record: RunRecord
  /** The step of the run owning the budget that started the child (or its ancestor). */
  via: string
}

/** The runs below `runId`, at any depth, paused at one of `runId`'s own budgets. */
export async function childrenAtBudget(store: RunStore, runId: string): Promise<WaitingChild[]> {
  const out: WaitingChild[] = []
  const walk = async (parentId: string, via: string | undefined): Promise<void> => {
    for (const child of await store.listChildren(parentId)) {
      const step = via ?? child.parent?.step ?? ''
      const budget = child.status === 'awaiting_input' && child.pending?.kind === 'budget' ? child.pending.budget : undefined
      if (budget?.run_id === runId) out.push({record: child, via: step})
      await walk(child.run_id, step)
    }
  }
  await walk(runId, undefined)
  return out
}

/**
 * The grant on the owner's record and timeline, under its lock, once per pause of the first
 * waiting child (`for`): a grant given again after its continuation failed is not added twice.
 */
export async function grantParentBudget(
  store: RunStore,
  runId: string,
  waiting: readonly WaitingChild[],
  given: {tokens?: number; usd?: number; note?: string},
  by: string | undefined,
  at: string,
): Promise<void> {
  const first = waiting[0]!
  const pending = first.record.pending!
  const budget = pending.budget!
  const release = await store.acquireRun(runId)
  try {
    const record = await store.readRun(runId)
    if ((record.budget_grants ?? []).some((g) => g.for?.run_id === first.record.run_id && g.for.since === pending.since)) return
    let prompt = 0
    let completion = 0
    for (const w of waiting) {
      const spent = w.record.pending?.budget?.unrecorded
      prompt += spent?.prompt_tokens ?? 0
      completion += spent?.completion_tokens ?? 0
    }
    const grant: BudgetGrant = {
      scope: budget.scope,
      for: {run_id: first.record.run_id, since: pending.since},
      ...(given.tokens !== undefined ? {tokens: given.tokens} : {}),
      ...(given.usd !== undefined ? {usd: given.usd} : {}),
      by: by ?? currentUser(),
      at,
      ...(given.note ? {note: given.note} : {}),
      ...(prompt + completion > 0 ? {unrecorded: {step: first.via, prompt_tokens: prompt, completion_tokens: completion}} : {}),
    }
    const children = waiting.map((w) => w.record.run_id).join(', ')
    await recordBudgetGrant(store, runId, grant, {step: first.via, because: `which child run(s) ${children} paused at`})
  } finally {
    await release()
  }
}
