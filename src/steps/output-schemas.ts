/**
 * What a step's outputs are declared to be, the one source for `pipe validate` (what
 * `${{ steps.<id>.outputs.… }}` may read), the engine's run-time check and the types handlers
 * return: each kind's schemas/kinds/KIND.outputs.json, composed by the build into
 * schemas/step-outputs.schema.json. A kind may narrow its declaration for one step
 * (StepHandler.outputsSchema: a command's parse, a choice's targets, a model's output_schema);
 * what the engine itself adds (spec_version_out) is declared once, in that file's engineAdded, for
 * every step whose kind writes a spec version.
 */
import type {JsonSchema, JsonSchemaLike} from '../expr/index.js'
import {loadSchema} from '../schema/registry.js'
import {changesSpec, type StepHandler, type StepKind, type StepOf} from './types.js'

type Schema = Record<string, unknown>

let composed: {definitions: Record<string, Schema>} | undefined

function definitions(): Record<string, Schema> {
  composed ??= loadSchema('step-outputs') as {definitions: Record<string, Schema>}
  return composed.definitions
}

/** A kind's declaration, whole (the file's shared parts inlined), so it reads on its own. */
export function kindOutputsSchema(kind: StepKind): Schema {
  const name = `${kind.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())}Outputs`
  const schema = definitions()[name]
  if (schema === undefined) throw new Error(`schemas/step-outputs.schema.json declares no outputs for the kind ${kind} (${name})`)
  return inlined(schema) as Schema
}

/** What the engine adds to the outputs of a step that writes a spec version. */
export function engineAddedOutputs(): Record<string, JsonSchema> {
  return (definitions()['engineAdded']!['properties'] ?? {}) as Record<string, JsonSchema>
}

/** The outputs a step of this handler's kind declares: the kind's (narrowed for the step where the kind does), with what the engine adds. */
export function declaredOutputs<K extends StepKind>(handler: StepHandler<K>, step: StepOf<K>, pipeline: {dir: string}): JsonSchemaLike {
  const own = handler.outputsSchema ? handler.outputsSchema(step, pipeline) : kindOutputsSchema(handler.kind)
  if (!changesSpec(handler, step) || typeof own !== 'object' || own === null) return own
  const schema = own as Schema
  return {...schema, properties: {...(schema['properties'] as Schema | undefined), ...engineAddedOutputs()}}
}

/** The kind's declaration with some fields' schemas replaced for one step, and some dropped (they never occur for it). */
export function narrowed(kind: StepKind, properties: Record<string, JsonSchema>, without: readonly string[] = []): Schema {
  const schema = kindOutputsSchema(kind)
  const kept = Object.entries(schema['properties'] as Schema).filter(([name]) => !without.includes(name))
  return {...schema, properties: {...Object.fromEntries(kept), ...properties}}
}

function inlined(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(inlined)
  if (node === null || typeof node !== 'object') return node
  const ref = (node as Schema)['$ref']
  if (typeof ref === 'string' && ref.startsWith('#/definitions/')) {
    const target = definitions()[ref.slice('#/definitions/'.length)]
    if (target === undefined) throw new Error(`schemas/step-outputs.schema.json: ${ref} names no definition`)
    return inlined(target)
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, inlined(value)]))
}
