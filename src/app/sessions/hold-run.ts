/**
 * Taking a run's lock beside the process that drives it. A command that changes a run by hand (a
 * vote, a publication) must hold the run while it writes: the driver writes the run's timeline
 * from what it last wrote itself, so a line added beside it would fork the hash chain. Such a
 * command waits for the driver, within a bound, instead of refusing at once.
 */
import type {Release, RunStore} from '../../store/types.js'

export interface Patience {
  /** How long to wait for the holder; after it, the store's E_CONFLICT stands. */
  waitMs: number
  /** Told once, the first time the run is found held (the store's words: who holds it). */
  onWait?: (busy: string) => void
  signal?: AbortSignal
}

export async function holdRunPatiently(store: RunStore, runId: string, patience: Patience): Promise<Release> {
  const deadline = Date.now() + patience.waitMs
  let told = false
  for (;;) {
    try {
      return await store.acquireRun(runId)
    } catch (error) {
      if ((error as {code?: string}).code !== 'E_CONFLICT' || Date.now() >= deadline) throw error
      if (!told) patience.onWait?.((error as Error).message)
      told = true
    }
    patience.signal?.throwIfAborted()
    // Jittered, so that two waiters do not retry in step.
    await new Promise((resolve) => setTimeout(resolve, 20 + Math.random() * 60))
  }
}
