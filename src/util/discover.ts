/**
 * Finding pipe's files the way git finds .git: from the working directory upward, stopping at the
 * repository root (the first folder holding .git, a folder or a worktree's file) or, outside any
 * repository, at the filesystem root. So a command typed in a subfolder sees the store and the
 * policy of the project it is in.
 */
import {statSync} from 'node:fs'
import path from 'node:path'

export interface Found {
  /** The nearest match, absolute; null when none up to the boundary. */
  found: string | null
  /** The repository root the walk stopped at; null outside any git repository. */
  repoRoot: string | null
}

function kindOf(file: string): 'dir' | 'file' | null {
  try {
    const info = statSync(file)
    return info.isDirectory() ? 'dir' : info.isFile() ? 'file' : null
  } catch {
    return null
  }
}

/**
 * The nearest `name` of the given kind from `cwd` upward, and the repository root the walk stopped
 * at. `ceiling`: the last folder looked in, for a place that must not see what lies above it (the
 * workspace of a pipe test, which must pass in any folder).
 */
export function findUpward(cwd: string, name: string, kind: 'dir' | 'file', ceiling?: string): Found {
  let dir = path.resolve(cwd)
  for (;;) {
    const candidate = path.join(dir, name)
    if (kindOf(candidate) === kind) return {found: candidate, repoRoot: repoRootFrom(dir)}
    if (kindOf(path.join(dir, '.git')) !== null) return {found: null, repoRoot: dir}
    const parent = path.dirname(dir)
    if (parent === dir || (ceiling !== undefined && dir === path.resolve(ceiling))) return {found: null, repoRoot: null}
    dir = parent
  }
}

/** The repository root at or above dir, or null outside any git repository. */
export function repoRootFrom(dir: string): string | null {
  let at = path.resolve(dir)
  for (;;) {
    if (kindOf(path.join(at, '.git')) !== null) return at
    const parent = path.dirname(at)
    if (parent === at) return null
    at = parent
  }
}
