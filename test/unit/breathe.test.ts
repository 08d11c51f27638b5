/**
 * breathe(): work that never waits on the event loop still lets it turn. Chains started together
 * (a foreach's children) are let through a few at a time between two turns, however little time
 * each took, so an immediate (and so a signal's handler, which libuv runs before it) waits for a few
 * pieces of work, never for all of them.
 */
import {expect} from 'chai'
import {breathe} from '../../src/util/breathe.js'

describe('breathe', () => {
  it('lets the loop turn between a few of 64 chains in lockstep, and every chain finishes', async () => {
    let sinceTurn = 0
    let most = 0
    let turning = true
    const turn = (): void => {
      most = Math.max(most, sinceTurn)
      sinceTurn = 0
      if (turning) setImmediate(turn)
    }
    setImmediate(turn)
    let done = 0
    await Promise.all(
      Array.from({length: 64}, async () => {
        for (let i = 0; i < 10; i++) {
          await breathe()
          // No wait on the loop here: without breathe() all 640 would run before an immediate.
          sinceTurn++
          done++
        }
      }),
    )
    turning = false
    expect(done).to.equal(640)
    expect(most, 'pieces of work between two turns of the loop').to.be.at.most(4)
  })
})
