/** Backoff between attempts (seed 000): 200 ms, 500 ms, 1 s, then 1 s, each plus up to 20% jitter. */
export const BACKOFF_MS = [200, 500, 1000] as const

/** `jitter` in [0, 1): spreads out the retries of runs that failed together. */
export function backoffFor(retry: number, jitter = 0): number {
  const base = BACKOFF_MS[Math.min(retry, BACKOFF_MS.length - 1)]!
  return Math.round(base * (1 + 0.2 * Math.min(Math.max(jitter, 0), 0.999)))
}
