/** Crash-safe file writes: a unique temporary name, fsync, then rename (or link, to refuse overwriting). */
import {randomBytes} from 'node:crypto'
import {constants} from 'node:fs'
import {link, open, rename, unlink, type FileHandle} from 'node:fs/promises'
import path from 'node:path'
import {faultPoint} from './faults.js'

/**
 * Whether writes reach the disk before they count. Only the benchmark's populate script turns it off,
 * in its own process, to fill a large history quickly; timed runs and every CLI process keep it on.
 * `count` lets the benchmark report how many syncs a run costs.
 */
export const durability = {sync: true, count: 0}

/** fsync (or fdatasync) a handle unless the benchmark turned syncing off. */
export async function syncHandle(handle: FileHandle, dataOnly = false): Promise<void> {
  if (!durability.sync) return
  durability.count++
  await (dataOnly ? handle.datasync() : handle.sync())
}

/**
 * The start of a small file (a counter), or null when it is missing or not a regular file. Opened
 * without blocking and checked before reading, so that a FIFO, a device or a folder put in its place
 * can neither hang a reader nor make it read without end.
 */
export async function readSmallFile(file: string, max = 64): Promise<string | null> {
  let handle: FileHandle
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch {
    return null
  }
  try {
    if (!(await handle.stat()).isFile()) return null
    const buffer = Buffer.alloc(max)
    const {bytesRead} = await handle.read(buffer, 0, max, 0)
    return buffer.toString('utf8', 0, bytesRead)
  } catch {
    return null
  } finally {
    await handle.close()
  }
}

function tempName(file: string): string {
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`)
}

async function writeTemp(file: string, data: string | Uint8Array, sync: boolean): Promise<string> {
  const temp = tempName(file)
  const handle = await open(temp, 'wx', 0o644)
  try {
    await handle.writeFile(data)
    if (sync) await syncHandle(handle)
  } finally {
    await handle.close()
  }
  return temp
}

/** Replaces `file` atomically: readers see the old content or the new, never a torn write. */
export async function writeFileAtomic(file: string, data: string | Uint8Array, options: {sync?: boolean} = {}): Promise<void> {
  const temp = await writeTemp(file, data, options.sync ?? true)
  faultPoint('write')
  try {
    await rename(temp, file)
  } catch (error) {
    await unlink(temp).catch(() => undefined)
    throw error
  }
}

/**
 * Creates `file` atomically and only if it does not exist: returns false (and writes nothing) when
 * it does. Two processes racing for one name: exactly one wins.
 */
export async function createFileExclusive(file: string, data: string | Uint8Array, options: {sync?: boolean} = {}): Promise<boolean> {
  const temp = await writeTemp(file, data, options.sync ?? true)
  faultPoint('write')
  try {
    await link(temp, file)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw error
  } finally {
    await unlink(temp).catch(() => undefined)
  }
}

/**
 * Appends `text` (whole lines) to `file` and syncs its data. A torn last line, which only a crash
 * mid-append leaves, is cut off first, so the new line starts clean.
 */
export async function appendSynced(file: string, text: string): Promise<void> {
  const handle = await open(file, 'a+')
  try {
    const {size} = await handle.stat()
    const keep = await completeLength(handle, size)
    if (keep < size) await handle.truncate(keep)
    await handle.write(text)
    await syncHandle(handle, true)
  } finally {
    await handle.close()
  }
}

/** The length of the file's complete lines: up to and including its last newline. */
async function completeLength(handle: FileHandle, size: number): Promise<number> {
  if (size === 0) return 0
  const last = Buffer.alloc(1)
  await handle.read(last, 0, 1, size - 1)
  if (last[0] === 0x0a) return size
  const chunk = Buffer.alloc(Math.min(size, 65536))
  let end = size
  while (end > 0) {
    const take = Math.min(chunk.length, end)
    await handle.read(chunk, 0, take, end - take)
    const at = chunk.subarray(0, take).lastIndexOf(0x0a)
    if (at >= 0) return end - take + at + 1
    end -= take
  }
  return 0
}
