/** Waiting for an event instead of a guessed duration: a file appearing or changing. */
import {watch} from 'node:fs'

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
    const watcher = watch(dir, {recursive}, () => void test())
    watcher.on('error', fail)
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
