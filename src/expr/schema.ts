/**
 * The small part of JSON Schema that expressions need: which fields an object has, what a list
 * holds, and the scalar kind of a value. A schema travels with the document it came from, so a
 * local `$ref` ("#/definitions/item", "#/$defs/item") resolves against its own file.
 */

/** A JSON Schema node: an object, or `true`/`false`. */
export type JsonSchema = boolean | {readonly [key: string]: unknown}

/** What callers may pass as a schema: also interfaces (generated types), which have no index signature. */
export type JsonSchemaLike = boolean | object

export interface SchemaRef {
  readonly schema: JsonSchema
  /** The document `$ref` pointers resolve against. */
  readonly root: JsonSchema
}

/** Anything at all: the checker treats it as CEL `dyn` and checks no field below it. */
export const DYN: SchemaRef = {schema: true, root: true}

export function schemaRef(schema: JsonSchemaLike | undefined | null, root?: JsonSchemaLike): SchemaRef {
  if (schema === undefined || schema === null || Array.isArray(schema)) return DYN
  return {schema: schema as JsonSchema, root: (root ?? schema) as JsonSchema}
}

export type SchemaKind = 'string' | 'integer' | 'number' | 'boolean' | 'null' | 'array' | 'object' | 'dyn'

const MAX_REFS = 32

/** Follows `$ref` and single-branch combinators to the schema that says something; DYN when it cannot. */
export function resolve(ref: SchemaRef): SchemaRef {
  let current = ref
  for (let i = 0; i < MAX_REFS; i++) {
    const s = current.schema
    if (typeof s !== 'object') return current
    const pointer = s['$ref']
    if (typeof pointer === 'string') {
      const target = followPointer(current.root, pointer)
      if (target === undefined) return DYN
      current = {schema: target, root: current.root}
      continue
    }
    const single = singleBranch(s)
    if (single === undefined) return current
    current = {schema: single, root: current.root}
  }
  return DYN
}

function singleBranch(s: {readonly [key: string]: unknown}): JsonSchema | undefined {
  if (s['type'] !== undefined || s['properties'] !== undefined || s['items'] !== undefined) return undefined
  for (const key of ['allOf', 'anyOf', 'oneOf']) {
    const list = s[key]
    if (Array.isArray(list)) {
      const branches = list.filter((b): b is JsonSchema => isSchema(b) && !isNullSchema(b))
      if (branches.length === 1) return branches[0]
    }
  }
  return undefined
}

function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'boolean' || (typeof value === 'object' && value !== null && !Array.isArray(value))
}

function isNullSchema(s: JsonSchema): boolean {
  return typeof s === 'object' && s['type'] === 'null'
}

function followPointer(root: JsonSchema, pointer: string): JsonSchema | undefined {
  if (!pointer.startsWith('#')) return undefined
  let node: unknown = root
  const path = pointer.slice(1)
  if (path === '') return isSchema(node) ? node : undefined
  if (!path.startsWith('/')) return undefined
  for (const raw of path.slice(1).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~')
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, key)) return undefined
    node = (node as Record<string, unknown>)[key]
  }
  return isSchema(node) ? node : undefined
}

/** The kinds a schema allows, and whether null is one of them. */
export function schemaKinds(ref: SchemaRef): {kinds: SchemaKind[]; nullable: boolean} {
  const {schema: s} = resolve(ref)
  if (typeof s !== 'object') return {kinds: ['dyn'], nullable: true}
  const declared = s['type']
  let kinds: string[]
  if (typeof declared === 'string') kinds = [declared]
  else if (Array.isArray(declared)) kinds = declared.filter((k): k is string => typeof k === 'string')
  else kinds = inferKinds(s)
  const nullable = kinds.includes('null')
  const rest = kinds.filter((k) => k !== 'null') as SchemaKind[]
  if (rest.length === 0) return {kinds: nullable ? ['null'] : ['dyn'], nullable}
  return {kinds: rest, nullable}
}

function inferKinds(s: {readonly [key: string]: unknown}): string[] {
  if (s['properties'] !== undefined || s['additionalProperties'] !== undefined || s['required'] !== undefined) return ['object']
  if (s['items'] !== undefined) return ['array']
  const values = Array.isArray(s['enum']) ? (s['enum'] as unknown[]) : 'const' in s ? [s['const']] : undefined
  if (values === undefined || values.length === 0) return []
  const kinds = new Set(values.map(jsonKind))
  if (kinds.has('integer') && kinds.has('number')) kinds.delete('integer')
  return [...kinds]
}

function jsonKind(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number'
  return typeof value
}

/** The single kind of a schema, or `dyn` when it allows several (other than null) or says nothing. */
export function schemaKind(ref: SchemaRef): SchemaKind {
  const {kinds} = schemaKinds(ref)
  if (kinds.length === 1) return kinds[0]!
  if (kinds.length === 2 && kinds.includes('integer') && kinds.includes('number')) return 'number'
  return 'dyn'
}

export type FieldLookup =
  | {found: 'field'; ref: SchemaRef}
  | {found: 'dyn'}
  /** The object is closed and has no such field; `known` lists the fields it has. */
  | {found: 'none'; known: string[]}
  /** Not an object (a list, a string, …): the type checker reports the misuse. */
  | {found: 'not-object'}

/**
 * Looks up a field. An object that lists `properties` is closed unless it says otherwise with
 * `additionalProperties: true` or a schema (or has `patternProperties`): expressions are checked
 * against what a step declares, and a declared-but-open object would let every typo through.
 * An object with no `properties` at all (`{type: object}`) is an open map of anything.
 */
export function lookupField(ref: SchemaRef, name: string): FieldLookup {
  const resolved = resolve(ref)
  const s = resolved.schema
  if (typeof s !== 'object') return {found: 'dyn'}
  const {kinds} = schemaKinds(resolved)
  if (!kinds.includes('object') && !kinds.includes('dyn')) return {found: 'not-object'}
  if (kinds.length > 1) return {found: 'dyn'}
  const properties = objectOf(s['properties'])
  if (properties && Object.hasOwn(properties, name)) {
    const field = properties[name]
    return isSchema(field) ? {found: 'field', ref: {schema: field, root: resolved.root}} : {found: 'dyn'}
  }
  if (s['patternProperties'] !== undefined) return {found: 'dyn'}
  const extra = s['additionalProperties']
  if (extra === true) return {found: 'dyn'}
  if (isSchema(extra) && extra !== false) return {found: 'field', ref: {schema: extra, root: resolved.root}}
  if (extra === false || properties !== undefined) return {found: 'none', known: Object.keys(properties ?? {})}
  return {found: 'dyn'}
}

/** The fields a closed object declares, or undefined when it is open (a map). */
export function closedFields(ref: SchemaRef): Record<string, SchemaRef> | undefined {
  const resolved = resolve(ref)
  const s = resolved.schema
  if (typeof s !== 'object') return undefined
  const properties = objectOf(s['properties'])
  const extra = s['additionalProperties']
  if (s['patternProperties'] !== undefined || extra === true || (isSchema(extra) && extra !== false)) return undefined
  if (properties === undefined && extra !== false) return undefined
  const out: Record<string, SchemaRef> = {}
  for (const [key, value] of Object.entries(properties ?? {})) out[key] = isSchema(value) ? {schema: value, root: resolved.root} : DYN
  return out
}

/** The schema of an open object's values (`additionalProperties`), DYN when unconstrained. */
export function mapValueSchema(ref: SchemaRef): SchemaRef {
  const resolved = resolve(ref)
  const s = resolved.schema
  if (typeof s !== 'object') return DYN
  const extra = s['additionalProperties']
  return isSchema(extra) && typeof extra === 'object' ? {schema: extra, root: resolved.root} : DYN
}

/** The schema of a list's elements (`items`), DYN when unconstrained or given per position. */
export function elementSchema(ref: SchemaRef): SchemaRef {
  const resolved = resolve(ref)
  const s = resolved.schema
  if (typeof s !== 'object') return DYN
  const items = s['items']
  return isSchema(items) && typeof items === 'object' ? {schema: items, root: resolved.root} : DYN
}

/** The schema of one field of a value, for converting it; DYN where nothing is declared. */
export function fieldSchema(ref: SchemaRef, name: string): SchemaRef {
  const found = lookupField(ref, name)
  return found.found === 'field' ? found.ref : DYN
}

function objectOf(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
}
