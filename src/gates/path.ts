/** Spec paths for gates: dotted names with [N] or [*], e.g. features[*].priority. */

type Token = {name: string} | {index: number} | {any: true}

export function parsePath(path: string): Token[] {
  const tokens: Token[] = []
  for (const part of path.split('.')) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)((?:\[(?:\*|[0-9]+)\])*)$/.exec(part)
    if (!match) throw new Error(`invalid spec path "${path}"`)
    tokens.push({name: match[1]!})
    for (const index of match[2]!.matchAll(/\[(\*|[0-9]+)\]/g)) {
      tokens.push(index[1] === '*' ? {any: true} : {index: Number(index[1])})
    }
  }
  return tokens
}

export interface PathMatch {
  path: string
  value: unknown
}

/** Every value the path reaches; a wildcard over an empty list reaches nothing. */
export function resolvePath(root: unknown, path: string): PathMatch[] {
  let current: PathMatch[] = [{path: '', value: root}]
  for (const token of parsePath(path)) {
    const next: PathMatch[] = []
    for (const {path: at, value} of current) {
      if ('name' in token) {
        if (value && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, token.name)) {
          next.push({path: at ? `${at}.${token.name}` : token.name, value: (value as Record<string, unknown>)[token.name]})
        } else {
          next.push({path: at ? `${at}.${token.name}` : token.name, value: undefined})
        }
      } else if (Array.isArray(value)) {
        if ('index' in token) next.push({path: `${at}[${token.index}]`, value: value[token.index]})
        else value.forEach((item, i) => next.push({path: `${at}[${i}]`, value: item}))
      } else {
        next.push({path: `${at}[${'index' in token ? token.index : '*'}]`, value: undefined})
      }
    }
    current = next
  }
  return current
}

export function isEmptyValue(value: unknown): boolean {
  if (value === undefined || value === null) return true
  if (typeof value === 'string') return value.trim() === ''
  if (Array.isArray(value)) return value.length === 0
  if (typeof value === 'object') return Object.keys(value).length === 0
  return false
}
