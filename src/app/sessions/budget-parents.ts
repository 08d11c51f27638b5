/**
 * The budgets above a child run, read from the records (issue 40). A parent driving its children
 * itself hands them down (engine/children.ts); a child continued on its own — a job of a queue that
 * `pipe worker` drives, or `pipe resume CHILD` — finds them here: each run above it, its pipeline
 * as it ran, and the step that started the run below, so the child's requests count against its
 * parents' budgets wherever it runs, and its prices are its parents' when its pipeline gives none.
 */
import type {BudgetParent} from '../../engine/budget.js'
import type {RunSettings} from '../../engine/engine.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {loadPipelineOrThrow} from './shared.js'

export async function budgetParentsOf(
  store: RunStore,
  record: RunRecord,
  here: (file: string) => string,
): Promise<Pick<RunSettings, 'budgetParents' | 'inheritedPrices'>> {
  // Nearest first, as the engine hands them down.
  const chain: Array<Omit<BudgetParent, 'inherited'>> = []
  for (let link = record.parent; link;) {
    const parent = await store.readRun(link.run_id)
    const {pipeline} = await loadPipelineOrThrow(here(parent.pipeline.path))
    const step = pipeline.steps.find((s) => s.id === link!.step)
    // A parent whose pipeline no longer has the step cannot be continued either: its own resume says so.
    if (!step) break
    chain.push({run_id: parent.run_id, pipeline, step})
    link = parent.parent
  }
  if (chain.length === 0) return {}
  // Prices pass down as children.ts passes them: a pipeline's own, else what it inherited.
  const parents: BudgetParent[] = []
  let inherited: BudgetParent['inherited']
  for (const p of chain.toReversed()) {
    parents.unshift({...p, ...(inherited ? {inherited} : {})})
    inherited = p.pipeline.provider?.prices ?? inherited
  }
  return {budgetParents: parents, ...(inherited ? {inheritedPrices: inherited} : {})}
}
