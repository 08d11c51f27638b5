/**
 * Rules over the routes through a pipeline: outcomes that take no route, steps no path reaches,
 * cycles with no bound, and the paths on which a step needs a spec none wrote (an error when no
 * path writes one, a warning when some do not). The warnings (advice) live here too: a failure or
 * an error with no route.
 */
import type {Step} from '../../types/pipeline.js'
import {failureOutcomes, writesSpec} from '../catalog.js'
import type {Diagnostic} from '../diagnostics.js'
import {cycles, edgesOf, reachableFrom, specReach, startStepId} from '../graph.js'
import type {KindCatalog, WorkingTreeRole} from '../kind-contract.js'
import type {LoadedPipeline} from '../loaded.js'
import {diag} from '../positions.js'
import type {Rule} from './rule.js'

export const routeOnStop: Rule = {
  name: 'route-on-stop',
  check(loaded, {catalog}) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      const stops = catalog[step.kind]?.stops ?? {}
      for (const outcome of Object.keys(step.on ?? {})) {
        const effect = stops[outcome]
        if (effect)
          out.push(
            diag(
              loaded,
              ['steps', i, 'on', outcome],
              `outcome "${outcome}" of a ${step.kind} step ${effect === 'cancelled' ? 'cancels the run' : 'waits at the step again'}; it takes no route`,
              true,
            ),
          )
      }
    })
    return out
  },
}

export const unreachableStep: Rule = {
  name: 'unreachable-step',
  check(loaded, {catalog}) {
    const start = startStepId(loaded.pipeline)
    if (!loaded.pipeline.steps.some((s) => s.id === start)) return []
    const reachable = reachableFrom(loaded.pipeline, catalog, start)
    // A route the run can take that names no step (a typo: unknown-step reports it) may have been
    // meant for any step past it: what it leaves unreached is its consequence, not a second error.
    const ids = new Set(loaded.pipeline.steps.map((s) => s.id))
    const broken = loaded.pipeline.steps.some((step) => reachable.has(step.id) && edgesOf(step, catalog).some((edge) => !ids.has(edge.to)))
    if (broken) return []
    return loaded.pipeline.steps.flatMap((step, i) =>
      reachable.has(step.id) ? [] : [diag(loaded, ['steps', i, 'id'], `step "${step.id}" is unreachable from the start step "${start}"`)],
    )
  },
}

export const unboundedCycle: Rule = {
  name: 'unbounded-cycle',
  check(loaded, {catalog}) {
    const index = new Map(loaded.pipeline.steps.map((s, i) => [s.id, i]))
    return cycles(loaded.pipeline, catalog)
      .filter((component) => !component.some((id) => loaded.pipeline.steps[index.get(id)!]?.max_iterations !== undefined))
      .map((component) => {
        const i = index.get(component[0]!)!
        return diag(loaded, ['steps', i, 'id'], `steps ${component.join(' -> ')} form a cycle with no bound; set max_iterations on one of them`)
      })
  },
}

export const exhaustedWithoutBound: Rule = {
  name: 'exhausted-without-bound',
  check(loaded) {
    return loaded.pipeline.steps.flatMap((step, i) =>
      step.on_exhausted !== undefined && step.max_iterations === undefined
        ? [diag(loaded, ['steps', i, 'on_exhausted'], `on_exhausted needs max_iterations on step "${step.id}"`)]
        : [],
    )
  },
}

const specUse = new WeakMap<LoadedPipeline, {none: Diagnostic[]; some: Diagnostic[]}>()

/**
 * Steps that need a spec where none may exist yet, from one walk of the paths (it serves the error
 * and the warning alike): `none`, no path to the step writes a spec before it (an error);
 * `some`, some paths do and others do not (a warning: those fail with E_STATE).
 */
function specBeforeUse(loaded: LoadedPipeline, catalog: KindCatalog): {none: Diagnostic[]; some: Diagnostic[]} {
  let found = specUse.get(loaded)
  if (found) return found
  const reach = specReach(loaded.pipeline, catalog, (step) => writesSpec(catalog, step))
  found = {none: [], some: []}
  for (const [i, step] of loaded.pipeline.steps.entries()) {
    if (!catalog[step.kind]?.needsSpec || !reach.without.has(step.id)) continue
    if (reach.with.has(step.id))
      found.some.push(
        diag(
          loaded,
          ['steps', i, 'id'],
          `a ${step.kind} step needs a spec, but on some path from the start no step before "${step.id}" writes one; that path fails with E_STATE`,
        ),
      )
    else
      found.none.push(
        diag(
          loaded,
          ['steps', i, 'id'],
          `a ${step.kind} step needs a spec, but no step before "${step.id}" writes one on any path from the start (put a step that writes a spec, such as compile, before it)`,
        ),
      )
  }
  specUse.set(loaded, found)
  return found
}

/** No path from the start writes a spec before a step that needs one (judged once every other rule holds). */
export const specBeforeUseError: Rule = {
  name: 'spec-before-use',
  check: (loaded, {catalog}) => specBeforeUse(loaded, catalog).none,
}

/** Some paths write a spec before a step that needs one, others do not (a warning). */
export const specBeforeUseWarning: Rule = {
  name: 'spec-before-use',
  check: (loaded, {catalog}) => specBeforeUse(loaded, catalog).some,
}

export const unroutedFailure: Rule = {
  name: 'unrouted-failure',
  check(loaded, {catalog}) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      for (const outcome of failureOutcomes(catalog, step)) {
        if (step.on?.[outcome] !== undefined) continue
        out.push(
          diag(
            loaded,
            ['steps', i, 'id'],
            `failure outcome "${outcome}" of step "${step.id}" has no route, so it ends the run failed${step.next !== undefined ? ' (next: is not taken on a failure)' : ''}; add on: {${outcome}: STEP} to handle it`,
          ),
        )
      }
    })
    return out
  },
}

// Between a checkpoint and the rollback to it the working tree may hold changes: an error with no route would end the run with them neither committed nor rolled back.
export const unroutedErrorBeforeRollback: Rule = {
  name: 'unrouted-error-before-rollback',
  check(loaded, {catalog}) {
    const {steps} = loaded.pipeline
    const byId = new Map(steps.map((step) => [step.id, step]))
    const warned = new Set<string>()
    const out: Diagnostic[] = []
    const role = (step: Step): WorkingTreeRole => catalog[step.kind]?.workingTree?.(step) ?? {}
    for (const rollback of steps) {
      const to = role(rollback).rollbackTo
      if (to === undefined) continue
      const checkpoint = byId.get(to)
      if (!checkpoint) continue
      // The checkpoint's own error changed nothing; a git step (the commit, the rollback) settles the change, an end ends the run.
      const queue = edgesOf(checkpoint, catalog)
        .filter((e) => e.label !== 'error')
        .map((e) => e.to)
      const seen = new Set<string>()
      while (queue.length > 0) {
        const id = queue.shift()!
        const step = byId.get(id)
        if (!step || seen.has(id) || id === checkpoint.id || role(step).ends === true) continue
        seen.add(id)
        if (step.on?.error === undefined && !warned.has(id)) {
          warned.add(id)
          const fix = id === rollback.id ? 'add on: {error: STEP}, STEP an end step that says the rollback failed' : `add on: {error: ${rollback.id}}`
          out.push(
            diag(
              loaded,
              ['steps', steps.indexOf(step), 'id'],
              `step "${id}" runs after checkpoint "${checkpoint.id}" with changes its rollback "${rollback.id}" would undo, but its error has no route: the run would end with them neither committed nor rolled back; ${fix}`,
            ),
          )
        }
        if (role(step).settles !== true) queue.push(...edgesOf(step, catalog).map((e) => e.to))
      }
    }
    return out
  },
}
