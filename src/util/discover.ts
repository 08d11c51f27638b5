/**
 * Finding pipe's files the way git finds .git: from the working directory upward, stopping at the
 * repository root (the first folder holding .git, a folder or a worktree's file) or, outside any
 * repository, at the filesystem root. So a command typed in a subfolder sees the store and the
 * policy of the project it is in.
 */
import {lstatSync, readlinkSync, realpathSync, statSync, type Stats} from 'node:fs'
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

/** The flag that names the file instead of finding it, for a hint. */
const EXPLICIT: Record<string, string> = {'policy.yaml': '--policy FILE', '.pipe': '--store DIR'}

function foreign(candidate: string, message: string, hint: string, details: Record<string, unknown>): never {
  throw new PipeError('E_CONFIG', message, {hint, details: {file: candidate, ...details}})
}

/**
 * Whom pipe trusts with a file it finds rather than is given (git's "dubious ownership" rule,
 * CVE-2022-24765, and its safe.directory): anyone who can write to a shared folder could otherwise
 * plant a policy that allows every command, or a store of another project, for whoever runs pipe
 * there. Every symlink on the way to the file must be the user's own, in the working directory too:
 * a link is what a planter makes, and where it leads can change after anyone looked (even to a file
 * root owns). Above the working directory the file itself must be the user's own as well: a folder
 * there is shared more often than not. A plain file in the working directory is used whoever owns
 * it: the person chose that folder and sees what is in it.
 */
function refuseForeign(candidate: string, start: string, above: boolean): void {
  const uid = process.getuid?.()
  if (uid === undefined) return
  const name = path.basename(candidate)
  const explicit = EXPLICIT[name] ?? 'the file by its own flag'
  let at = candidate
  for (let hops = 0; hops < 40; hops++) {
    const info = lstatSync(at, {throwIfNoEntry: false})
    if (info === undefined) return
    if (!info.isSymbolicLink()) {
      if (!above || info.uid === uid) return
      foreign(
        candidate,
        `${candidate}${at === candidate ? '' : ` (which leads to ${at})`} is above the working directory and owned by another user (uid ${info.uid}, you are ${uid}); pipe does not use a ${name} it found there`,
        `Run pipe from ${path.dirname(candidate)} if you trust it, name it with ${explicit}, or stop the search above ${start} with PIPE_CEILING_DIRECTORIES=${path.dirname(start)}.`,
        {owner_uid: info.uid, uid, ...(at === candidate ? {} : {target: at})},
      )
    }
    const refuse = (link: string, owner: number): never =>
      foreign(
        candidate,
        `${link === candidate ? candidate : `${link} (on the way from ${candidate})`} is a symlink owned by another user (uid ${owner}, you are ${uid}) that leads to ${readlinkSync(link)}; pipe does not follow a link someone else could have planted`,
        `Remove the link ${link}, or name the ${name} you mean with ${explicit}.`,
        {link, owner_uid: owner, uid},
      )
    if (info.uid !== uid) refuse(at, info.uid)
    // A folder link on the way (hop/policy.yaml) is judged too; root's own (a system's /tmp -> private/tmp) are the system's.
    at = linkTarget(at, (link, owner) => {
      if (owner !== uid && owner !== 0) refuse(link, owner)
    })
  }
}

/**
 * Where the symlink `link` leads, walked as the kernel walks it: each folder of its text in turn,
 * `..` from the folder a link led to (not lexically), every folder link met handed to `judge` and
 * followed. Its last part is not followed: the caller judges it as a link of its own.
 */
function linkTarget(link: string, judge: (link: string, owner: number) => void, depth = 0): string {
  const text = readlinkSync(link)
  let dir = path.isAbsolute(text) ? path.parse(text).root : realpathSync(path.dirname(link))
  const parts = text.split(path.sep).filter((p) => p !== '' && p !== '.')
  const last = parts.pop() ?? '.'
  for (const part of parts) {
    if (part === '..') {
      dir = path.dirname(dir)
      continue
    }
    let next = path.join(dir, part)
    for (let hops = 0; depth < 40 && hops < 40; hops++) {
      const info = lstatSync(next, {throwIfNoEntry: false})
      if (!info?.isSymbolicLink()) break
      judge(next, info.uid)
      next = linkTarget(next, judge, depth + 1)
    }
    dir = next
  }
  return last === '..' ? path.dirname(dir) : path.join(dir, last)
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
    // A dangling link is judged too: a store would be made at its far end.
    const matches = info !== null && (kind === 'dir' ? info.isDirectory() : info.isFile())
    if (matches || (info === null && lstatSync(candidate, {throwIfNoEntry: false})?.isSymbolicLink())) refuseForeign(candidate, start, dir !== start)
    if (matches) {
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
