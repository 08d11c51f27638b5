/**
 * PIPE_NOW, the one clock a test moves (util/clock.ts): the scheduler and the deadlines of gates
 * read it through one strict parser, so a mistyped value is an error naming it, never another time.
 */
import {expect} from 'chai'
import {pipeNow} from '../../src/util/clock.js'
import {PipeError} from '../../src/errors.js'

describe('PIPE_NOW: one strict parser for every clock pipe judges by', () => {
  it('takes an ISO 8601 instant with its timezone, refuses anything else with E_INVALID_ARGS naming it', () => {
    expect(pipeNow({PIPE_NOW: '2026-11-28T02:00:30Z'}).toISOString()).to.equal('2026-11-28T02:00:30.000Z')
    expect(pipeNow({PIPE_NOW: '2026-11-28T03:00:30+01:00'}).toISOString()).to.equal('2026-11-28T02:00:30.000Z')
    expect(pipeNow({PIPE_NOW: '2026-11-28T02:00Z'}).toISOString()).to.equal('2026-11-28T02:00:00.000Z')
    // "1" is not the year 2001, a time without a zone not the local one, February 30th not March 2nd.
    for (const now of ['1', '2026-11-28T02:00:30', '2026-02-30T02:00:00Z', 'Sat Nov 28 2026 02:00:30 GMT', '2026-11-28 02:00:30Z']) {
      let thrown: unknown
      try {
        pipeNow({PIPE_NOW: now})
      } catch (error) {
        thrown = error
      }
      expect(thrown, now).to.be.instanceOf(PipeError)
      expect((thrown as PipeError).code).to.equal('E_INVALID_ARGS')
      expect((thrown as PipeError).message).to.contain(`PIPE_NOW=${JSON.stringify(now)} is not an ISO 8601 time with its timezone`)
    }
    // Unset or empty: the system's clock.
    for (const env of [{}, {PIPE_NOW: ''}]) expect(Number.isNaN(pipeNow(env).getTime())).to.equal(false)
  })
})
