/** Milliseconds on the monotonic clock. (performance.now() loads perf_hooks, a dozen modules, in every run.) */
export function monotonicMs(): number {
  const [seconds, nanoseconds] = process.hrtime()
  return seconds * 1000 + nanoseconds / 1e6
}
