/**
 * The engine's check of what a step produced against what its kind declares
 * (schemas/kinds/KIND.outputs.json, composed into schemas/step-outputs.schema.json): every field
 * declared, each of its declared type. A kind that breaks its declaration is a bug in the kind; the
 * step ends failed with an error naming the kind and the fields, instead of a snapshot that
 * `pipe validate` refuses to let expressions read and later steps misread.
 *
 * A shipped kind is checked by the build's compiled validator of its declaration (in outputs.cjs,
 * every kind's in one script, loaded when a step first ends: no schema is compiled at run time). A handler that declares outputs of its own (an injected registry's
 * stand-in with an outputsSchema the shipped kind does not have) is checked against that
 * declaration, compiled on first use.
 */
import type {ErrorObject, ValidateFunction} from 'ajv'
import {compileOutputSchema} from '../config/output-schema.js'
import type {LoadedPipeline} from '../config/loaded.js'
import {stepDir} from '../config/positions.js'
import {PipeError} from '../errors.js'
import {compileSchema, kindOutputsValidator} from '../schema/registry.js'
import {kindOutputsSchema} from '../steps/output-schemas.js'
import {handlerNamed} from '../steps/registry.js'
import type {StepHandler, StepKind, StepOf, StepResult} from '../steps/types.js'

/** The result as the engine records it, once its outputs are found to match the declaration; else a PipeError (E_INTERNAL). */
export function checkedOutputs<K extends StepKind>(handler: StepHandler<K>, step: StepOf<K>, pipeline: LoadedPipeline, result: StepResult<object>): StepResult {
  if (result.type !== 'done') return result
  const own = handler.outputsSchema !== undefined && handler.outputsSchema !== handlerNamed(handler.kind)?.outputsSchema
  if (own) {
    const declared = compileOutputSchema(handler.outputsSchema!(step, {dir: stepDir(pipeline, step.id)}))
    const problems = typeof declared === 'string' ? `its declaration ${declared}` : declared.check(result.outputs)
    if (problems !== null) throw outputsError(handler.kind, step.id, [problems], 'its outputsSchema')
  } else {
    const validate = kindValidator(handler.kind)
    if (!validate(result.outputs))
      throw outputsError(
        handler.kind,
        step.id,
        [...new Set((validate.errors ?? []).map((e) => problem(handler.kind, e)))],
        `schemas/kinds/${handler.kind}.outputs.json`,
      )
  }
  return result as StepResult
}

const validators = new Map<StepKind, ValidateFunction>()

function kindValidator(kind: StepKind): ValidateFunction {
  let validate = validators.get(kind)
  if (!validate) {
    validate = kindOutputsValidator(kind) ?? compileSchema(kindOutputsSchema(kind))
    validators.set(kind, validate)
  }
  return validate
}

function outputsError(kind: string, stepId: string, problems: readonly string[], where: string): PipeError {
  const shown = problems.slice(0, 10).join('; ') + (problems.length > 10 ? `; and ${problems.length - 10} more` : '')
  return new PipeError('E_INTERNAL', `step ${stepId}: the ${kind} kind produced outputs its declaration does not allow: ${shown}`, {
    hint: `This is a bug in the ${kind} kind: what its handler returns must match ${where} (declare the field there, or stop returning it).`,
    details: {kind, step: stepId, problems},
  })
}

/** One problem in words, naming the field (never its value: outputs may hold secrets the record redacts). */
function problem(kind: StepKind, error: ErrorObject): string {
  const path = error.instancePath.split('/').slice(1)
  const at = `outputs${path.map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part.replace(/~1/g, '/').replace(/~0/g, '~')}`)).join('')}`
  const params = error.params as Record<string, unknown>
  if (error.keyword === 'additionalProperties') {
    const declared = Object.keys((schemaAt(kindOutputsSchema(kind), error.schemaPath) as {properties?: object} | undefined)?.properties ?? {})
    return `${at}.${String(params['additionalProperty'])} is not declared${declared.length > 0 ? ` (declared: ${declared.join(', ')})` : ' (it declares no fields)'}`
  }
  if (error.keyword === 'required') return `${at}.${String(params['missingProperty'])} is declared required and missing`
  if (error.keyword === 'enum') return `${at} is not one of ${(params['allowedValues'] as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`
  return `${at} ${error.message ?? error.keyword}`
}

/** The object schema whose keyword failed ("#/properties/a/additionalProperties": the schema at /properties/a). */
function schemaAt(root: unknown, schemaPath: string): unknown {
  let node = root
  for (const part of schemaPath.replace(/^#\//, '').split('/').slice(0, -1)) {
    if (node === null || typeof node !== 'object') return undefined
    node = (node as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  return node
}
