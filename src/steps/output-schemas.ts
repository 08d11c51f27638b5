/**
 * Small builders for the JSON Schemas of step outputs (StepHandler.outputsSchema): what
 * `${{ steps.<id>.outputs.… }}` may read. An object that lists properties is closed, so a
 * misspelt field is a validate error; `open` leaves room for keys a kind does not fix.
 */
import type {JsonSchema} from '../expr/index.js'

export const str: JsonSchema = {type: 'string'}
export const int: JsonSchema = {type: 'integer'}
export const num: JsonSchema = {type: 'number'}
export const bool: JsonSchema = {type: 'boolean'}
/** Anything: no field below it is checked. */
export const any: JsonSchema = true

export function nullable(schema: JsonSchema): JsonSchema {
  return typeof schema === 'object' && typeof schema['type'] === 'string' ? {...schema, type: [schema['type'], 'null']} : schema
}

export function list(items: JsonSchema): JsonSchema {
  return {type: 'array', items}
}

/** A closed object: these fields and no others. */
export function obj(properties: Record<string, JsonSchema>): JsonSchema {
  return {type: 'object', properties, additionalProperties: false}
}

/** An object with these fields and possibly others (unchecked). */
export function open(properties: Record<string, JsonSchema>): JsonSchema {
  return {type: 'object', properties, additionalProperties: true}
}

export function oneOf(values: readonly string[]): JsonSchema {
  return {type: 'string', enum: [...values]}
}

const captured = obj({head: str, tail: str, omitted_bytes: int, total_bytes: int})

/** A command's recorded result (policy/exec.ts CommandResult). */
export const commandResult: JsonSchema = obj({
  argv: list(str),
  cwd: str,
  exit_code: nullable(int),
  signal: nullable(str),
  timed_out: bool,
  duration_ms: int,
  stdout: captured,
  stderr: captured,
  spawn_error: str,
})

/** Citations a model gave that pipe could not find in the source. */
export const citations: JsonSchema = list(open({spec_path: str, excerpt: str, note: str, question_id: str}))
