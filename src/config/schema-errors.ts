/**
 * Turns ajv's errors into diagnostics that point at the offending node: unknown keys at the key
 * itself, missing keys at the mapping that lacks them, bad values at the value.
 */
import type {ErrorObject} from 'ajv'
import {formatPath, type Diagnostic} from './diagnostics.js'
import {didYouMean} from '../util/suggest.js'
import {locate, type YamlSource} from './yaml-source.js'

function segmentsOf(instancePath: string): Array<string | number> {
  if (instancePath === '') return []
  return instancePath
    .slice(1)
    .split('/')
    .map((raw) => raw.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((part) => (/^(0|[1-9][0-9]*)$/.test(part) ? Number(part) : part))
}

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  const text = JSON.stringify(value)
  return text.length > 60 ? `${text.slice(0, 57)}...` : text
}

/** The keys a schema declares, its own and those of the schemas it includes by allOf (a step kind's and the common step fields). */
function schemaKeys(parentSchema: unknown, root: Record<string, unknown>): string[] {
  const schema = resolveRef(parentSchema, root) as {properties?: Record<string, unknown>; allOf?: unknown[]} | undefined
  return [...new Set([...Object.keys(schema?.properties ?? {}), ...(schema?.allOf ?? []).flatMap((part) => schemaKeys(part, root))])]
}

function resolveRef(schema: unknown, root: Record<string, unknown>): unknown {
  const ref = (schema as {$ref?: unknown} | undefined)?.$ref
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return schema
  return ref
    .slice(2)
    .split('/')
    .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], root)
}

function discriminatorValues(parentSchema: unknown, root: Record<string, unknown>, tag: string): string[] {
  const branches = (parentSchema as {oneOf?: Array<{$ref?: string; properties?: Record<string, {const?: unknown}>}>}).oneOf ?? []
  const values: string[] = []
  for (const branch of branches) {
    let schema: {properties?: Record<string, {const?: unknown}>} | undefined = branch
    if (branch.$ref?.startsWith('#/')) {
      schema = branch.$ref
        .slice(2)
        .split('/')
        .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], root) as typeof schema
    }
    const value = schema?.properties?.[tag]?.const
    if (typeof value === 'string') values.push(value)
  }
  return values
}

export function schemaDiagnostics(source: YamlSource, errors: ErrorObject[], rootSchema: Record<string, unknown>, what: string): Diagnostic[] {
  const out: Diagnostic[] = []
  const seen = new Set<string>()
  // A value that takes one branch of an anyOf (a map where a list or a map may stand) and fails inside
  // it: the other branch's "must be array" says nothing the errors within it do not.
  const branching = new Set(errors.filter((e) => e.keyword === 'anyOf').map((e) => e.instancePath))
  const deeper = (at: string): boolean => errors.some((e) => e.instancePath.startsWith(`${at}/`))
  for (const error of errors) {
    if (error.keyword === 'type' && branching.has(error.instancePath) && deeper(error.instancePath)) continue
    const segments = segmentsOf(error.instancePath)
    let target = segments
    let preferKey = false
    let message: string
    const value = error.data
    switch (error.keyword) {
      case 'additionalProperties':
      case 'unevaluatedProperties': {
        const params = error.params as {additionalProperty?: string; unevaluatedProperty?: string}
        const key = String(params.additionalProperty ?? params.unevaluatedProperty)
        target = [...segments, key]
        preferKey = true
        const where = segments.length ? `in ${formatPath(segments)}` : `in ${/^[aeiou]/i.test(what) ? 'an' : 'a'} ${what}`
        message = `unknown key "${key}" ${where}${didYouMean(key, schemaKeys(error.parentSchema, rootSchema))}`
        break
      }
      case 'required': {
        const missing = (error.params as {missingProperty: string}).missingProperty
        message = `missing required key "${missing}"`
        break
      }
      case 'discriminator': {
        const params = error.params as {error: string; tag: string; tagValue: unknown}
        if (params.error === 'mapping') {
          target = [...segments, params.tag]
          const kinds = discriminatorValues(error.parentSchema, rootSchema, params.tag)
          message = `unknown step kind ${describe(params.tagValue)}${didYouMean(String(params.tagValue), kinds)} (kinds: ${kinds.join(', ')})`
        } else {
          message = `"${params.tag}" must be a string naming a step kind`
        }
        break
      }
      case 'enum': {
        const allowed = (error.params as {allowedValues: unknown[]}).allowedValues.map(String)
        message = `${describe(value)} is not allowed; expected one of: ${allowed.join(', ')}${didYouMean(String(value), allowed)}`
        break
      }
      case 'const':
        message = `must be ${JSON.stringify((error.params as {allowedValue: unknown}).allowedValue)}, found ${describe(value)}`
        break
      case 'type': {
        const expected = (error.params as {type: string | string[]}).type
        message = `must be ${String(expected).replace(',', ' or ')}, found ${describe(value)}${quoteHint(source, target, expected, value)}`
        break
      }
      case 'pattern':
        message = `${describe(value)} does not match the pattern ${(error.params as {pattern: string}).pattern}`
        break
      case 'propertyNames': {
        const name = (error.params as {propertyName: string}).propertyName
        target = [...segments, name]
        preferKey = true
        message = `invalid name "${name}"`
        break
      }
      case 'dependencies':
      case 'dependentRequired': {
        // At the key that needs the other, not at the mapping.
        const params = error.params as {property: string; missingProperty: string}
        target = [...segments, params.property]
        preferKey = true
        message = `"${params.property}" needs "${params.missingProperty}" beside it`
        break
      }
      case 'not':
        message = `${describe(value)} is reserved`
        break
      case 'oneOf':
      case 'anyOf':
      case 'if':
        // The branch errors that come with it say more.
        continue
      default:
        message = `${error.message ?? error.keyword}${value !== undefined && typeof value !== 'object' ? `, found ${describe(value)}` : ''}`
    }
    // A key that fails propertyNames also reports the inner check at the map; keep the key's error only.
    if (error.propertyName !== undefined && error.keyword !== 'propertyNames') {
      target = [...segments, error.propertyName]
      preferKey = true
      message = `invalid name "${error.propertyName}": ${message}`
    }
    const pos = locate(source, target, preferKey)
    const diagnostic: Diagnostic = {file: source.file, line: pos.line, col: pos.col, path: formatPath(target), message, rule: 'schema'}
    const key = `${diagnostic.line}:${diagnostic.col}:${diagnostic.message}`
    if (!seen.has(key)) {
      seen.add(key)
      out.push(diagnostic)
    }
  }
  return out
}

/**
 * The common YAML trap: a scalar meant as text that YAML reads as a number, a boolean or null
 * (`-1`, `1.0`, `true`, an empty value). Says to quote it, as it is written.
 */
function quoteHint(source: YamlSource, target: Array<string | number>, expected: string | string[], value: unknown): string {
  if (!(Array.isArray(expected) ? expected : [expected]).includes('string')) return ''
  if (value === null) return '; an empty value (or ~) is null in YAML: write "" for empty text'
  if (typeof value !== 'number' && typeof value !== 'boolean') return ''
  const pos = locate(source, target, false)
  const line = source.text.split('\n')[pos.line - 1] ?? ''
  const written = /^[^\s,\]}#]+/.exec(line.slice(pos.col - 1))?.[0] ?? String(value)
  return `; YAML reads ${written} as a ${typeof value}: write it in quotes, "${written}"`
}
