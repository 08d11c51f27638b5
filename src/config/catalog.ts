/** What the loader derives from the kind contract for one step (the catalog is keyed by kind). */
import type {Budget, Step} from '../types/pipeline.js'
import type {KindCatalog} from './kind-contract.js'

/** Whether a step writes a spec version when it succeeds (a kind may decide per step). */
export function writesSpec(catalog: KindCatalog, step: Step): boolean {
  const changes = catalog[step.kind]?.changesSpec
  return typeof changes === 'function' ? changes(step) : changes === true
}

/**
 * Outcomes `steps.<id>.outcome` can hold: the kind's, error (a routed failure), denied (a person
 * refused it at a confirmation, which step's confirm: or the policy's confirm rules ask for) and
 * skipped (a false when:), and over_budget when a budget over it fails the step (on_exceed: fail).
 */
export function outcomesOf(step: Step, catalog: KindCatalog, pipeline?: {budget?: Budget}): string[] {
  const info = catalog[step.kind]
  const own = info ? [...info.outcomes(step)] : []
  const failsOverBudget = step.budget?.on_exceed === 'fail' || pipeline?.budget?.on_exceed === 'fail'
  return [...new Set([...own, 'error', 'denied', ...(step.when !== undefined ? ['skipped'] : []), ...(failsOverBudget ? ['over_budget'] : [])])]
}

/**
 * The outcomes of a step's kind that mean it failed (an on: entry routes them, next: does not),
 * as far as this step can give them: a write with mode overwrite never finds the file "exists".
 */
export function failureOutcomes(catalog: KindCatalog, step: Step): string[] {
  const info = catalog[step.kind]
  if (!info) return []
  const possible = new Set(info.outcomes(step))
  return Object.keys(info.failures ?? {}).filter((outcome) => possible.has(outcome))
}
