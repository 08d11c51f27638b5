/** Glob patterns for forbidden_paths: `**` crosses directories, `*` and `?` do not, `[abc]` a class. */

const cache = new Map<string, RegExp>()

export function globToRegExp(glob: string): RegExp {
  const cached = cache.get(glob)
  if (cached) return cached
  let re = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!
    if (c === '*') {
      if (glob[i + 1] === '*') {
        // "**/" matches zero or more directories; a trailing "**" matches everything below.
        if (glob[i + 2] === '/') {
          re += '(?:[^/]*/)*'
          i += 2
        } else {
          re += '.*'
          i += 1
        }
      } else re += '[^/]*'
    } else if (c === '?') re += '[^/]'
    else if (c === '[') {
      const end = glob.indexOf(']', i + 1)
      if (end === -1) re += '\\['
      else {
        re += `[${glob.slice(i + 1, end).replace(/^!/, '^').replace(/\\/g, '\\\\')}]`
        i = end
      }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&')
  }
  const compiled = new RegExp(`^${re}$`)
  cache.set(glob, compiled)
  return compiled
}

/** Whether a repository-relative path (with forward slashes) matches the glob, or lies under a directory it matches. */
export function globMatches(glob: string, relative: string): boolean {
  const re = globToRegExp(glob)
  if (re.test(relative)) return true
  const parts = relative.split('/')
  for (let i = 1; i < parts.length; i++) if (re.test(parts.slice(0, i).join('/'))) return true
  return false
}
