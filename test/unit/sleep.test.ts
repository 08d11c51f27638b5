/** util/sleep.ts stands in for timers/promises' setTimeout: a signal cuts it short with the same error. */
import {expect} from 'chai'
import {setTimeout as timersSleep} from 'node:timers/promises'
import {sleep} from '../../src/util/sleep.js'

/** What a caller can read of a rejection. */
async function rejection(wait: Promise<unknown>): Promise<Record<string, unknown>> {
  try {
    await wait
  } catch (error) {
    const e = error as Error & {code?: unknown}
    return {instance: e instanceof Error, name: e.name, code: e.code, message: e.message, cause: e.cause}
  }
  return {resolved: true}
}

describe('sleep (util/sleep.ts)', () => {
  it('resolves after the wait when nothing aborts it', async () => {
    expect(await sleep(1)).to.equal(undefined)
    expect(await sleep(1, new AbortController().signal)).to.equal(undefined)
  })

  it('rejects as timers/promises does when the signal aborts during the wait, with or without a reason', async () => {
    for (const reason of [undefined, new Error('stop')]) {
      const ours = new AbortController()
      const theirs = new AbortController()
      const a = rejection(sleep(600000, ours.signal))
      const b = rejection(timersSleep(600000, undefined, {signal: theirs.signal}))
      ours.abort(reason)
      theirs.abort(reason)
      const [mine, node] = await Promise.all([a, b])
      expect(mine).to.deep.equal(node)
      expect(mine).to.include({instance: true, name: 'AbortError', code: 'ABORT_ERR'})
    }
  })

  it('rejects at once, as timers/promises does, when the signal has already aborted', async () => {
    const signal = AbortSignal.abort()
    expect(await rejection(sleep(600000, signal))).to.deep.equal(await rejection(timersSleep(600000, undefined, {signal})))
  })
})
