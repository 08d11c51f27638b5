/** Backoff between attempts (seed 000): 200 ms, 500 ms, 1 s, then 1 s. */
export const BACKOFF_MS = [200, 500, 1000] as const

export function backoffFor(retry: number): number {
  return BACKOFF_MS[Math.min(retry, BACKOFF_MS.length - 1)]!
}
