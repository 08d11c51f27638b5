import {createHash} from 'node:crypto'

export function sha256(data: string | Uint8Array): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`
}

/**
 * JSON with object keys sorted at every level, so equal values always hash equal. Written out by
 * hand rather than through a JSON.stringify replacer: audit verify canonicalises every record of a
 * store, and the replacer's per-level object copies cost several times more.
 */
export function canonicalJson(value: unknown): string {
  return canon(value) ?? 'null'
}

function canon(value: unknown): string | undefined {
  if (value !== null && typeof value === 'object' && typeof (value as {toJSON?: unknown}).toJSON === 'function') value = (value as {toJSON: () => unknown}).toJSON()
  if (value === null || typeof value !== 'object') return JSON.stringify(value) as string | undefined
  if (Array.isArray(value)) {
    let out = '['
    for (let i = 0; i < value.length; i++) out += `${i ? ',' : ''}${canon(value[i]) ?? 'null'}`
    return `${out}]`
  }
  const object = value as Record<string, unknown>
  let out = '{'
  let first = true
  for (const key of Object.keys(object).sort()) {
    const text = canon(object[key])
    if (text === undefined) continue
    out += `${first ? '' : ','}${JSON.stringify(key)}:${text}`
    first = false
  }
  return `${out}}`
}

export function hashJson(value: unknown): string {
  return sha256(canonicalJson(value))
}
