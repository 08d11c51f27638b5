/**
 * The boundary between JSON values (what steps, inputs and the spec hold) and CEL values (what
 * cel-js computes with). CEL has distinct int and double types and cel-js represents ints as
 * BigInt, while JSON has one number type; both directions are done here and nowhere else.
 */
import {Optional} from '@marcbachmann/cel-js'
import {elementSchema, fieldSchema, schemaKind, type SchemaRef} from './schema.js'

export type JsonValue = null | boolean | number | string | JsonValue[] | {[key: string]: JsonValue}

/**
 * JSON -> CEL, directed by the value's declared schema so that the runtime types agree with the
 * types the checker assumed: a number declared `integer` becomes an int (BigInt), one declared
 * `number` stays a double even when it is integral (5 from JSON is 5.0 for a `number` field).
 * Where nothing is declared, integral numbers become ints and the rest doubles, which is how a
 * person reads `5` and `5.5`.
 */
export function toCel(value: unknown, ref: SchemaRef): unknown {
  if (typeof value === 'number') {
    if (schemaKind(ref) === 'number') return value
    return Number.isSafeInteger(value) ? BigInt(value) : value
  }
  if (Array.isArray(value)) {
    const items = elementSchema(ref)
    return value.map((item) => toCel(item, items))
  }
  if (value !== null && typeof value === 'object' && !(value instanceof Map)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, toCel(item, fieldSchema(ref, key))]))
  }
  return value
}

/** Why a CEL value could not become JSON; the caller adds which expression produced it. */
export class ConversionError extends Error {}

/**
 * CEL -> JSON, with a byte budget: the walk stops as soon as the serialized size passes
 * `maxBytes`, so a result built from shared references (`[a, a]` nested) cannot blow up
 * memory while it is being measured.
 */
export function fromCel(value: unknown, maxBytes: number): JsonValue {
  return convert(value, {left: maxBytes}, '')
}

function spend(budget: {left: number}, bytes: number, where: string): void {
  budget.left -= bytes
  if (budget.left < 0) throw new ConversionError(`result is larger than the limit${where ? ` (at ${where})` : ''}`)
}

function convert(value: unknown, budget: {left: number}, where: string): JsonValue {
  switch (typeof value) {
    case 'string':
      spend(budget, Buffer.byteLength(value) + 2, where)
      return value
    case 'boolean':
      spend(budget, 5, where)
      return value
    case 'bigint': {
      if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER)) {
        throw new ConversionError(
          `integer ${value} is outside the safe range of JSON numbers (±${Number.MAX_SAFE_INTEGER})${at(where)}; use string(…) to keep it exact`,
        )
      }
      spend(budget, String(value).length, where)
      return Number(value)
    }
    case 'number':
      if (!Number.isFinite(value)) throw new ConversionError(`${value} is not a JSON number${at(where)}`)
      spend(budget, String(value).length, where)
      return value
    case 'undefined':
      throw new ConversionError(`no value${at(where)}`)
    case 'object':
      break
    default:
      throw new ConversionError(`a ${typeof value} is not a JSON value${at(where)}`)
  }
  if (value === null) {
    spend(budget, 4, where)
    return null
  }
  if (Array.isArray(value)) {
    spend(budget, 2, where)
    return value.map((item, i) => {
      spend(budget, 1, where)
      return convert(item, budget, `${where}[${i}]`)
    })
  }
  if (value instanceof Map) {
    spend(budget, 2, where)
    const out: Record<string, JsonValue> = {}
    for (const [key, item] of value as Map<unknown, unknown>) {
      const name = mapKey(key, where)
      spend(budget, Buffer.byteLength(name) + 4, where)
      setOwn(out, name, convert(item, budget, `${where}.${name}`))
    }
    return out
  }
  if (value instanceof Date) {
    const text = value.toISOString()
    spend(budget, text.length + 2, where)
    return text
  }
  if (value instanceof Uint8Array) throw new ConversionError(`a bytes value is not JSON${at(where)}; convert it with string(…) or .base64()`)
  if (value instanceof Optional) {
    return value.hasValue() ? convert(value.value(), budget, where) : convert(null, budget, where)
  }
  const primitive = (value as {valueOf(): unknown}).valueOf()
  if (typeof primitive === 'bigint') return convert(primitive, budget, where) // uint
  const proto = Object.getPrototypeOf(value) as unknown
  if (proto === Object.prototype || proto === null) {
    spend(budget, 2, where)
    const out: Record<string, JsonValue> = {}
    for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
      spend(budget, Buffer.byteLength(key) + 4, where)
      setOwn(out, key, convert(item, budget, `${where}.${key}`))
    }
    return out
  }
  const name = (value as {constructor?: {name?: string}}).constructor?.name ?? 'object'
  throw new ConversionError(`a ${name === 'Duration' ? 'duration' : name === 'Type' ? 'type' : name} value is not JSON${at(where)}; convert it with string(…)`)
}

/** Plain assignment of "__proto__" would change the prototype instead of adding a key. */
function setOwn(target: Record<string, JsonValue>, key: string, value: JsonValue): void {
  Object.defineProperty(target, key, {value, enumerable: true, writable: true, configurable: true})
}

function mapKey(key: unknown, where: string): string {
  if (typeof key === 'string') return key
  if (typeof key === 'bigint' || typeof key === 'boolean') return String(key)
  throw new ConversionError(`a map key of type ${typeof key} is not JSON${at(where)}`)
}

function at(where: string): string {
  return where ? ` at result${where}` : ''
}

/**
 * How a value reads inside a longer string ("since ${{ inputs.since }}"): strings as they are,
 * numbers in JavaScript's shortest round-trip form (5, 0.5, 1e+21), booleans true/false, null as
 * nothing, lists and maps as compact JSON.
 */
export function stringify(value: JsonValue): string {
  if (value === null) return ''
  if (typeof value === 'string') return value
  if (typeof value === 'number' || typeof value === 'boolean') return String(value)
  return JSON.stringify(value)
}
