/** SIGINT and SIGTERM abort the run in progress, which then records itself as interrupted. */
import {CANCEL_SIGNAL, ringCancelBell} from '../util/cancel-bell.js'
import {writeErr} from './std-streams.js'

/** How long the first signal gives the work to wind down before pipe ends itself regardless. */
const GRACE_MS = Number(process.env.PIPE_SIGNAL_GRACE_MS) > 0 ? Number(process.env.PIPE_SIGNAL_GRACE_MS) : 5000

export async function withSignals<T>(work: (signal: AbortSignal) => Promise<T>, what = 'stopping after recording the run as interrupted'): Promise<T> {
  const controller = new AbortController()
  let count = 0
  const onSignal = (name: NodeJS.Signals): void => {
    count++
    if (count > 1) dieBy(name)
    writeErr(`\n${name}: ${what} (again to quit at once)\n`)
    controller.abort()
    // Work that does not heed the abort (a stuck read, a hung callback) must not keep pipe alive.
    setTimeout(() => {
      writeErr(`${name}: still not stopped after ${GRACE_MS} ms; quitting now\n`)
      dieBy(name)
    }, GRACE_MS).unref()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  // pipe cancel's doorbell: only the run that was asked to stop stops (see util/cancel-bell.ts).
  process.on(CANCEL_SIGNAL, ringCancelBell)
  try {
    return await work(controller.signal)
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    process.off(CANCEL_SIGNAL, ringCancelBell)
  }
}

/**
 * Ends the process by the signal's default action (exit status 128 + signal number: 130 for SIGINT).
 * process.exit() is not enough: it waits for libuv's pool threads, and one blocked in open() or
 * read() of a FIFO or a device never returns.
 */
function dieBy(name: NodeJS.Signals): never {
  process.removeAllListeners(name)
  process.kill(process.pid, name)
  // The default action is immediate; should the signal somehow be caught, SIGKILL cannot be.
  process.kill(process.pid, 'SIGKILL')
  throw new Error('unreachable')
}
