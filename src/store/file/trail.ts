/**
 * Append-only chained logs of the store (the run index, the ledger log) and the names of the
 * leftovers a crash can leave (temporary files, run folders still being created).
 */
import {closeSync, constants, fstatSync, ftruncateSync, openSync, readFileSync, readSync, writeFileSync} from 'node:fs'
import {open} from '../../util/fs-async.js'
import {PipeError} from '../../errors.js'
import {checkLine, sealLine, type SealCheck} from '../trail/integrity.js'
import {syncFd, writingTo} from '../../util/fs.js'
import {isObject, notAnObject, type Plain} from '../trail/shapes.js'

/** A store file something else was put in the place of (a FIFO, a device, a folder, a link). */
function replaced(file: string, what: string): PipeError {
  return new PipeError('E_INTEGRITY', `${file} ${what}`, {hint: 'It was replaced outside pipe; restore it from a backup.'})
}

export interface ChainedLine {
  prev: string | null
  hash: string
  [key: string]: unknown
}

/** The last complete line of a file open for reading and writing, read from its end; a torn last line (a crash mid-append) is cut off. Synchronous calls, see util/fs.ts. */
function lastLineOf(fd: number, file: string): ChainedLine | null {
  const stats = fstatSync(fd)
  // A FIFO in a log's place would block the append that follows for ever.
  if (!stats.isFile()) throw replaced(file, 'is not a regular file')
  const {size} = stats
  let take = Math.min(size, 8192)
  for (;;) {
    const buffer = Buffer.alloc(take)
    readSync(fd, buffer, 0, take, size - take)
    let end = take
    if (take > 0 && buffer[take - 1] !== 0x0a) {
      const cut = buffer.lastIndexOf(0x0a)
      if (cut < 0 && take < size) {
        take = Math.min(size, take * 4)
        continue
      }
      // A torn last line: keep everything before it, so the next append starts on a clean line.
      ftruncateSync(fd, size - take + cut + 1)
      end = cut + 1
    }
    if (end === 0) return null
    const start = buffer.lastIndexOf(0x0a, end - 2)
    if (start < 0 && take < size) {
      take = Math.min(size, take * 4)
      continue
    }
    let line: unknown
    try {
      line = JSON.parse(buffer.subarray(start + 1, end - 1).toString('utf8'))
    } catch {
      line = undefined
    }
    // Appending after it would chain to nothing: the log was changed outside pipe.
    if (!isObject(line))
      throw new PipeError('E_INTEGRITY', `the last line of ${file} is not a record pipe wrote`, {
        hint: 'Run pipe audit verify to see the damage, and restore the file from a backup.',
      })
    return line as ChainedLine
  }
}

/**
 * Appends a line chained to the file's last line. The caller holds the log's lock. `line` may be
 * made from the last line (a running count). One open for the read and the append: a run's
 * creation appends to the run index.
 */
export async function appendChained<T extends object>(file: string, line: T | ((last: ChainedLine | null) => T | Promise<T>)): Promise<T & ChainedLine> {
  // Read and append, never blocking: a FIFO in the log's place opens at once and is refused by
  // lastLineOf. Never through a link in the log's place, which would write (or create) a file
  // outside the store.
  let fd: number
  try {
    fd = openSync(file, constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | constants.O_NONBLOCK | constants.O_NOFOLLOW, 0o666)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw replaced(file, 'is a link, not a regular file')
    throw error
  }
  try {
    const last = lastLineOf(fd, file)
    const sealed = sealLine(typeof line === 'function' ? await line(last) : line, last?.hash ?? null)
    writingTo(file, () => {
      writeFileSync(fd, `${JSON.stringify(sealed)}\n`)
      syncFd(fd, true)
    })
    return sealed
  } finally {
    closeSync(fd)
  }
}

/**
 * A log's complete lines, last first, read backwards in blocks: the newest lines of a megabyte log
 * cost what they are, not what the whole log is. A torn last line is skipped.
 */
export async function* linesFromEnd(file: string, block = 65536): AsyncGenerator<string> {
  let handle
  try {
    // Without blocking: a FIFO put in the log's place must not hang a reader.
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
    throw error
  }
  try {
    const stats = await handle.stat()
    if (!stats.isFile()) throw new Error(`${file} is not a regular file`)
    let position = stats.size
    // Bytes of the line the previous block started in the middle of.
    let carry = Buffer.alloc(0)
    let first = true
    while (position > 0) {
      const take = Math.min(block, position)
      position -= take
      const buffer = Buffer.alloc(take)
      await handle.read(buffer, 0, take, position)
      let data = Buffer.concat([buffer, carry])
      if (first) {
        const end = data.lastIndexOf(0x0a)
        // No newline yet at all: the file is one torn line, or a longer last block is needed.
        if (end < 0) {
          carry = data
          continue
        }
        first = false
        data = data.subarray(0, end + 1)
      }
      // (A negative offset would make lastIndexOf count from the end.)
      const newlineBefore = (at: number): number => (at <= 0 ? -1 : data.lastIndexOf(0x0a, at - 1))
      let end = data.length - 1
      let start = newlineBefore(end)
      while (start >= 0) {
        if (end > start + 1) yield data.toString('utf8', start + 1, end)
        end = start
        start = newlineBefore(end)
      }
      carry = Buffer.from(data.subarray(0, end + 1))
    }
    // The first line of the file (no newline before it).
    if (!first && carry.length > 1 && carry.at(-1) === 0x0a) yield carry.toString('utf8', 0, carry.length - 1)
  } finally {
    await handle.close()
  }
}

export interface ChainFinding {
  line: number
  message: string
  check?: SealCheck
}

/**
 * Parses and checks a chained log's text: each line's seal and its link to the line before, and with
 * `shape`, what the line holds (a line of the wrong shape is reported and kept, so that lines are
 * still counted and chained; callers leave it unused). A line that is not a JSON object is reported
 * and left out, as one that is not JSON. A torn last line is reported separately (a crash while
 * appending), not as damage.
 */
export function readChain(
  text: string,
  key: string | undefined,
  shape?: (line: Plain) => string | null,
): {lines: ChainedLine[]; at: number[]; problems: ChainFinding[]; torn: boolean} {
  const raw = text.split('\n')
  if (raw.at(-1) === '') raw.pop()
  const lines: ChainedLine[] = []
  // The line number (from 1) of each of `lines`.
  const at: number[] = []
  const problems: ChainFinding[] = []
  let torn = false
  // The hash the next line must link to; undefined after an unreadable line (nothing to compare with).
  let prev: string | null | undefined = null
  for (let i = 0; i < raw.length; i++) {
    let line: ChainedLine
    try {
      line = JSON.parse(raw[i]!) as ChainedLine
    } catch {
      if (i === raw.length - 1 && !text.endsWith('\n')) torn = true
      else problems.push({line: i + 1, message: 'not valid JSON'})
      prev = undefined
      continue
    }
    if (!isObject(line)) {
      problems.push({line: i + 1, message: notAnObject(line)})
      prev = undefined
      continue
    }
    const malformed = shape?.(line)
    if (malformed) problems.push({line: i + 1, message: `is malformed: ${malformed}`})
    const check = checkLine(line, key)
    if (check !== 'ok') problems.push({line: i + 1, message: '', check})
    if (prev !== undefined && line.prev !== prev)
      problems.push({line: i + 1, message: 'does not link to the line before it (a line was removed, reordered or rewritten)'})
    prev = typeof line.hash === 'string' ? line.hash : undefined
    lines.push(line)
    at.push(i + 1)
  }
  return {lines, at, problems, torn}
}

/** `.NAME.PID.HEX.tmp`, the temporary file of writeFileAtomic and createFileExclusive: its writer's pid. */
export function tempWriter(name: string): number | null {
  const match = /^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$/.exec(name)
  return match ? Number(match[1]) : null
}

/** `.new-R-....PID.HEX`, a run folder being built before it is renamed into place. */
export function stagedRun(name: string): {runId: string; pid: number} | null {
  const match = /^\.new-(R-\d{8}-\d{4,})\.(\d+)\.[0-9a-f]{8}$/.exec(name)
  return match ? {runId: match[1]!, pid: Number(match[2])} : null
}

/** A file's text, or null when it does not exist; one synchronous read (see util/fs.ts). */
export async function readText(file: string): Promise<string | null> {
  let fd: number
  try {
    // Without blocking: a FIFO or a device put in a log's place must neither hang nor flood a reader.
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
  try {
    if (!fstatSync(fd).isFile()) throw replaced(file, 'is not a regular file')
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}
