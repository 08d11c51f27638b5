/**
 * Containment of paths in a directory tree, for every place that must not be led out of one by
 * `..`, an absolute path or a symlink: files a pipeline names (config/pipeline-files.ts), paths a
 * step touches in the repository (policy/rules.ts), and the directory a file publish target writes
 * (publish/deliver.ts). Paths that do not exist yet are judged by their existing ancestors.
 */
import {realpathSync} from 'node:fs'
import path from 'node:path'

/** The real path of the deepest existing ancestor of `target`, plus the rest as written: symlinks of what exists are resolved. */
export function realish(target: string): string {
  let existing = target
  const rest: string[] = []
  for (;;) {
    try {
      return path.join(realpathSync(existing), ...rest.reverse())
    } catch {
      const parent = path.dirname(existing)
      if (parent === existing) return target
      rest.push(path.basename(existing))
      existing = parent
    }
  }
}

/** Whether absolute `target` is `root` or lies below it (compared as given: resolve both first). */
export function within(root: string, target: string): boolean {
  const rel = path.relative(root, target)
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel))
}

export type Escape = 'absolute' | 'leaves' | 'symlink'

export interface Contained {
  /** Why `given` is not inside the root, or undefined when it is. */
  escape?: Escape
  /** The root with its symlinks resolved. */
  realRoot: string
  /** `given` resolved against the root, its existing part's symlinks resolved. */
  resolved: string
}

/**
 * Where `given`, a path relative to `root`, leads: an absolute path, one whose `..` leave the
 * root, and one that an existing symlink (the file itself or a directory above it) takes outside
 * the root's real path are escapes.
 */
export function contain(root: string, given: string): Contained {
  const realRoot = realish(path.resolve(root))
  if (path.isAbsolute(given)) return {escape: 'absolute', realRoot, resolved: path.resolve(given)}
  const lexical = path.resolve(realRoot, given)
  if (!within(realRoot, lexical)) return {escape: 'leaves', realRoot, resolved: lexical}
  const resolved = realish(lexical)
  if (!within(realRoot, resolved)) return {escape: 'symlink', realRoot, resolved}
  return {realRoot, resolved}
}
