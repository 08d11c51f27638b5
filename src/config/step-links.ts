/**
 * The one list of the places a step names another step: its routes (next, on.OUTCOME,
 * on_exhausted, and those its kind declares, like a choice's branches) and the ids it only names
 * (a rollback's checkpoint). The graph (edges), composition (re-pointing on overlay edits), validate
 * (unknown and removed steps) and the engine (fields never resolved) all read it, so a kind that
 * names steps says so once, in its module (StepHandler.references).
 */
import type {Step} from '../types/pipeline.js'
import type {KindCatalog} from './kind-contract.js'
import type {Segment} from './loaded.js'

export interface StepLink {
  /** Where in the step (relative to it). */
  at: Segment[]
  target: string
  /** What it is, for messages: "transition on pass", "choice 2", "rollback target". */
  what: string
  /** The edge label when the run can go there from this step; absent when the step only names it. */
  route?: string
}

/** Every step id `step` names, routes first (on, next, on_exhausted, then the kind's own), then the kind's plain references. */
export function linksOf(step: Step, catalog: KindCatalog): StepLink[] {
  const out: StepLink[] = []
  for (const [outcome, target] of Object.entries(step.on ?? {})) out.push({at: ['on', outcome], target, what: `transition on ${outcome}`, route: outcome})
  if (step.next !== undefined) out.push({at: ['next'], target: step.next, what: 'transition', route: 'next'})
  if (step.on_exhausted !== undefined) out.push({at: ['on_exhausted'], target: step.on_exhausted, what: 'on_exhausted', route: 'exhausted'})
  for (const ref of catalog[step.kind]?.references?.(step) ?? [])
    out.push({at: [...ref.at], target: ref.target, what: ref.what, ...(ref.route ? {route: ref.target} : {})})
  return out
}

/** The top-level fields of a step that name steps: the engine never resolves them (the graph must be what validate saw). */
export function linkFields(step: Step, catalog: KindCatalog): Set<string> {
  return new Set(linksOf(step, catalog).map((link) => String(link.at[0])))
}
