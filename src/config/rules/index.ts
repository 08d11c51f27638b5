/**
 * The semantic rules the schema cannot express, in the order they run: each a small named rule in
 * the module of its concern (steps, routes, files). A pipeline with any error is never run; the
 * advice (warnings) is shown by pipe validate and --dry-run.
 */
import {sortDiagnostics, type Diagnostic} from '../diagnostics.js'
import type {KindCatalog} from '../kind-contract.js'
import type {LoadedPipeline, PipelineResult} from '../loaded.js'
import {fileOutsidePipeline, missingFile, modelUnusedVar, promptVariable} from './files.js'
import {
  exhaustedWithoutBound,
  routeOnStop,
  specBeforeUseError,
  specBeforeUseWarning,
  unboundedCycle,
  unreachableStep,
  unroutedErrorBeforeRollback,
  unroutedFailure,
} from './routes.js'
import type {Rule, RuleContext} from './rule.js'
import {budgetPrice} from './budgets.js'
import {scheduleRule} from './schedules.js'
import {customTool} from './tools.js'
import {duplicateStepId, expression, expressionPlace, gateRule, kindCheck, unknownOutcome, unknownStep, unregisteredKind} from './steps.js'

export type {Rule, RuleContext} from './rule.js'

export const pipelineRules: readonly Rule[] = [
  expressionPlace,
  duplicateStepId,
  unknownStep,
  unregisteredKind,
  unknownOutcome,
  expression,
  customTool,
  budgetPrice,
  scheduleRule,
  kindCheck,
  gateRule,
  routeOnStop,
  unreachableStep,
  unboundedCycle,
  exhaustedWithoutBound,
  fileOutsidePipeline,
  missingFile,
  promptVariable,
]

/** Rules over the paths through a pipeline whose graph is otherwise valid. */
export const flowRules: readonly Rule[] = [specBeforeUseError]

/** Problems worth a warning: the pipeline runs, but a path through it may surprise. */
export const pipelineAdvice: readonly Rule[] = [unroutedFailure, unroutedErrorBeforeRollback, modelUnusedVar, specBeforeUseWarning]

function run(rules: readonly Rule[], loaded: LoadedPipeline, context: RuleContext): Diagnostic[] {
  return rules.flatMap((rule) => rule.check(loaded, context).map((d) => ({...d, rule: d.rule || rule.name})))
}

/** Every rule over a pipeline whose structure is valid: its errors, or the pipeline with its warnings. */
export function checkRules(loaded: LoadedPipeline, context: RuleContext): PipelineResult {
  const diagnostics = run(pipelineRules, loaded, context)
  // Where a spec can exist depends on every path being right, so it is judged once the rest holds.
  if (diagnostics.length === 0) diagnostics.push(...run(flowRules, loaded, context))
  if (diagnostics.length > 0) return {ok: false, diagnostics: sortDiagnostics(diagnostics)}
  return {ok: true, loaded, warnings: pipelineWarnings(loaded, context.catalog)}
}

/** The warnings of a valid pipeline (see pipelineAdvice); none of them reads an expression. */
export function pipelineWarnings(loaded: LoadedPipeline, catalog: KindCatalog): Diagnostic[] {
  return sortDiagnostics(pipelineAdvice.flatMap((rule) => rule.check(loaded, {catalog}).map((d) => ({...d, rule: rule.name, severity: 'warning' as const}))))
}

/**
 * The rules that can still say more about a pipeline whose structure is wrong (a misspelt
 * transition next to an unknown key), added to `found` in one pass. They run defensively: a rule
 * that trips over a malformed value reports nothing rather than a confusing error, and a place
 * already reported is not reported again.
 */
export function tolerantFindings(loaded: LoadedPipeline, context: RuleContext, found: readonly Diagnostic[]): Diagnostic[] {
  const diagnostics = [...found]
  const seen = new Set(diagnostics.map((d) => `${d.line}:${d.col}`))
  for (const rule of pipelineRules.filter((r) => r !== unregisteredKind)) {
    let more: Diagnostic[] = []
    try {
      more = rule.check(loaded, {...context, tolerant: true})
    } catch {
      continue
    }
    for (const d of more) {
      if (seen.has(`${d.line}:${d.col}`)) continue
      seen.add(`${d.line}:${d.col}`)
      diagnostics.push({...d, rule: d.rule || rule.name})
    }
  }
  return sortDiagnostics(diagnostics)
}
