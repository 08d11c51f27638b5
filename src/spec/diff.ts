/** Field-by-field differences between two spec versions; list items are matched by their id. */

export interface Change {
  path: string
  kind: 'added' | 'removed' | 'changed'
  before?: unknown
  after?: unknown
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

function keyed(list: unknown[]): Map<string, unknown> | null {
  const map = new Map<string, unknown>()
  for (const item of list) {
    if (!isObject(item) || typeof item.id !== 'string' || map.has(item.id)) return null
    map.set(item.id, item)
  }
  return map
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key
}

export function diffValues(before: unknown, after: unknown, path = '', out: Change[] = []): Change[] {
  if (JSON.stringify(before) === JSON.stringify(after)) return out
  if (before === undefined) {
    out.push({path, kind: 'added', after})
    return out
  }
  if (after === undefined) {
    out.push({path, kind: 'removed', before})
    return out
  }
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])]
    for (const key of keys) diffValues(before[key], after[key], join(path, key), out)
    return out
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const left = keyed(before)
    const right = keyed(after)
    if (left && right) {
      for (const [id, item] of left) diffValues(item, right.get(id), `${path}[${id}]`, out)
      for (const [id, item] of right) if (!left.has(id)) diffValues(undefined, item, `${path}[${id}]`, out)
      return out
    }
    if (before.every((v) => typeof v !== 'object') && after.every((v) => typeof v !== 'object')) {
      out.push({path, kind: 'changed', before, after})
      return out
    }
    const length = Math.max(before.length, after.length)
    for (let i = 0; i < length; i++) diffValues(before[i], after[i], `${path}[${i}]`, out)
    return out
  }
  out.push({path, kind: 'changed', before, after})
  return out
}

function short(value: unknown): string {
  const text = typeof value === 'string' ? JSON.stringify(value) : JSON.stringify(value)
  return text.length > 160 ? `${text.slice(0, 157)}...` : text
}

export function renderChanges(changes: Change[]): string {
  if (changes.length === 0) return 'no differences\n'
  return `${changes
    .map((c) => {
      if (c.kind === 'added') return `+ ${c.path}: ${short(c.after)}`
      if (c.kind === 'removed') return `- ${c.path}: ${short(c.before)}`
      return `~ ${c.path}: ${short(c.before)} -> ${short(c.after)}`
    })
    .join('\n')}\n`
}
