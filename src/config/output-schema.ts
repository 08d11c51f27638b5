/**
 * Output schemas of `kind: model` steps: JSON Schema files of the pipeline's own. `pipe validate`
 * and the step read them through here, so both judge a file the same way, and each distinct
 * schema is compiled once per process (compiling costs milliseconds, validating microseconds).
 *
 * Decisions: draft-07 unless the file's `$schema` names 2019-09 or 2020-12; ajv's strict mode
 * (an unknown keyword such as `requird` is an error, not silently ignored), but without its type
 * strictness (`properties` without `type: object` is fine); and an object at the root, because
 * OpenAI-compatible endpoints return a JSON object in both JSON-schema and JSON mode.
 */
import {readFileSync, statSync} from 'node:fs'
import {createRequire} from 'node:module'
import path from 'node:path'
import type {ErrorObject, ValidateFunction} from 'ajv'
import {sha256} from '../util/hash.js'
import {fileEscape} from './pipeline-files.js'

export interface OutputSchema {
  /** The file's schema as written (what `outputsSchema` and the endpoint see). */
  schema: Record<string, unknown>
  /** The problems of a reply in one line, or null when it matches. */
  check: (value: unknown) => string | null
}

export type OutputSchemaResult = {ok: true; file: string; output: OutputSchema} | {ok: false; file: string; problem: string}

const require = createRequire(import.meta.url)
type AjvLike = {compile(schema: object): ValidateFunction}
const instances = new Map<string, AjvLike>()
const compiled = new Map<string, OutputSchema | string>()

function ajvFor(draft: '07' | '2019' | '2020'): AjvLike {
  let ajv = instances.get(draft)
  if (!ajv) {
    // CommonJS modules, loaded on first use so commands that never validate do not pay for them.
    const module = draft === '07' ? 'ajv' : draft === '2019' ? 'ajv/dist/2019' : 'ajv/dist/2020'
    const Ajv = (require(module) as {default: new (options: object) => AjvLike}).default
    const addFormats = (require('ajv-formats') as {default: (a: AjvLike) => void}).default
    ajv = new Ajv({allErrors: true, strict: true, strictTypes: false, strictTuples: false, strictRequired: false, allowUnionTypes: true})
    addFormats(ajv)
    instances.set(draft, ajv)
  }
  return ajv
}

function draftOf(schema: Record<string, unknown>): '07' | '2019' | '2020' | null {
  const declared = schema['$schema']
  if (declared === undefined) return '07'
  if (typeof declared !== 'string') return null
  if (/draft-07\/schema#?$/.test(declared)) return '07'
  if (/draft\/2019-09\/schema#?$/.test(declared)) return '2019'
  if (/draft\/2020-12\/schema#?$/.test(declared)) return '2020'
  return null
}

/** One line per error, naming the place in the reply and what is wrong there. */
export function describeReplyErrors(errors: readonly ErrorObject[]): string {
  return errors
    .slice(0, 20)
    .map((e) => {
      const extra =
        e.keyword === 'additionalProperties'
          ? ` (${String((e.params as {additionalProperty?: unknown}).additionalProperty)})`
          : e.keyword === 'enum'
            ? ` (${JSON.stringify((e.params as {allowedValues?: unknown}).allowedValues)})`
            : ''
      return `${e.instancePath || '/'} ${e.message ?? e.keyword}${extra}`
    })
    .join('; ')
}

/** line:col of a JSON.parse error in `text`, when the message names a position. */
function jsonErrorAt(text: string, message: string): string {
  const position = /position (\d+)/.exec(message)
  if (!position) return ''
  const before = text.slice(0, Number(position[1]))
  const lines = before.split('\n')
  return ` at line ${lines.length} column ${lines.at(-1)!.length + 1}`
}

/** Compiles a schema (already parsed) as an output schema, or says why it cannot be one. */
export function compileOutputSchema(schema: unknown): OutputSchema | string {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return 'is not a JSON Schema: its root must be a JSON object'
  const root = schema as Record<string, unknown>
  const key = sha256(JSON.stringify(root))
  const cached = compiled.get(key)
  if (cached !== undefined) return cached
  const result = compileUncached(root)
  compiled.set(key, result)
  return result
}

function compileUncached(root: Record<string, unknown>): OutputSchema | string {
  const draft = draftOf(root)
  if (draft === null) return `names $schema ${JSON.stringify(root['$schema'])}; use draft-07 (the default), 2019-09 or 2020-12`
  if (root['type'] !== 'object')
    return `must describe a JSON object: put "type": "object" at its root (found ${root['type'] === undefined ? 'no type' : `type ${JSON.stringify(root['type'])}`}); a model replies with one JSON object`
  // The root $id only names the document; dropping it lets two files share one (and one file be compiled again after an edit).
  const {$id: _id, ...bare} = root
  let validate: ValidateFunction
  try {
    validate = ajvFor(draft).compile(bare)
  } catch (error) {
    return `is not a valid JSON Schema: ${(error as Error).message.split('\n')[0]}`
  }
  return {
    schema: root,
    check: (value) => (validate(value) ? null : describeReplyErrors(validate.errors ?? [])),
  }
}

/** Reads and compiles the output schema file `name` of the pipeline in `dir`. */
export function loadOutputSchema(dir: string, name: string): OutputSchemaResult {
  const file = path.resolve(dir, name)
  const escape = fileEscape(dir, name)
  if (escape) return {ok: false, file, problem: escape}
  let text: string
  try {
    // A FIFO or a device would block or never end.
    if (!statSync(file).isFile()) return {ok: false, file, problem: 'is not a file'}
    text = readFileSync(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return {ok: false, file, problem: code === 'ENOENT' ? `does not exist (looked for ${file})` : `cannot be read (${code ?? String(error)})`}
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch (error) {
    const message = (error as Error).message
    return {ok: false, file, problem: `is not valid JSON${jsonErrorAt(text, message)}: ${message}`}
  }
  const output = compileOutputSchema(parsed)
  return typeof output === 'string' ? {ok: false, file, problem: output} : {ok: true, file, output}
}
