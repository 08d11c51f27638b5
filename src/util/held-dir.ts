/**
 * Writing inside a directory tree that another process may be changing while pipe writes: a
 * sandboxed command of a foreach sibling, or a worker's in the same checkout, can swap `out/` for a
 * symlink to a folder outside between a check of the path and the write. Checking the path first
 * and writing by name afterwards is a race (time of check, time of use) that such a command wins
 * often, so pipe never writes by a name it checked earlier: it opens the root, then each folder
 * below it relative to the handle of the one above, refusing to follow a symlink (O_NOFOLLOW), and
 * creates, renames and links only names inside the last handle it holds. Node has no openat, but on
 * Linux /proc/self/fd/N is the open folder itself, whatever has since been done to the names above
 * it, so `/proc/self/fd/N/name` is `name` in that folder. Elsewhere the names are joined as paths
 * (each folder still opened without following a link, the race narrower but not closed).
 */
import {closeSync, constants, existsSync, lstatSync, mkdirSync, openSync, readlinkSync, unlinkSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {writeFileAtomic} from './fs.js'

const PROC_FD = '/proc/self/fd'
let procFd: boolean | undefined

function viaProc(): boolean {
  procFd ??= process.platform === 'linux' && existsSync(PROC_FD)
  return procFd
}

/** A symlink met on the way down: where (relative to the root, forward slashes) and what it points at. */
export interface LinkMet {
  at: string
  target: string
}

/** What a caller says when a symlink is met: each says it in its own words (a write step, a publish target). */
export type OnLink = (link: LinkMet) => never

/** The longest file or folder name Linux file systems take, in bytes (NAME_MAX). */
const NAME_MAX = 255

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW

/** An open folder below a root, reached without following any symlink. */
export class HeldDir {
  constructor(
    readonly fd: number,
    /** The folder's path as it was reached (for messages and the fallback without /proc). */
    readonly where: string,
    /** The folder relative to the root, forward slashes; '' for the root itself. */
    readonly relative: string,
  ) {}

  /** A path naming `name` inside this very folder: what an ancestor was renamed to or replaced by does not change where it leads. */
  entry(name: string): string {
    return viaProc() ? `${PROC_FD}/${this.fd}/${name}` : path.join(this.where, name)
  }

  close(): void {
    closeSync(this.fd)
  }
}

/** The parts of a path relative to a root: never absolute, never `..` (a caller checks containment first; this is the last word). */
export function relativeParts(relative: string): string[] {
  // A backslash is a separator only where the system says so: on Linux it is part of a name, as the policy judged it.
  const parts = relative.split(path.sep === '\\' ? /[\\/]/ : '/').filter((p) => p !== '' && p !== '.')
  if (path.isAbsolute(relative) || parts.includes('..'))
    throw new PipeError('E_INTERNAL', `contained write of "${relative}": the path must be relative and stay below its root`)
  const long = parts.find((p) => Buffer.byteLength(p) > NAME_MAX)
  if (long !== undefined)
    throw new PipeError(
      'E_INVALID_ARGS',
      `"${relative}" holds a name of ${Buffer.byteLength(long)} bytes, longer than the file system allows (${NAME_MAX} bytes)`,
      {
        hint: 'Shorten that file or folder name.',
        details: {path: relative},
      },
    )
  return parts
}

function defaultOnLink(link: LinkMet): never {
  throw new PipeError('E_POLICY_DENIED', `the path leads through the symlink ${link.at} -> ${link.target}, which pipe never writes through`, {
    hint: `Remove the symlink ${link.at} (a command may have planted it), then try again.`,
    details: {rule: 'sandbox', path: link.at},
  })
}

/** Opens `name` (a path through the parent's handle) as a folder, never through a symlink; ENOENT is left to the caller. */
function openFolder(name: string, shown: string, onLink: OnLink): number {
  try {
    return openSync(name, DIR_FLAGS)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code !== 'ENOTDIR' && code !== 'ELOOP') throw error
    const info = lstatSync(name, {throwIfNoEntry: false})
    if (info?.isSymbolicLink()) {
      let target = '?'
      try {
        target = readlinkSync(name)
      } catch {
        // Gone again already: the link was there when the open refused it.
      }
      onLink({at: shown, target})
    }
    throw new PipeError('E_INVALID_ARGS', `${shown} is not a folder (a file, a FIFO or a device is there), so nothing can be written below it`, {
      hint: `Remove or rename ${shown}, or write somewhere else.`,
      details: {path: shown},
    })
  }
}

/**
 * Opens the folder `relative` below `root` without following a symlink at any level below the root
 * (the root itself is trusted as given), making the missing folders when `create` is set. A symlink
 * met on the way is refused through `onLink`; the caller closes what it gets.
 */
export function openHeldDir(root: string, relative: string, options: {create: boolean; onLink?: OnLink}): HeldDir {
  const onLink = options.onLink ?? defaultOnLink
  const parts = relativeParts(relative)
  let fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY)
  let where = root
  const done: string[] = []
  try {
    for (const part of parts) {
      const name = viaProc() ? `${PROC_FD}/${fd}/${part}` : path.join(where, part)
      done.push(part)
      const shown = done.join('/')
      let next: number
      try {
        next = openFolder(name, shown, onLink)
      } catch (error) {
        if (!options.create || (error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
        try {
          mkdirSync(name)
        } catch (made) {
          if ((made as NodeJS.ErrnoException).code !== 'EEXIST') throw made
        }
        // Made by this process or by another just now: either way opened as any other, a link refused.
        next = openFolder(name, shown, onLink)
      }
      closeSync(fd)
      fd = next
      where = path.join(where, part)
    }
  } catch (error) {
    closeSync(fd)
    throw error
  }
  return new HeldDir(fd, where, done.join('/'))
}

/** Runs `use` with the folder of `relative` (a file's path below `root`) held, and the file's name in it. */
export async function inHeldDir<T>(
  root: string,
  relative: string,
  options: {create: boolean; onLink?: OnLink},
  use: (dir: HeldDir, name: string) => Promise<T> | T,
): Promise<T> {
  const parts = relativeParts(relative)
  const name = parts.pop()
  if (name === undefined) throw new PipeError('E_INTERNAL', `contained write of "${relative}": the path names no file`)
  const dir = openHeldDir(root, parts.join('/'), options)
  try {
    return await use(dir, name)
  } finally {
    dir.close()
  }
}

/** Replaces the file `relative` below `root` atomically, its folders made and held on the way (see openHeldDir). */
export async function writeHeld(root: string, relative: string, data: string | Uint8Array, options: {sync?: boolean; onLink?: OnLink} = {}): Promise<void> {
  await inHeldDir(root, relative, {create: true, ...(options.onLink ? {onLink: options.onLink} : {})}, (dir, name) =>
    writeFileAtomic(dir.entry(name), data, options.sync === undefined ? {} : {sync: options.sync}),
  )
}

/** Removes the file `relative` below `root`, reached as openHeldDir reaches it; a file already gone is no error. */
export async function removeHeld(root: string, relative: string): Promise<void> {
  try {
    await inHeldDir(root, relative, {create: false}, (dir, name) => unlinkSync(dir.entry(name)))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
  }
}
