/**
 * A pipeline's declared `outputs:`, evaluated when a run of it succeeds: each value's expression
 * over the run's inputs, steps and aliases, checked against its declared type. What the run gives
 * its parent (a foreach item's outputs, a pipeline step's outputs.outputs) is recorded in the run
 * record, so a parent that resumes later reads the same values without evaluating anything again.
 */
import {OUTPUT_ARTICLE, fitsOutputType} from '../config/declared-outputs.js'
import {PipeError, isPipeError} from '../errors.js'
import type {ExprContext, ExprEvaluator, JsonValue} from '../expr/index.js'
import type {Pipeline} from '../types/pipeline.js'
import {explained} from './expressions.js'

/** The outputs, or a PipeError (E_CONFIG) naming the first output that failed or is not of its declared type. */
export function evaluateOutputs(pipeline: Pipeline, evaluator: ExprEvaluator, context: ExprContext): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {}
  const bound = evaluator.bind(context)
  for (const [name, decl] of Object.entries(pipeline.outputs ?? {})) {
    if (decl === undefined) continue
    let value: JsonValue
    try {
      value = explained(context, () => bound.render(decl.value))
    } catch (error) {
      if (!isPipeError(error)) throw error
      throw new PipeError('E_CONFIG', `output "${name}" of pipeline ${pipeline.name} could not be evaluated: ${error.message}`, {
        hint: `Fix outputs.${name}.value (guard a step that may not have run with has(steps.X)); pipe validate checks it.`,
        cause: error,
      })
    }
    if (!fitsOutputType(value, decl.type)) {
      const what =
        value === null ? 'null' : Array.isArray(value) ? 'a list' : typeof value === 'object' ? 'a mapping' : `${typeof value} ${clip(JSON.stringify(value))}`
      throw new PipeError(
        'E_CONFIG',
        `output "${name}" of pipeline ${pipeline.name} is declared ${OUTPUT_ARTICLE[decl.type] ?? decl.type}, but ${decl.value.trim()} gave ${what}`,
        {hint: `Make outputs.${name}.value give ${OUTPUT_ARTICLE[decl.type] ?? decl.type} (int(x), string(x), …), or change its type:.`},
      )
    }
    out[name] = value
  }
  return out
}

function clip(text: string): string {
  return text.length > 80 ? `${text.slice(0, 79)}…` : text
}
