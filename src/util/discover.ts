/**
 * Finding pipe's files the way git finds .git: from the working directory upward, stopping at the
 * repository root (the first folder holding .git, a folder or a worktree's file) or, outside any
 * repository, at the filesystem root. So a command typed in a subfolder sees the store and the
 * policy of the project it is in.
 */
import {statSync, type Stats} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'

export interface Found {
  /** The nearest match, absolute; null when none up to the boundary. */
  found: string | null
  /** The repository root the walk stopped at; null outside any git repository. */
  repoRoot: string | null
}

function statOf(file: string): Stats | null {
  try {
    return statSync(file)
  } catch {
    return null
  }
}

function kindOf(file: string): 'dir' | 'file' | null {
  const info = statOf(file)
  return info === null ? null : info.isDirectory() ? 'dir' : info.isFile() ? 'file' : null
}

/**
 * PIPE_CEILING_DIRECTORIES, like git's GIT_CEILING_DIRECTORIES: absolute folders, separated as PATH
 * is, that the walk never climbs into (a shared parent such as /home or /tmp where anyone may leave
 * a policy.yaml). Relative entries are ignored, as git ignores them.
 */
function ceilingsFromEnv(): Set<string> {
  const raw = process.env['PIPE_CEILING_DIRECTORIES']
  if (raw === undefined || raw === '') return new Set()
  return new Set(
    raw
      .split(path.delimiter)
      .filter((d) => path.isAbsolute(d))
      .map((d) => path.resolve(d)),
  )
}

/**
 * A file found above the working directory is used only if the user running pipe owns it (git's
 * "dubious ownership" rule, CVE-2022-24765): anyone who can write to a shared parent folder could
 * otherwise plant a policy that allows every command, or a store, for every project below it.
 */
function refuseForeign(candidate: string, info: Stats, start: string): void {
  const uid = process.getuid?.()
  if (uid === undefined || info.uid === uid) return
  throw new PipeError(
    'E_CONFIG',
    `${candidate} is above the working directory and owned by another user (uid ${info.uid}, you are ${uid}); pipe does not use a ${path.basename(candidate)} it found there`,
    {
      hint: `Run pipe from ${path.dirname(candidate)} if you trust it, name the file explicitly, or stop the search above ${start} with PIPE_CEILING_DIRECTORIES=${path.dirname(start)}.`,
      details: {file: candidate, owner_uid: info.uid, uid},
    },
  )
}

/**
 * The nearest `name` of the given kind from `cwd` upward, and the repository root the walk stopped
 * at. `ceiling`: the last folder looked in, for a place that must not see what lies above it (the
 * workspace of a pipe test, which must pass in any folder).
 */
export function findUpward(cwd: string, name: string, kind: 'dir' | 'file', ceiling?: string): Found {
  const start = path.resolve(cwd)
  const ceilings = ceilingsFromEnv()
  let dir = start
  for (;;) {
    const candidate = path.join(dir, name)
    const info = statOf(candidate)
    if (info !== null && (kind === 'dir' ? info.isDirectory() : info.isFile())) {
      if (dir !== start) refuseForeign(candidate, info, start)
      return {found: candidate, repoRoot: repoRootFrom(dir)}
    }
    if (kindOf(path.join(dir, '.git')) !== null) return {found: null, repoRoot: dir}
    const parent = path.dirname(dir)
    if (parent === dir || ceilings.has(parent) || (ceiling !== undefined && dir === path.resolve(ceiling))) return {found: null, repoRoot: null}
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
