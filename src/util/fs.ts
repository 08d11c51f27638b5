/**
 * Crash-safe file writes: a unique temporary name, fsync, then rename (or link, to refuse overwriting).
 *
 * The writes themselves are synchronous calls. A record write is a handful of small system calls;
 * through fs/promises each is a round trip to libuv's thread pool (a FileHandle, a promise, a
 * thread wake-up and an event-loop wake-up), which cost several times the CPU of the calls
 * themselves (bench/README.md, "Costs measured for choices in the code"). The event loop waits for
 * the disk during an fsync instead: a few milliseconds at a step's end, where the run waits for it
 * anyway (its commit waits for it).
 */
import {randomBytes} from 'node:crypto'
import {
  closeSync,
  constants,
  fdatasyncSync,
  fstatSync,
  fsyncSync,
  ftruncateSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import path from 'node:path'
import {faultPoint} from './faults.js'

/**
 * Whether writes reach the disk before they count. Only the benchmark's populate script turns it off,
 * in its own process, to fill a large history quickly; timed runs and every CLI process keep it on.
 * `count` lets the benchmark report how many syncs a run costs.
 */
export const durability = {sync: true, count: 0}

/** fsync (or fdatasync) a file descriptor unless the benchmark turned syncing off. */
export function syncFd(fd: number, dataOnly = false): void {
  if (!durability.sync) return
  durability.count++
  if (dataOnly) fdatasyncSync(fd)
  else fsyncSync(fd)
}

/** fsync a folder, so that a rename or removal in it survives a crash of the machine. */
export function syncDir(dir: string): void {
  if (!durability.sync) return
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

/**
 * `read` applied to a regular file opened without blocking, or undefined when the file is missing,
 * is not a regular file or cannot be read: a FIFO, a device or a folder put in its place can
 * neither hang a reader nor make it read without end.
 */
export function readRegular<T>(file: string, read: (fd: number, size: number) => T | undefined): T | undefined {
  let fd: number
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch {
    return undefined
  }
  try {
    const info = fstatSync(fd)
    return info.isFile() ? read(fd, info.size) : undefined
  } catch {
    return undefined
  } finally {
    closeSync(fd)
  }
}

/** The start of a small file (a counter), or null when it is missing or not a regular file (see readRegular). */
export async function readSmallFile(file: string, max = 64): Promise<string | null> {
  return (
    readRegular(file, (fd) => {
      const buffer = Buffer.alloc(max)
      return buffer.toString('utf8', 0, readSync(fd, buffer, 0, max, 0))
    }) ?? null
  )
}

/** A regular file's bytes, or undefined when it is missing, not a regular file or larger than `max` (see readRegular). */
export function readWhole(file: string, max: number): Buffer | undefined {
  return readRegular(file, (fd, size) => {
    if (size > max) return undefined
    const bytes = Buffer.alloc(size)
    let read = 0
    while (read < bytes.length) {
      const n = readSync(fd, bytes, read, bytes.length - read, read)
      if (n === 0) break
      read += n
    }
    return bytes.subarray(0, read)
  })
}

/** The longest file name Linux file systems take (NAME_MAX, bytes): a temp name beside a file whose name is near it must fit too. */
const TEMP_NAME_MAX = 255

/** `name` cut to at most `bytes` UTF-8 bytes, never inside a character. */
function fitName(name: string, bytes: number): string {
  if (Buffer.byteLength(name) <= bytes) return name
  let out = ''
  for (const char of name) {
    if (Buffer.byteLength(out + char) > bytes) break
    out += char
  }
  return out
}

/** Temp names of this process: a random start, then counted (the pid in the name keeps processes apart). */
let tempCounter: number | undefined

function tempName(file: string): string {
  tempCounter = ((tempCounter ?? randomBytes(4).readUInt32BE(0)) + 1) >>> 0
  // path.join(dirname, '.' + basename) by slicing: the file's own spelling is kept, which is all a temp beside it needs.
  const cut = file.lastIndexOf(path.sep) + 1
  const suffix = `.${process.pid}.${tempCounter.toString(16).padStart(8, '0')}.tmp`
  return `${file.slice(0, cut)}.${fitName(file.slice(cut), TEMP_NAME_MAX - 1 - suffix.length)}${suffix}`
}

/**
 * Runs a write to `file` through a descriptor: an error the write or sync throws (ENOSPC) names no
 * file of its own, so it is given this one, for the message to say where (errors.ts).
 */
export function writingTo<T>(file: string, write: () => T): T {
  try {
    return write()
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (e && typeof e === 'object' && typeof e.code === 'string' && e.path === undefined) e.path = file
    throw error
  }
}

function writeTemp(file: string, data: string | Uint8Array, sync: boolean): string {
  const temp = tempName(file)
  const fd = besideFile(file, temp, () => openSync(temp, 'wx', 0o644))
  try {
    writingTo(file, () => {
      writeFileSync(fd, data)
      if (sync) syncFd(fd)
    })
  } catch (error) {
    closeSync(fd)
    removeQuietly(temp)
    throw error
  }
  closeSync(fd)
  return temp
}

/** Replaces `file` atomically: readers see the old content or the new, never a torn write. */
export async function writeFileAtomic(file: string, data: string | Uint8Array, options: {sync?: boolean} = {}): Promise<void> {
  writeFileAtomicSync(file, data, options)
}

/** writeFileAtomic for where nothing may be awaited (a process's exit handler). */
export function writeFileAtomicSync(file: string, data: string | Uint8Array, options: {sync?: boolean} = {}): void {
  const temp = writeTemp(file, data, options.sync ?? true)
  faultPoint('write')
  try {
    renameSync(temp, file)
  } catch (error) {
    removeQuietly(temp)
    throw error
  }
}

/**
 * Creates `file` atomically and only if it does not exist: returns false (and writes nothing) when
 * it does. Two processes racing for one name: exactly one wins.
 */
export async function createFileExclusive(file: string, data: string | Uint8Array, options: {sync?: boolean} = {}): Promise<boolean> {
  const temp = writeTemp(file, data, options.sync ?? true)
  faultPoint('write')
  try {
    linkSync(temp, file)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    removeQuietly(temp)
  }
}

/**
 * An error making the temp file a replacement is written to names the file asked for: the temp's
 * name (`.report.xml.1234.0a1b2c3d.tmp`) means nothing to whoever gave the path.
 */
function besideFile<T>(file: string, temp: string, make: () => T): T {
  try {
    return make()
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (e && typeof e === 'object' && e.path === temp) {
      e.path = file
      e.message = e.message.split(temp).join(file)
    }
    throw error
  }
}

/**
 * Writes a file a person named on the command line (`--html FILE`, `--junit FILE`): a regular file
 * or a new one is replaced atomically; anything else that is there already (a link, a device such
 * as /dev/stdout, a fifo) is written through, as a shell's `>` would, instead of being replaced by a
 * regular file of the same name.
 */
export function writeNamedFile(file: string, data: string | Uint8Array): void {
  const there = lstatSync(file, {throwIfNoEntry: false})
  if (there && !there.isFile() && !there.isDirectory()) writingTo(file, () => writeFileSync(file, data))
  else writeFileAtomicSync(file, data)
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file)
  } catch {
    // Already gone, or the folder is: nothing is left to tidy.
  }
}

/**
 * Appends `text` (whole lines) to `file` and syncs its data. A torn last line, which only a crash
 * mid-append leaves, is cut off first, so the new line starts clean.
 */
export async function appendSynced(file: string, text: string): Promise<void> {
  const fd = openSync(file, 'a+')
  try {
    const {size} = fstatSync(fd)
    const keep = completeLength(fd, size)
    if (keep < size) ftruncateSync(fd, keep)
    writingTo(file, () => {
      writeFileSync(fd, text)
      syncFd(fd, true)
    })
  } finally {
    closeSync(fd)
  }
}

/** The length of the file's complete lines: up to and including its last newline. */
function completeLength(fd: number, size: number): number {
  if (size === 0) return 0
  const last = Buffer.alloc(1)
  readSync(fd, last, 0, 1, size - 1)
  if (last[0] === 0x0a) return size
  const chunk = Buffer.alloc(Math.min(size, 65536))
  let end = size
  while (end > 0) {
    const take = Math.min(chunk.length, end)
    readSync(fd, chunk, 0, take, end - take)
    const at = chunk.subarray(0, take).lastIndexOf(0x0a)
    if (at >= 0) return end - take + at + 1
    end -= take
  }
  return 0
}

/**
 * `mkdir -p` that gives up: Node's recursive mkdir retries for ever where a parent exists but
 * refuses new entries with ENOENT (/proc/1, some FUSE mounts). Each level is made once; an error is
 * the file system's own (EACCES, ENOTDIR, ENOENT under a parent that exists).
 */
export function makeDirs(dir: string, mode?: number): void {
  const make = (d: string): unknown => (mode === undefined ? mkdirSync(d) : mkdirSync(d, {mode}))
  try {
    make(dir)
    return
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST' && statSync(dir).isDirectory()) return
    const parent = path.dirname(dir)
    if (code !== 'ENOENT' || parent === dir) throw error
    // Another process may have made the parent since (two commands creating one store at once): then only dir is left to make.
    if (statSync(parent, {throwIfNoEntry: false}) === undefined) makeDirs(parent, mode)
  }
  try {
    make(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(dir).isDirectory()) throw error
  }
}
