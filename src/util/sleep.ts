/**
 * A wait that a signal cuts short, as timers/promises' setTimeout waits: that module (and what it
 * loads) was a cost of every run's start-up, for a wait most runs never make.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const aborted = (): Error => Object.assign(new Error('The operation was aborted', {cause: signal?.reason}), {name: 'AbortError', code: 'ABORT_ERR'})
    if (signal?.aborted) {
      reject(aborted())
      return
    }
    const onAbort = (): void => {
      clearTimeout(timer)
      reject(aborted())
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal?.addEventListener('abort', onAbort, {once: true})
  })
}
