import * as crypto from 'node:crypto'

type OneShot = (algorithm: string, data: string | Uint8Array, encoding: 'hex') => string
/**
 * Node's one-shot hash (20.12 and later) where there is one: a record's dozen field hashes each
 * built a Hash stream object, which cost more than hashing the bytes.
 */
const oneShot = (crypto as unknown as {hash?: OneShot}).hash

export const sha256: (data: string | Uint8Array) => string = oneShot
  ? (data) => `sha256:${oneShot('sha256', data, 'hex')}`
  : (data) => `sha256:${crypto.createHash('sha256').update(data).digest('hex')}`

/**
 * JSON with object keys sorted at every level, so equal values always hash equal. Written out by
 * hand rather than through a JSON.stringify replacer: audit verify canonicalises every record of a
 * store, and the replacer's per-level object copies cost several times more.
 */
export function canonicalJson(value: unknown): string {
  return canon(value) ?? 'null'
}

/** Object keys quoted once: records repeat the same few hundred keys. */
const quotedKeys = new Map<string, string>()

/**
 * canonicalJson of an object whose members are already in canonical form (their canonicalJson, or
 * undefined for a member canonicalJson leaves out): a record sealed field by field puts each field
 * in canonical form once, for its field hash and for the whole.
 */
export function canonicalObject(members: Readonly<Record<string, string | undefined>>): string {
  const keys = Object.keys(members)
  if (keys.length > 1) keys.sort()
  let out = '{'
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    const text = members[key]
    if (text === undefined) continue
    out += out.length === 1 ? quotedKey(key) + text : `,${quotedKey(key)}${text}`
  }
  return `${out}}`
}

/** A value's canonical JSON as a member of an object: undefined where canonicalJson leaves the member out (undefined, functions). */
export function canonicalMember(value: unknown): string | undefined {
  return canon(value)
}

function quotedKey(key: string): string {
  let quoted = quotedKeys.get(key)
  if (quoted === undefined) {
    quoted = `${JSON.stringify(key)}:`
    if (quotedKeys.size < 10000) quotedKeys.set(key, quoted)
  }
  return quoted
}

function canon(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      return JSON.stringify(value)
    case 'object':
      break
    default:
      return undefined
  }
  if (value === null) return 'null'
  if (typeof (value as {toJSON?: unknown}).toJSON === 'function') return canon((value as {toJSON: () => unknown}).toJSON())
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]'
    let out = `[${canon(value[0]) ?? 'null'}`
    for (let i = 1; i < value.length; i++) out += `,${canon(value[i]) ?? 'null'}`
    return `${out}]`
  }
  const object = value as Record<string, unknown>
  const keys = Object.keys(object)
  if (keys.length > 1) keys.sort()
  let out = '{'
  // Indexed, not for-of: most of a run's records are canonicalised by code V8 leaves unoptimised,
  // where each for-of builds an iterator object.
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!
    const text = canon(object[key])
    if (text === undefined) continue
    out += out.length === 1 ? quotedKey(key) + text : `,${quotedKey(key)}${text}`
  }
  return `${out}}`
}

export function hashJson(value: unknown): string {
  return sha256(canonicalJson(value))
}
