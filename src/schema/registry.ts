/**
 * Validators for the formats in schemas/. Each schema is compiled once per process, on first use,
 * because compiling costs milliseconds and validating costs microseconds.
 */
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import type {ErrorObject, ValidateFunction} from 'ajv'
import {createRequire} from 'node:module'
import {buildingCodeCaches, loadScript, writeCodeCache} from '../util/code-cache.js'
import {ajvModuleFor, ajvOptions} from './options.js'

export type SchemaName =
  'pipeline' | 'policy' | 'spec' | 'snapshot' | 'evidence' | 'answers' | 'run' | 'ledger' | 'pipe-test' | 'cassette' | 'step-outputs' | ModelSchemaName
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
  return loadStandalone(`${standaloneDir}${name.replace('/', '-')}.cjs`)?.validate ?? null
}

/**
 * Where the build has it, a validator's V8 code cache (NAME.v8cache beside NAME.cjs; see
 * util/code-cache.ts): a process neither parses the generated code nor compiles the functions a
 * default run calls (bench/README.md, "Costs measured for choices in the code").
 */
const CACHE_HEADER = 'pipe-validator-cache 1'

export interface LoadedValidator {
  validate: ValidateFunction
  /** Whether V8 took the code cache. */
  cached: boolean
}

/** The build's cache run: the validators sit in dist/schema/validators/. */
const writingCaches = buildingCodeCaches(path.join(standaloneDir, '..', '..'))

/**
 * A standalone validator (CommonJS, as ajv writes it), through its code cache when one fits.
 * `forCache` keeps what writeValidatorCache needs; the build's cache run sets it for every validator.
 */
export function loadStandalone(file: string, forCache = writingCaches): LoadedValidator | null {
  const loaded = loadScript(file, {header: CACHE_HEADER, wrapped: false, keep: forCache})
  if (!loaded) return null
  const exported = loaded.exports as ValidateFunction | {default?: unknown} | null | undefined
  const validate = typeof exported === 'function' ? exported : exported?.default
  // A file cut short at a statement's end still runs, exporting nothing: as good as missing.
  if (typeof validate !== 'function') return null
  return {validate: validate as ValidateFunction, cached: loaded.cached}
}

/** Writes the code cache of one standalone validator loaded in this process; returns the cache's file. */
export function writeValidatorCache(file: string): string {
  return writeCodeCache(file)
}

/** The build's validators of every kind's outputs, one script (scripts/build-validators.mjs), once per process. */
export const outputsScript = `${standaloneDir}outputs.cjs`

interface KindValidators {
  validator(kind: string): ValidateFunction | undefined
}

/** undefined until first asked for; null when the build has none (running from source) or it is damaged. */
let kinds: KindValidators | null | undefined

/** The build's script of kinds' outputs validators, through its code cache when one fits; null when missing or damaged. */
export function loadKindValidators(file = outputsScript, forCache = writingCaches): {validators: KindValidators; cached: boolean} | null {
  const loaded = loadScript(file, {header: CACHE_HEADER, wrapped: false, keep: forCache})
  const exported = loaded?.exports as Partial<KindValidators> | null | undefined
  // A file cut short at a statement's end still runs, exporting nothing: as good as missing.
  return loaded && typeof exported?.validator === 'function' ? {validators: exported as KindValidators, cached: loaded.cached} : null
}

/** The build's validator of a kind's outputs (schemas/kinds/KIND.outputs.json), or null when running from source. */
export function kindOutputsValidator(kind: string): ValidateFunction | null {
  if (kinds === undefined) kinds = loadKindValidators()?.validators ?? null
  return kinds?.validator(kind) ?? null
}

/** A schema compiled at run time, with the options the build's validators have (running from source). */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  return instance(schema).compile(schema)
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

/** The schemas whose validators this process has loaded, in the order it loaded them (a test asks which a command needed). */
export function validatorsLoaded(): SchemaName[] {
  return [...cache.keys()]
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
