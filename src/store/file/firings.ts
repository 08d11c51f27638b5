/**
 * The slots a folder store's schedules fired (pipe schedule run-due): one file per slot, made only
 * if it does not exist, so two run-due processes started for the same slot (a cron line and a
 * person, two machines sharing the folder) fire it once.
 */
import path from 'node:path'
import {sha256} from '../../util/hash.js'
import {createFileExclusive, makeDirs} from '../../util/fs.js'
import {readdir} from '../../util/fs-async.js'

function folderOf(store: string, key: string): string {
  return path.join(store, 'schedules', sha256(key).slice(0, 24))
}

/** Takes the slot for this process: false when it fired already. */
export async function claimFolderFiring(store: string, key: string, slot: Date): Promise<boolean> {
  const dir = folderOf(store, key)
  makeDirs(dir)
  const body = `${JSON.stringify({schedule: key, slot: slot.toISOString()})}\n`
  return createFileExclusive(path.join(dir, `${slot.toISOString()}.json`), body)
}

/** The latest slot fired of each key (none: absent). */
export async function lastFolderFirings(store: string, keys: readonly string[]): Promise<Map<string, Date>> {
  const out = new Map<string, Date>()
  for (const key of keys) {
    const names = await readdir(folderOf(store, key)).catch(() => [] as string[])
    const slots = names.filter((n) => n.endsWith('.json')).map((n) => new Date(n.slice(0, -'.json'.length)))
    const valid = slots.filter((d) => !Number.isNaN(d.getTime())).sort((a, b) => a.getTime() - b.getTime())
    if (valid.length > 0) out.set(key, valid.at(-1)!)
  }
  return out
}
