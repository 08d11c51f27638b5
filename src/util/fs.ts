/** Crash-safe file writes: a unique temporary name, fsync, then rename (or link, to refuse overwriting). */
import {randomBytes} from 'node:crypto'
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

/** Temp names of this process: a random start, then counted (the pid in the name keeps processes apart). */
let tempCounter: number | undefined

function tempName(file: string): string {
  tempCounter = ((tempCounter ?? randomBytes(4).readUInt32BE(0)) + 1) >>> 0
  return path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${tempCounter.toString(16).padStart(8, '0')}.tmp`)
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
