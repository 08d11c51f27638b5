/**
 * Rules over each step and its names: ids, kinds, outcomes, the steps it names, its expressions,
 * the kind's own checks, and the gates steps use. Each rule is small and named; its findings are
 * diagnostics at file:line:col (rules/index.ts runs them in order).
 */
import {didYouMean} from '../../util/suggest.js'
import type {Pipeline} from '../../types/pipeline.js'
import {outcomesOf} from '../catalog.js'
import {formatPath, type Diagnostic} from '../diagnostics.js'
import {checkExpressions, templatedStrings} from '../expressions.js'
import {checkDeclarations, type InputDeclaration} from '../../expr/inputs.js'
import type {KindCatalog, KindFinding} from '../kind-contract.js'
import type {Segment} from '../loaded.js'
import {diag, origin} from '../positions.js'
import {linksOf} from '../step-links.js'
import {locate} from '../yaml-source.js'
import type {Rule} from './rule.js'

// Only steps' fields are resolved at run time (engine/expressions.ts); elsewhere a ${{ }} would
// be used as written: a model name, a default, a gate pattern. Outputs' values are the exception.
export const expressionPlace: Rule = {
  name: 'expression-place',
  check(loaded) {
    return (
      Object.entries(loaded.pipeline)
        .filter(([key]) => key !== 'steps' && key !== 'overlay')
        .flatMap(([key, value]) => templatedStrings(value, [key]))
        // An output's value is evaluated when the run ends (engine/run-outputs.ts); a declared tool's
        // argv is a template over its call's arguments (rules/tools.ts checks it).
        .filter(({segments}) => !(segments[0] === 'outputs' && segments.length === 3 && segments[2] === 'value'))
        .filter(({segments}) => !(segments[0] === 'tools' && segments[2] === 'argv'))
        .map(({segments}) =>
          diag(
            loaded,
            segments,
            `\${{ }} is not evaluated in ${formatPath(segments)}: expressions are allowed only in the fields of steps, in outputs.NAME.value and in tools.NAME.argv`,
          ),
        )
    )
  },
}

export const duplicateStepId: Rule = {
  name: 'duplicate-step-id',
  check(loaded) {
    const first = new Map<string, number>()
    const out: Diagnostic[] = []
    // Composed, the step of the deeper base came first: the one the child added is the duplicate.
    const depth = (i: number): number => (loaded.composition ? loaded.composition.files.indexOf(loaded.composition.steps[i]!.source) : 0)
    const order = loaded.pipeline.steps.map((_, i) => i).sort((x, y) => depth(y) - depth(x) || x - y)
    order.forEach((i) => {
      const step = loaded.pipeline.steps[i]!
      const seen = first.get(step.id)
      if (seen === undefined) first.set(step.id, i)
      else {
        const first = origin(loaded, ['steps', seen, 'id'])
        const here = origin(loaded, ['steps', i, 'id'])
        const where = `line ${locate(first.source, first.segments).line}${first.source === here.source ? '' : ` of ${first.source.file}`}`
        out.push(
          diag(
            loaded,
            ['steps', i, 'id'],
            `duplicate step id "${step.id}" (first defined on ${where})${loaded.composition ? '; to put a step in the place of one of the base, use an overlay replace' : ''}`,
          ),
        )
      }
    })
    return out
  },
}

export const unknownStep: Rule = {
  name: 'unknown-step',
  check(loaded, {catalog}) {
    const ids = loaded.pipeline.steps.map((s) => s.id)
    const known = new Set(ids)
    return references(loaded.pipeline, catalog)
      .filter((ref) => !known.has(ref.target))
      .map((ref) => {
        const removed = loaded.composition?.removed[ref.target]
        if (!removed) return diag(loaded, ref.segments, `unknown step "${ref.target}" in ${ref.what}${didYouMean(ref.target, ids)}`)
        const by = `${removed.source.file}:${locate(removed.source, removed.segments).line}`
        if (!ref.route) {
          // A remove's next re-points routes only: a step that names the removed one for what it is (a checkpoint) needs another.
          return diag(
            loaded,
            ref.segments,
            `${ref.what} is step "${ref.target}", which the overlay removes (${by}); re-point it: name another step, or replace "${ref.target}" instead of removing it`,
          )
        }
        const what = ref.what === 'start' ? 'start names step' : `${ref.what} into step`
        return diag(
          loaded,
          ref.segments,
          `${what} "${ref.target}", which the overlay removes (${by}); re-point it: give the remove a next ({remove: ${ref.target}, next: STEP}), or replace this step`,
        )
      })
  },
}

/** Every place a step id is referenced, with its path for error positions. */
function references(pipeline: Pipeline, catalog: KindCatalog): Array<{segments: Segment[]; target: string; what: string; route: boolean}> {
  const refs: Array<{segments: Segment[]; target: string; what: string; route: boolean}> = []
  if (pipeline.start !== undefined) refs.push({segments: ['start'], target: pipeline.start, what: 'start', route: true})
  pipeline.steps.forEach((step, i) => {
    for (const link of linksOf(step, catalog))
      refs.push({segments: ['steps', i, ...link.at], target: link.target, what: link.what, route: link.route !== undefined})
  })
  return refs
}

export const unregisteredKind: Rule = {
  name: 'unregistered-kind',
  check(loaded, {catalog}) {
    const kinds = Object.keys(catalog)
    return loaded.pipeline.steps.flatMap((step, i) =>
      catalog[step.kind] ? [] : [diag(loaded, ['steps', i, 'kind'], `step kind "${step.kind}" has no handler registered${didYouMean(step.kind, kinds)}`)],
    )
  },
}

export const unknownOutcome: Rule = {
  name: 'unknown-outcome',
  check(loaded, {catalog}) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      const info = catalog[step.kind]
      if (!info) return
      const outcomes = outcomesOf(step, catalog, loaded.pipeline)
      for (const outcome of Object.keys(step.on ?? {})) {
        if (!outcomes.includes(outcome)) {
          out.push(
            diag(
              loaded,
              ['steps', i, 'on', outcome],
              `a ${step.kind} step has no outcome "${outcome}"${didYouMean(outcome, outcomes)} (outcomes: ${outcomes.join(', ')})`,
              true,
            ),
          )
        }
      }
    })
    return out
  },
}

/**
 * Every `${{ }}` in the steps, checked with the checker the loader loaded for this pipeline. The
 * loader loads one whenever a step holds `${{` (expressionChecker), so without one there is nothing
 * in the steps to check, and only the inputs' declarations are.
 */
export const expression: Rule = {
  name: 'expression',
  check(loaded, {catalog, checker}) {
    if (checker) return checkExpressions(loaded, catalog, checker)
    return checkDeclarations((loaded.pipeline.inputs ?? {}) as Record<string, InputDeclaration>).map((problem) =>
      diag(loaded, problem.input !== undefined ? ['inputs', problem.input] : ['inputs'], problem.message),
    )
  },
}

// Each kind's own checks of its steps (a gate step's gate names, an edit's blocks, a rollback's
// target); the findings carry their own rule names.
export const kindCheck: Rule = {
  name: 'kind-check',
  check(loaded, {catalog, tolerant}) {
    const out: Diagnostic[] = []
    loaded.pipeline.steps.forEach((step, i) => {
      const info = catalog[step.kind]
      if (!info?.check) return
      let findings: KindFinding[] = []
      try {
        findings = info.check(step, loaded)
      } catch (error) {
        if (!tolerant) throw error
        return
      }
      for (const f of findings) out.push({...diag(loaded, ['steps', i, ...f.at], f.message, f.key ?? false), rule: f.rule})
    })
    return out
  },
}

export const gateRule: Rule = {
  name: 'gate-rule',
  check(loaded) {
    const out: Diagnostic[] = []
    for (const [name, gate] of Object.entries(loaded.pipeline.gates ?? {})) {
      gate?.rules.forEach((rule, j) => {
        const at: Segment[] = ['gates', name, 'rules', j]
        const checks = ['required', 'min_items', 'max_items', 'min_length', 'pattern', 'enum'] as const
        if (!checks.some((c) => rule[c] !== undefined)) {
          out.push(diag(loaded, at, `gate rule on "${rule.path}" names no check; add one of: ${checks.join(', ')}`))
        }
        if (rule.pattern !== undefined) {
          try {
            new RegExp(rule.pattern, 'u')
          } catch (error) {
            out.push(diag(loaded, [...at, 'pattern'], `invalid regular expression: ${(error as Error).message}`))
          }
        }
        if (rule.min_items !== undefined && rule.max_items !== undefined && rule.min_items > rule.max_items) {
          out.push(diag(loaded, [...at, 'max_items'], `max_items ${rule.max_items} is below min_items ${rule.min_items}`))
        }
      })
    }
    return out
  },
}
