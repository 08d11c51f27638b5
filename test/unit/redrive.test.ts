import {expect} from 'chai'
import {canTransition} from '../../src/engine/lifecycle.js'
import {PipeError} from '../../src/errors.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {registry} from '../../src/steps/registry.js'
import type {StepHandler} from '../../src/steps/types.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-redrive-unit-')))
afterEach(async () => cleanup())

/** A noop kind whose step `flaky` fails until `fixed` is set; every other step succeeds. */
function flakyKind(): {handler: StepHandler<'noop'>; fix: () => void; calls: () => number} {
  let fixed = false
  let calls = 0
  const handler: StepHandler<'noop'> = {
    ...registry.noop,
    safeToRetry: false,
    async run(context) {
      if (context.step.id !== 'flaky') return {type: 'done', outcome: 'success', reason: 'ok', outputs: {}}
      calls++
      if (!fixed) throw new PipeError('E_IO', 'the service is down')
      return {type: 'done', outcome: 'success', reason: 'worked', outputs: {}}
    },
  }
  return {handler, fix: () => (fixed = true), calls: () => calls}
}

describe('redrive', () => {
  it('makes failed -> running legal only as a redrive; succeeded and cancelled stay final', () => {
    expect(canTransition('failed', 'running')).to.equal(false)
    expect(canTransition('failed', 'running', true)).to.equal(true)
    expect(canTransition('blocked', 'running')).to.equal(true)
    for (const to of ['running', 'failed', 'cancelled'] as const) {
      expect(canTransition('succeeded', to, true)).to.equal(false)
      expect(canTransition('cancelled', to, true)).to.equal(false)
    }
  })

  it('restarts at the failed step with the next seq; the retried snapshot does not use up max_iterations', async () => {
    const kind = flakyKind()
    const h = await harness(dir, {noop: kind.handler})
    const p = await pipelineFrom(
      dir,
      'r',
      'version: 1\nname: r\nsteps:\n  - {id: a, kind: noop, next: flaky}\n  - {id: flaky, kind: noop, max_iterations: 1, next: z}\n  - {id: z, kind: noop}\n',
    )
    const failed = await h.start(p)
    expect(failed.status).to.equal('failed')
    const settings = {pipeline: p, policy: defaultPolicy(), cwd: dir}
    const again = await h.engine.resume(failed.run_id, settings)
    expect(again.status, 'still down: fails again, at the same iteration').to.equal('failed')
    kind.fix()
    const done = await h.engine.resume(failed.run_id, settings)
    expect(done.status).to.equal('succeeded')
    expect(kind.calls()).to.equal(3)
    const snaps = await h.store.readSnapshots(failed.run_id)
    expect(snaps.map((s) => [s.step.seq, s.step.name, s.step.iteration])).to.deep.equal([
      [1, 'a', 1],
      [2, 'flaky', 1],
      [3, 'flaky', 1],
      [4, 'flaky', 1],
      [5, 'z', 1],
    ])
    const run = await h.store.readRun(failed.run_id)
    expect(run.redrives!.map((r) => [r.seq, r.step, r.from, r.by])).to.deep.equal([
      [2, 'flaky', 'failed', 'tester'],
      [3, 'flaky', 'failed', 'tester'],
    ])
    expect(run.ended_at).to.be.a('string')
    const events = await h.store.readEvents(failed.run_id)
    expect(events.map((e) => e.event).filter((e) => e !== 'step_started')).to.deep.equal([
      'created',
      'started',
      'failed',
      'redriven',
      'failed',
      'redriven',
      'succeeded',
    ])
  })

  it('goes on at the redriven step after a crash right after the redrive was recorded', async () => {
    const kind = flakyKind()
    let crash = false
    const h = await harness(
      dir,
      {noop: kind.handler},
      {
        hook: (point) => {
          if (crash && point === 'before-step:flaky') throw new Error('simulated crash')
        },
      },
    )
    const p = await pipelineFrom(dir, 'r', 'version: 1\nname: r\nsteps:\n  - {id: flaky, kind: noop, next: z}\n  - {id: z, kind: noop}\n')
    const failed = await h.start(p)
    expect(failed.status).to.equal('failed')
    kind.fix()
    crash = true
    const settings = {pipeline: p, policy: defaultPolicy(), cwd: dir}
    let thrown: unknown
    await h.engine.resume(failed.run_id, settings).catch((error: unknown) => (thrown = error))
    expect((thrown as Error).message).to.equal('simulated crash')
    expect((await h.store.readRun(failed.run_id)).status).to.equal('running')
    crash = false
    const done = await h.engine.resume(failed.run_id, settings)
    expect(done.status, 'not settled as failed again from the old snapshot').to.equal('succeeded')
    expect((await h.store.readSnapshots(failed.run_id)).map((s) => s.step.name)).to.deep.equal(['flaky', 'flaky', 'z'])
  })
})
