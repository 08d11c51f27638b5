/** SIGINT and SIGTERM abort the run in progress, which then records itself as interrupted. */
export async function withSignals<T>(work: (signal: AbortSignal) => Promise<T>, what = 'stopping after recording the run as interrupted'): Promise<T> {
  const controller = new AbortController()
  let count = 0
  const onSignal = (name: NodeJS.Signals): void => {
    count++
    if (count > 1) process.exit(130)
    process.stderr.write(`\n${name}: ${what} (again to quit at once)\n`)
    controller.abort()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  try {
    return await work(controller.signal)
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
