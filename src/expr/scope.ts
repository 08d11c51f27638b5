/**
 * What an expression can read, as a tree: fixed records (inputs, steps, run, secrets) whose
 * fields pipe knows, with JSON Schemas (a step's declared outputs, the spec) hanging below them.
 * The checker resolves references against this tree; the evaluator converts values by it.
 */
import {DYN, schemaRef, type JsonSchema, type JsonSchemaLike, type SchemaRef} from './schema.js'

/** What the pipeline declares, from which the checker and the evaluator are built. */
export interface ExprDeclarations {
  /** Declared inputs by name; an input declaration is itself a small JSON Schema (`{type, enum, …}`). */
  readonly inputs?: Readonly<Record<string, JsonSchemaLike>>
  /**
   * Every step id; `outputs` is the JSON Schema of what the step's kind (or the step) declares it
   * outputs, undefined for "anything"; `outcomes` the outcomes its kind can give (`ok`, `fail`,
   * `skipped`, …), so that `steps.x.outcome == 'sucess'` is caught.
   */
  readonly steps?: Readonly<Record<string, {readonly outputs?: JsonSchemaLike | undefined; readonly outcomes?: readonly string[] | undefined}>>
  /** The spec's JSON Schema; undefined for "anything". */
  readonly spec?: JsonSchemaLike | undefined
  /** The names listed under `secrets:`. */
  readonly secrets?: readonly string[]
  /** Names every expression of the pipeline reads besides the roots: a foreach's alias in its inline steps. */
  readonly aliases?: AliasTypes
}

/** Names bound for one expression only, such as a foreach's `as:` name, with the schema of their value (undefined: anything). */
export type AliasTypes = Readonly<Record<string, SchemaRef | undefined>>

/** The top-level names every expression can read; an alias may not reuse one. */
export const ROOT_NAMES = ['inputs', 'steps', 'spec', 'run', 'secrets', 'policy'] as const

/** What `policy.` reads: the policy the run is under, the numbers a pipeline may size itself by (a task's attempts by max_retries_default). */
export const POLICY_FIELDS = ['max_retries_default', 'max_patch_lines'] as const

export type ScopeNode = RecordNode | SchemaNode

/** A record whose fields pipe fixes; reading an undeclared field is an error phrased by `unknown`. */
export interface RecordNode {
  readonly kind: 'record'
  readonly path: string
  readonly fields: ReadonlyMap<string, ScopeNode>
  /** The message for a field it does not have. */
  readonly unknown: (name: string) => string
}

export interface SchemaNode {
  readonly kind: 'schema'
  readonly path: string
  readonly ref: SchemaRef
}

const STRING: JsonSchema = {type: 'string'}

function schemaNode(path: string, ref: SchemaRef): SchemaNode {
  return {kind: 'schema', path, ref}
}

export function buildScope(decl: ExprDeclarations): RecordNode {
  const inputs = new Map<string, ScopeNode>()
  for (const [name, schema] of Object.entries(decl.inputs ?? {})) inputs.set(name, schemaNode(`inputs.${name}`, schemaRef(schema)))
  const steps = new Map<string, ScopeNode>()
  for (const [id, step] of Object.entries(decl.steps ?? {})) {
    const path = `steps.${id}`
    steps.set(id, {
      kind: 'record',
      path,
      fields: new Map<string, ScopeNode>([
        ['outputs', schemaNode(`${path}.outputs`, schemaRef(step.outputs))],
        ['outcome', schemaNode(`${path}.outcome`, schemaRef(step.outcomes === undefined ? STRING : {type: 'string', enum: [...step.outcomes]}))],
        ['reason', schemaNode(`${path}.reason`, schemaRef(STRING))],
      ]),
      unknown: (name) => `${path} has no "${name}"; a step has outputs, outcome and reason`,
    })
  }
  const secrets = new Map<string, ScopeNode>()
  for (const name of decl.secrets ?? []) secrets.set(name, schemaNode(`secrets.${name}`, schemaRef(STRING)))
  const run = new Map<string, ScopeNode>([
    ['id', schemaNode('run.id', schemaRef(STRING))],
    ['feature_id', schemaNode('run.feature_id', schemaRef(STRING))],
    // The parent run's id, null for a top-level run.
    ['parent', schemaNode('run.parent', schemaRef({type: ['string', 'null']}))],
  ])
  const policy = new Map<string, ScopeNode>(POLICY_FIELDS.map((name) => [name, schemaNode(`policy.${name}`, schemaRef({type: 'integer'}))]))
  const root: RecordNode = {
    kind: 'record',
    path: '',
    fields: new Map<string, ScopeNode>([
      ['inputs', {kind: 'record', path: 'inputs', fields: inputs, unknown: (name) => `unknown input "${name}"${declared('inputs', inputs)}`}],
      ['steps', {kind: 'record', path: 'steps', fields: steps, unknown: (name) => `unknown step "${name}"`}],
      ['spec', schemaNode('spec', decl.spec === undefined ? DYN : schemaRef(decl.spec))],
      ['run', {kind: 'record', path: 'run', fields: run, unknown: (name) => `run has no "${name}"; it has id, feature_id and parent`}],
      [
        'secrets',
        {kind: 'record', path: 'secrets', fields: secrets, unknown: (name) => `secret "${name}" is not listed under secrets:${declared('secrets', secrets)}`},
      ],
      ['policy', {kind: 'record', path: 'policy', fields: policy, unknown: (name) => `policy has no "${name}"; it has ${POLICY_FIELDS.join(' and ')}`}],
    ]),
    unknown: (name) => `unknown name "${name}"; an expression reads inputs, steps, spec, run, secrets, policy or a foreach alias`,
  }
  return decl.aliases ? withAliases(root, decl.aliases) : root
}

function declared(what: string, fields: ReadonlyMap<string, unknown>): string {
  if (fields.size === 0) return ` (the pipeline declares no ${what})`
  const names = [...fields.keys()]
  return ` (declared: ${names.slice(0, 12).join(', ')}${names.length > 12 ? ', …' : ''})`
}

/** The scope for one expression: the pipeline's scope plus its aliases. */
export function withAliases(root: RecordNode, aliases: AliasTypes): RecordNode {
  if (Object.keys(aliases).length === 0) return root
  const fields = new Map(root.fields)
  for (const [name, ref] of Object.entries(aliases)) fields.set(name, schemaNode(name, ref ?? DYN))
  return {...root, fields}
}

/** A name that can be an alias: a CEL identifier that is neither a root name nor a CEL keyword. */
export function aliasProblem(name: string): string | undefined {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return `"${name}" is not a valid name: use letters, digits and _ and start with a letter`
  if ((ROOT_NAMES as readonly string[]).includes(name)) return `"${name}" is already a name every expression reads; choose another`
  if (CEL_RESERVED.has(name)) return `"${name}" is a reserved word in expressions; choose another`
  return undefined
}

const CEL_RESERVED = new Set([
  'true',
  'false',
  'null',
  'in',
  'as',
  'break',
  'const',
  'continue',
  'else',
  'for',
  'function',
  'if',
  'import',
  'let',
  'loop',
  'package',
  'namespace',
  'return',
  'var',
  'void',
  'while',
  'cel',
  'dyn',
  'int',
  'uint',
  'double',
  'bool',
  'string',
  'bytes',
  'list',
  'map',
  'type',
  'null_type',
  'timestamp',
  'duration',
  'has',
  'size',
])
