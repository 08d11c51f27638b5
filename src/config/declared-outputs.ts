/**
 * A pipeline's `outputs:` as the JSON Schemas the expression checker reads: what a parent's
 * `${{ steps.each.outputs.items[0].outputs.total }}` (a foreach item) or
 * `${{ steps.sub.outputs.outputs.total }}` (a pipeline step) may name, typed from the child's
 * declaration. A child in a file is read here, synchronously and only for its `outputs:` (and those
 * of the files it extends), because a kind's outputsSchema is asked while the parent's expressions
 * are checked, before its children are loaded; the child's own load checks the rest of it.
 */
import {readFileSync, statSync} from 'node:fs'
import path from 'node:path'
import {parse} from 'yaml'
import type {JsonSchema} from '../expr/schema.js'
import type {OutputDeclaration} from '../types/pipeline.js'

export type OutputDeclarations = Readonly<Record<string, OutputDeclaration | undefined>>

/** The object a run's outputs are: each declared output of its type, all present; `nullable` for an item that may not have run. */
export function outputsObjectSchema(declared: OutputDeclarations | undefined, nullable: boolean): JsonSchema {
  const properties = Object.fromEntries(
    Object.entries(declared ?? {}).flatMap(([name, decl]) =>
      decl ? [[name, {type: decl.type, ...(decl.description ? {description: decl.description} : {})}]] : [],
    ),
  )
  return {type: nullable ? ['object', 'null'] : 'object', properties, required: Object.keys(properties), additionalProperties: false}
}

const cache = new Map<string, {mtimeMs: number; size: number; declared: OutputDeclarations | undefined}>()

/**
 * The outputs the pipeline in `file` declares, merged by name with those of the files it extends
 * (as compose.ts merges them); undefined when the file cannot be read or parsed (its own load
 * reports why, and nothing is typed from it meanwhile).
 */
export function declaredOutputsOfFile(file: string, seen: readonly string[] = []): OutputDeclarations | undefined {
  const full = path.resolve(file)
  if (seen.includes(full) || seen.length > 16) return undefined
  let stat
  try {
    stat = statSync(full)
    if (!stat.isFile()) return undefined
  } catch {
    return undefined
  }
  const known = cache.get(full)
  if (known && known.mtimeMs === stat.mtimeMs && known.size === stat.size) return known.declared
  let declared: OutputDeclarations | undefined
  try {
    const data = parse(readFileSync(full, 'utf8'), {maxAliasCount: 100}) as {extends?: unknown; outputs?: unknown} | null
    if (data !== null && typeof data === 'object') {
      const base = typeof data.extends === 'string' ? declaredOutputsOfFile(path.resolve(path.dirname(full), data.extends), [...seen, full]) : {}
      // A declaration that cannot be read (a base that does not load, outputs: that are not
      // declarations) types nothing: the child's own load reports it, and a parent's expression is
      // not told the child "declares no fields" meanwhile.
      const own = data.outputs === undefined || data.outputs === null ? {} : isDeclarations(data.outputs) ? data.outputs : undefined
      declared = base && own ? {...base, ...own} : undefined
    }
  } catch {
    declared = undefined
  }
  cache.set(full, {mtimeMs: stat.mtimeMs, size: stat.size, declared})
  return declared
}

function isDeclarations(value: unknown): value is OutputDeclarations {
  return (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).every((d) => d !== null && typeof d === 'object' && typeof (d as {type?: unknown}).type === 'string')
  )
}

/** What the value of an output declared `type` must be, in words, for messages. */
export const OUTPUT_ARTICLE: Readonly<Record<string, string>> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean',
  object: 'a mapping',
  array: 'a list',
}

/** Whether a JSON value is of an output's declared type; null is of none. */
export function fitsOutputType(value: unknown, type: string): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string'
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value)
    case 'number':
      return typeof value === 'number'
    case 'boolean':
      return typeof value === 'boolean'
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value)
    case 'array':
      return Array.isArray(value)
    default:
      return false
  }
}
