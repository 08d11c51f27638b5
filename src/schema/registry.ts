/**
 * Validators for the formats in schemas/. Each schema is compiled once per process, on first use,
 * because compiling costs milliseconds and validating costs microseconds.
 */
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {cachedDataVersionTag} from 'node:v8'
import vm from 'node:vm'
import type {ErrorObject, ValidateFunction} from 'ajv'
import {createRequire} from 'node:module'
import {readWhole, writeFileAtomicSync} from '../util/fs.js'
import {sha256} from '../util/hash.js'
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
  return loadStandalone(`${standaloneDir}${name.replace('/', '-')}.cjs`)?.validate ?? null
}

/**
 * Where the build has it, a validator's V8 code cache (NAME.v8cache beside NAME.cjs): the bytecode
 * of the validator's functions as a default run left them, so a process neither parses the
 * generated code nor compiles the functions it calls (~12 ms of a default run). The build makes it
 * by a run through bin/run.js (scripts/cache-validators.mjs); V8 accepts a cache only under the
 * V8 version and flags it was made with, which the first line records (cachedDataVersionTag), with
 * the hash of the source it was made from: V8 itself checks only the source's length. A cache that
 * does not match is left unread and the validator compiles as without one.
 */
const CACHE_HEADER = 'pipe-validator-cache 1'

export interface LoadedValidator {
  validate: ValidateFunction
  /** Whether V8 took the code cache. */
  cached: boolean
}

/**
 * Scripts loaded in this process to have their cache written (see writeValidatorCaches). Only the
 * build's cache run keeps them: V8 already holds each validator's source for lazy compilation, and
 * a second copy of the text was ~0.6 MiB of every run's peak memory.
 */
const scripts = new Map<string, {script: vm.Script; source: string}>()

/**
 * Set only by scripts/cache-validators.mjs, for its one run, to the folder of the validators it
 * caches: any other value (a `1` left in a user's environment) writes nothing, so an ordinary
 * command never writes into the installation, nor fails at exit when it cannot.
 */
const CACHE_RUN_ENV = 'PIPE_BUILD_VALIDATOR_CACHE'
const cacheRun = process.env[CACHE_RUN_ENV]
const writingCaches = cacheRun !== undefined && cacheRun !== '' && path.resolve(cacheRun) === path.resolve(standaloneDir)
if (writingCaches) {
  process.on('exit', (code) => {
    // Only a run that succeeded made the functions a default run compiles.
    if (code !== 0) return
    try {
      writeValidatorCaches()
    } catch (error) {
      process.stderr.write(`pipe: could not write the validator caches: ${(error as Error).message}\n`)
      process.exitCode = 1
    }
  })
}

/** A cache's largest size read: the biggest is ~170 KB; a file far past that is not one the build wrote. */
const MAX_CACHE_BYTES = 16 * 1024 * 1024

function cacheFile(file: string): string {
  return file.replace(/\.cjs$/, '.v8cache')
}

function cacheFor(file: string, source: string): Buffer | undefined {
  const bytes = readWhole(cacheFile(file), MAX_CACHE_BYTES)
  if (!bytes) return undefined
  const end = bytes.indexOf(0x0a)
  if (end < 0) return undefined
  const header = bytes.toString('latin1', 0, end).split(' ')
  if (`${header[0]} ${header[1]}` !== CACHE_HEADER || header[2] !== String(cachedDataVersionTag()) || header[3] !== sha256(source)) return undefined
  return bytes.subarray(end + 1)
}

/**
 * A standalone validator (CommonJS, as ajv writes it), through its code cache when one fits.
 * `forCache` keeps what writeValidatorCache needs; the build's cache run sets it for every validator.
 */
export function loadStandalone(file: string, forCache = writingCaches): LoadedValidator | null {
  const source = readWhole(file, 64 * 1024 * 1024)?.toString('utf8')
  if (source === undefined) return null
  const cachedData = cacheFor(file, source)
  const script = new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {filename: file, ...(cachedData ? {cachedData} : {})})
  const module = {exports: {} as unknown}
  ;(script.runInThisContext() as (...args: unknown[]) => void)(module.exports, createRequire(file), module, file, path.dirname(file))
  const loaded = module.exports as ValidateFunction | {default: ValidateFunction}
  if (forCache) scripts.set(file, {script, source})
  return {validate: typeof loaded === 'function' ? loaded : loaded.default, cached: cachedData !== undefined && !script.cachedDataRejected}
}

/**
 * Writes the code cache of every standalone validator this process loaded, with the functions it
 * compiled: called at the end of the build's cache run, never by a command.
 */
function writeValidatorCaches(): void {
  for (const file of scripts.keys()) writeValidatorCache(file)
}

/** Writes the code cache of one standalone validator loaded in this process; returns the cache's file. */
export function writeValidatorCache(file: string): string {
  const loaded = scripts.get(file)
  if (!loaded) throw new Error(`${file} was not loaded in this process to have its cache written`)
  const header = Buffer.from(`${CACHE_HEADER} ${cachedDataVersionTag()} ${sha256(loaded.source)}\n`, 'latin1')
  // Renamed into place: a process starting meanwhile reads the old cache or the new one, never half
  // of one, and a symlink in its place is replaced, not written through. A build output: not synced.
  const target = cacheFile(file)
  writeFileAtomicSync(target, Buffer.concat([header, loaded.script.createCachedData()]), {sync: false})
  return target
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
