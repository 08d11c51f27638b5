/**
 * forbidden_paths globs, matched by picomatch (braces, classes, `**`), always including dotfiles,
 * and without case where the repository's file system ignores case: a pattern that fails to
 * match a path the file system would open anyway is a door, so matching errs towards denying.
 */
import {statSync} from 'node:fs'
import path from 'node:path'
import picomatch from 'picomatch'

const cache = new Map<string, (relative: string) => boolean>()

function matcher(glob: string, nocase: boolean): (relative: string) => boolean {
  const key = `${nocase ? 'i' : 's'}:${glob}`
  let match = cache.get(key)
  if (!match) {
    // `!` is a literal, never a negation: a negated entry would forbid everything but one path by accident.
    match = picomatch(glob, {dot: true, nocase, nonegate: true, strictSlashes: false})
    cache.set(key, match)
  }
  return match
}

/** Whether a repository-relative path (forward slashes) matches the glob, or lies under a directory it matches. */
export function globMatches(glob: string, relative: string, options: {nocase?: boolean} = {}): boolean {
  const match = matcher(glob, options.nocase ?? false)
  if (match(relative)) return true
  const parts = relative.split('/')
  for (let i = 1; i < parts.length; i++) if (match(parts.slice(0, i).join('/'))) return true
  return false
}

const caseCache = new Map<string, boolean>()

/**
 * Whether the file system holding `dir` (an existing, absolute, real path) ignores case: the same
 * file answers to the name with its letters' case swapped. Without a letter to swap on the way to
 * the root, the platform's usual answer.
 */
export function ignoresCase(dir: string): boolean {
  const cached = caseCache.get(dir)
  if (cached !== undefined) return cached
  let answer = process.platform === 'darwin' || process.platform === 'win32'
  for (let at = dir; ; at = path.dirname(at)) {
    const base = path.basename(at)
    const swapped = [...base].map((c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase())).join('')
    if (swapped !== base) {
      try {
        const a = statSync(at)
        const b = statSync(path.join(path.dirname(at), swapped), {throwIfNoEntry: false})
        answer = b !== undefined && a.ino === b.ino && a.dev === b.dev
      } catch {
        // Unreadable: keep the platform's answer.
      }
      break
    }
    if (path.dirname(at) === at) break
  }
  caseCache.set(dir, answer)
  return answer
}
