/** Waiting for an event instead of a guessed duration: a file appearing or changing. */
import {readdirSync, watch, type FSWatcher} from 'node:fs'
import path from 'node:path'

/**
 * Resolves once `check` holds: checked at once, then again at each change the kernel reports in
 * `dir` (inotify, through fs.watch), so nothing is polled and no duration is guessed. When `ended`
 * settles first (the process that was to make the change has exited) it checks a last time and
 * rejects, naming `what`.
 */
export function changeIn(
  dir: string,
  check: () => boolean | Promise<boolean>,
  what: string,
  ended?: Promise<unknown>,
  /** Changes in `dir`'s subfolders too (a store's runs/R/run.json). */
  recursive = false,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false
    let running = false
    let again = false
    const finish = (error?: Error): void => {
      if (settled) return
      settled = true
      watcher.close()
      if (error === undefined) resolve()
      else reject(error)
    }
    const fail = (error: unknown): void => finish(error instanceof Error ? error : new Error(`${what}: ${JSON.stringify(error)}`))
    // One check at a time; a change seen during a check asks for one more.
    const test = async (): Promise<void> => {
      if (running) {
        again = true
        return
      }
      running = true
      try {
        do {
          again = false
          if (await check()) return finish()
        } while (again && !settled)
      } catch (error) {
        fail(error)
      } finally {
        running = false
      }
    }
    const watcher: {close(): void} = recursive ? watchTree(dir, () => void test(), fail) : watch(dir, () => void test()).on('error', fail)
    void test()
    void ended?.then(async () => {
      if (settled) return
      try {
        if (await check()) return finish()
      } catch (error) {
        return fail(error)
      }
      finish(new Error(`${what} never happened: the process ended first`))
    })
  })
}

/**
 * fs.watch of `dir` and of every folder under it, each on its own. Node 20's own recursive watch
 * (JavaScript on Linux) reads a folder it was told of after the folder may be gone, and throws the
 * ENOENT where nothing can catch it: a store's run folders (.new-R-…, renamed at once) failed a test
 * that way. Here a folder that is gone is skipped; a change in a folder is reported after the
 * folders new in it are watched, so the check that follows sees what they hold.
 */
function watchTree(dir: string, changed: () => void, failed: (error: Error) => void): {close(): void} {
  const watchers = new Map<string, FSWatcher>()
  let closed = false
  const forget = (folder: string): void => {
    watchers.get(folder)?.close()
    watchers.delete(folder)
  }
  const scan = (folder: string): void => {
    let names: string[]
    try {
      names = readdirSync(folder, {withFileTypes: true})
        .filter((entry) => entry.isDirectory())
        .map((entry) => entry.name)
    } catch {
      if (folder !== dir) forget(folder)
      return
    }
    for (const name of names) add(path.join(folder, name))
  }
  const add = (folder: string): void => {
    if (closed || watchers.has(folder)) return
    let watcher: FSWatcher
    try {
      watcher = watch(folder, () => {
        if (closed) return
        scan(folder)
        changed()
      })
    } catch (error) {
      // The folder watched is missing: said as a failed wait. A folder under it already gone: skipped.
      if (folder === dir) throw error
      return
    }
    watcher.on('error', (error) => {
      forget(folder)
      if (folder === dir) failed(error)
    })
    watchers.set(folder, watcher)
    scan(folder)
  }
  add(dir)
  return {
    close() {
      closed = true
      for (const folder of [...watchers.keys()]) forget(folder)
    },
  }
}
