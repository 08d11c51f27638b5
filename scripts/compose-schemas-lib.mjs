import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'

/**
 * The schema files the build composes from schemas/kinds/ and schemas/parts/, so that each step
 * kind's config and outputs live in files of their own while editors (and the validators) keep
 * one document each:
 * - schemas/pipeline.schema.json: parts/pipeline.json with every kind's KIND.config.json as the
 *   definition KINDStep (camelCase) and the step union over them, in the order of stepKind's enum;
 * - schemas/step-outputs.schema.json: parts/step-outputs.json with every kind's KIND.outputs.json
 *   as the definition KINDOutputs, and a record {kind, outputs} discriminated by kind.
 * Returns Map<path relative to the root, text>.
 */
export async function composeSchemas(root) {
  const schemas = path.join(root, 'schemas')
  const read = async (file) => JSON.parse(await readFile(path.join(schemas, file), 'utf8'))
  const pipeline = await read('parts/pipeline.json')
  const kinds = pipeline.definitions?.stepKind?.enum
  if (!Array.isArray(kinds)) throw new Error('schemas/parts/pipeline.json: definitions.stepKind.enum must list the step kinds')
  const files = (await readdir(path.join(schemas, 'kinds'))).filter((f) => f.endsWith('.json'))
  const problems = []
  for (const file of files) {
    const match = /^([a-z_]+)\.(config|outputs)\.json$/.exec(file)
    if (!match) problems.push(`schemas/kinds/${file}: not KIND.config.json or KIND.outputs.json`)
    else if (!kinds.includes(match[1])) problems.push(`schemas/kinds/${file}: ${match[1]} is not in stepKind's enum (schemas/parts/pipeline.json)`)
  }
  for (const kind of kinds) {
    for (const part of ['config', 'outputs']) if (!files.includes(`${kind}.${part}.json`)) problems.push(`schemas/kinds/${kind}.${part}.json is missing`)
  }
  if (problems.length > 0) throw new Error(problems.join('\n'))

  const stepDefs = {}
  const outputDefs = {}
  for (const kind of kinds) {
    stepDefs[`${camel(kind)}Step`] = await read(`kinds/${kind}.config.json`)
    outputDefs[`${camel(kind)}Outputs`] = await read(`kinds/${kind}.outputs.json`)
  }
  const composedPipeline = {
    ...pipeline,
    definitions: insertAfter(
      {...pipeline.definitions, step: {...pipeline.definitions.step, oneOf: kinds.map((kind) => ({$ref: `#/definitions/${camel(kind)}Step`}))}},
      'stepCommon',
      stepDefs,
    ),
  }
  const frame = await read('parts/step-outputs.json')
  const composedOutputs = {
    ...frame,
    type: 'object',
    required: ['kind', 'outputs'],
    discriminator: {propertyName: 'kind'},
    oneOf: kinds.map((kind) => ({
      type: 'object',
      properties: {kind: {const: kind}, outputs: {$ref: `#/definitions/${camel(kind)}Outputs`}},
      required: ['kind', 'outputs'],
      additionalProperties: false,
    })),
    definitions: {...frame.definitions, ...clash(frame.definitions, outputDefs)},
  }
  const text = (doc) => `${JSON.stringify(doc, null, 2)}\n`
  return new Map([
    ['schemas/pipeline.schema.json', text(composedPipeline)],
    ['schemas/step-outputs.schema.json', text(composedOutputs)],
  ])
}

/** A kind's name in definitions: clarify_questions -> clarifyQuestions. */
export function camel(kind) {
  return kind.replace(/_([a-z])/g, (_, c) => c.toUpperCase())
}

function insertAfter(definitions, key, added) {
  const out = {}
  for (const [name, def] of Object.entries(clash(definitions, added) && definitions)) {
    out[name] = def
    if (name === key) Object.assign(out, added)
  }
  if (!Object.hasOwn(definitions, key)) throw new Error(`schemas/parts/pipeline.json: definitions.${key} is missing`)
  return out
}

function clash(into, added) {
  const taken = Object.keys(added).filter((name) => Object.hasOwn(into, name))
  if (taken.length > 0) throw new Error(`schemas/parts: definitions ${taken.join(', ')} are also composed from schemas/kinds/`)
  return added
}
