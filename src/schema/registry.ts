/**
 * Validators for the formats in schemas/. Each schema is compiled once per process, on first use,
 * because compiling costs milliseconds and validating costs microseconds.
 */
import {existsSync, readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import type {ErrorObject, ValidateFunction} from 'ajv'
import {createRequire} from 'node:module'
import {ajvModuleFor, ajvOptions} from './options.js'

export type SchemaName = 'pipeline' | 'policy' | 'spec' | 'snapshot' | 'evidence' | 'answers' | 'run' | 'ledger' | 'pipe-test' | 'cassette' | ModelSchemaName
export type ModelSchemaName = 'model/compile' | 'model/clarify_questions' | 'model/apply_answers' | 'model/plan_tasks' | 'model/generate_vv'

export const schemasDir = fileURLToPath(new URL('../../schemas/', import.meta.url))

const require = createRequire(import.meta.url)
type AjvClass = typeof import('ajv').default
const instances = new Map<string, InstanceType<AjvClass>>()
const cache = new Map<SchemaName, ValidateFunction>()

/** One ajv per draft (see ajvModuleFor). */
function instance(schema: Record<string, unknown>): InstanceType<AjvClass> {
  const module = ajvModuleFor(schema)
  let ajv = instances.get(module)
  if (ajv) return ajv
  // ajv and ajv-formats are CommonJS; require keeps their load off the start-up path of commands that never validate.
  const Ajv = (require(module) as {default: AjvClass}).default
  const addFormats = (require('ajv-formats') as {default: (a: InstanceType<AjvClass>) => void}).default
  ajv = new Ajv({...ajvOptions})
  addFormats(ajv)
  instances.set(module, ajv)
  return ajv
}

export function schemaFile(name: SchemaName): string {
  return `${schemasDir}${name}.schema.json`
}

export function loadSchema(name: SchemaName): Record<string, unknown> {
  return JSON.parse(readFileSync(schemaFile(name), 'utf8')) as Record<string, unknown>
}

// '../schema/validators/', not './validators/': the same folder from dist/schema/ and from the bundle's dist/chunks/.
const standaloneDir = fileURLToPath(new URL('../schema/validators/', import.meta.url))

/** The prebuilt validator of the build, or null when running from source. */
function standalone(name: SchemaName): ValidateFunction | null {
  const file = `${standaloneDir}${name.replace('/', '-')}.cjs`
  if (!existsSync(file)) return null
  const loaded = require(file) as ValidateFunction | {default: ValidateFunction}
  return typeof loaded === 'function' ? loaded : loaded.default
}

function compiled(name: SchemaName): ValidateFunction {
  const schema = loadSchema(name)
  return instance(schema).compile(schema)
}

export function validator(name: SchemaName): ValidateFunction {
  let fn = cache.get(name)
  if (!fn) {
    fn = standalone(name) ?? compiled(name)
    cache.set(name, fn)
  }
  return fn
}

export interface SchemaCheck {
  valid: boolean
  errors: ErrorObject[]
}

export function check(name: SchemaName, data: unknown): SchemaCheck {
  const fn = validator(name)
  const valid = fn(data)
  return {valid, errors: valid ? [] : [...(fn.errors ?? [])]}
}

/** One line per error, for records that fail their schema inside the program (not user files). */
export function describeErrors(errors: ErrorObject[]): string {
  return errors.map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword}`).join('; ')
}
