import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {compile} from 'json-schema-to-typescript'

const banner = '/* eslint-disable */\n// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.\n'

/** Returns Map<fileName, text> of the type modules the schemas generate. */
export async function generateTypes(root) {
  const out = new Map()
  const files = []
  for (const [sub, prefix] of [['', ''], ['model', 'model-']]) {
    const dir = path.join(root, 'schemas', sub)
    for (const file of (await readdir(dir)).filter((f) => f.endsWith('.schema.json')).sort()) files.push({dir, file, prefix})
  }
  for (const {dir, file, prefix} of files) {
    const parsed = JSON.parse(await readFile(path.join(dir, file), 'utf8'))
    const filled = FILLED_ON_LOAD.has(file) ? filledDefaults(parsed) : parsed
    const schema = sharedParts(loadedShape(TYPED_AS_PRODUCED.has(file) ? producedShape(filled) : filled))
    const text = await compile(schema, schema.title, {
      bannerComment: banner,
      additionalProperties: false,
      strictIndexSignatures: true,
      unreachableDefinitions: true,
      format: true,
      style: {singleQuote: true, semi: false, printWidth: 120},
      cwd: dir,
    })
    out.set(prefix + file.replace('.schema.json', '.ts').replace(/_/g, '-'), text)
  }
  return out
}

/**
 * The types describe documents as the program holds them after loading. A key the schema requires
 * only when another is absent (a pipeline's steps, unless it extends another pipeline) is always
 * there once loaded (composition fills it), so the types require it; json-schema-to-typescript
 * would otherwise drop the condition and make it optional.
 */
function loadedShape(schema) {
  const absent = schema.if?.not?.required
  const then = schema.then?.required
  if (!Array.isArray(absent) || !Array.isArray(then) || schema.else !== undefined) return schema
  const {if: _if, then: _then, ...rest} = schema
  return {...rest, required: [...(rest.required ?? []), ...then]}
}

/**
 * Formats whose loading fills every top-level key the file leaves out from the schema's default (a
 * policy file states only what differs from the built-in policy): once loaded the key is always
 * there, so the types require it. Elsewhere a default is only applied where the value is read.
 */
const FILLED_ON_LOAD = new Set(['policy.schema.json'])

function filledDefaults(schema) {
  const filled = Object.entries(schema.properties ?? {}).filter(([, property]) => property.default !== undefined).map(([key]) => key)
  if (filled.length === 0) return schema
  return {...schema, required: [...new Set([...(schema.required ?? []), ...filled])]}
}

/**
 * A definition that shares fields by allOf and adds its own (each step kind: the common step fields,
 * then the kind's) becomes an intersection type. json-schema-to-typescript drops `properties` beside
 * `allOf`, so the definition's own part moves into the allOf as one more member; its closedness
 * (unevaluatedProperties) is the validator's business, not the type's.
 */
function sharedParts(schema) {
  const definitions = schema.definitions ?? {}
  const out = {}
  for (const [name, def] of Object.entries(definitions)) {
    if (!Array.isArray(def.allOf) || def.properties === undefined) {
      out[name] = def
      continue
    }
    const {allOf, properties, required, unevaluatedProperties: _closed, type, ...meta} = def
    // The tag a definition fixes (a step's kind) is required by the shared part; say so here too, so the union discriminates plainly.
    const own = [...new Set([...(properties.kind?.const !== undefined ? ['kind'] : []), ...(required ?? [])])]
    out[name] = {...meta, allOf: [...allOf, {type, properties, ...(own.length ? {required: own} : {}), additionalProperties: false}]}
  }
  return {...schema, definitions: out}
}

/**
 * Step outputs (schemas/step-outputs.schema.json) type what a handler returns, and handlers return
 * values of types declared elsewhere (a provider's Citation, a gate's GateResult), which TypeScript
 * will not assign to an index signature they lack. So for the types: an open object (extra fields
 * allowed, unchecked) is typed by its declared fields only, and an object whose declared fields sit
 * beside a schema for any other key (a gate result: its totals, then one entry per gate) gets an
 * index signature that admits both. The validator checks the schema as written.
 */
const TYPED_AS_PRODUCED = new Set(['step-outputs.schema.json'])

function producedShape(node) {
  if (Array.isArray(node)) return node.map(producedShape)
  if (node === null || typeof node !== 'object') return node
  const out = Object.fromEntries(Object.entries(node).map(([key, value]) => [key, key === 'properties' || key === 'definitions' ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, producedShape(v)])) : producedShape(value)]))
  if (out.additionalProperties === true) delete out.additionalProperties
  else if (typeof out.additionalProperties === 'object' && out.properties !== undefined) {
    out.additionalProperties = {anyOf: [out.additionalProperties, ...Object.values(out.properties)]}
  }
  return out
}
