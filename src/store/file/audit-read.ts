/**
 * How pipe audit verify reads the store's files: synchronously, without blocking on a FIFO put in a
 * record's place, into one buffer (see audit.ts).
 */
import {closeSync, constants, fstatSync, openSync, readdirSync, readFileSync, readSync} from 'node:fs'
import {fileHash} from '../trail/integrity.js'

export type Parsed<T> = {ok: true; value: T; bytes: Buffer} | {ok: false; message: string}

/** One buffer for every read: records are small, and readFileSync's fstat and allocation per file add up over a store. */
const scratch = Buffer.allocUnsafe(1 << 16)

/**
 * Opens `file` without blocking (a FIFO put in a record's place must not hang the audit) and gives
 * `read` its descriptor; a missing or unreadable file is a message, not an exception.
 */
function readWith<T>(file: string, read: (fd: number) => T | string): T | string {
  let fd: number
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file is missing' : `cannot read (${String(error)})`
  }
  try {
    return read(fd)
  } catch (error) {
    return `cannot read (${String(error)})`
  } finally {
    closeSync(fd)
  }
}

export function readBytes(file: string): Buffer | string {
  return readWith(file, (fd) => {
    const n = readSync(fd, scratch, 0, scratch.length, 0)
    if (n < scratch.length) return Buffer.from(scratch.subarray(0, n))
    // (A device in a record's place would never end.)
    return fstatSync(fd).isFile() ? readFileSync(fd) : 'cannot read (not a regular file)'
  })
}

/** A file's text (UTF-8), decoded where it was read: for a record whose parsed value is all the audit uses. */
export function readText(file: string): {text: string} | string {
  return readWith(file, (fd) => {
    const n = readSync(fd, scratch, 0, scratch.length, 0)
    if (n < scratch.length) return {text: scratch.toString('utf8', 0, n)}
    return fstatSync(fd).isFile() ? {text: readFileSync(fd, 'utf8')} : 'cannot read (not a regular file)'
  })
}

/**
 * The SHA-256 of a file's bytes (as fileHash gives it), or null when it is missing or unreadable:
 * hashed where it was read, without a copy (a store's spec versions and evidence are most of its files).
 */
export function hashOfFile(file: string): string | null {
  const hashed = readWith(file, (fd) => {
    const n = readSync(fd, scratch, 0, scratch.length, 0)
    if (n < scratch.length) return {hash: fileHash(scratch.subarray(0, n))}
    return fstatSync(fd).isFile() ? {hash: fileHash(readFileSync(fd))} : 'not a regular file'
  })
  return typeof hashed === 'string' ? null : hashed.hash
}

/**
 * The end of a file, enough to hold its last line (or all of it, when the line is longer): `size`
 * bytes at first, the whole file when its last line is longer.
 */
export function readTail(file: string, size: number = scratch.length): Buffer | string {
  return readWith(file, (fd) => {
    const stats = fstatSync(fd)
    if (!stats.isFile()) return 'cannot read (not a regular file)'
    const take = Math.min(stats.size, size, scratch.length)
    const n = readSync(fd, scratch, 0, take, stats.size - take)
    const tail = scratch.subarray(0, n)
    // A complete last line has a newline before it within the tail (or the tail is the whole file).
    if (take === stats.size || tail.lastIndexOf(0x0a, n - 2) >= 0) return Buffer.from(tail)
    return readFileSync(fd)
  })
}

export function parseBytes<T>(bytes: Buffer | string): Parsed<T> {
  if (typeof bytes === 'string') return {ok: false, message: bytes}
  try {
    return {ok: true, value: JSON.parse(bytes.toString('utf8')) as T, bytes}
  } catch (error) {
    return {ok: false, message: `not valid JSON (${(error as Error).message})`}
  }
}

export function parseFile<T>(file: string): Parsed<T> {
  return parseBytes<T>(readBytes(file))
}

export function listDir(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}
