import {expect} from 'chai'
import {PipeError} from '../../src/errors.js'
import {registry} from '../../src/steps/registry.js'
import type {StepHandler} from '../../src/steps/types.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-engine-')))
afterEach(async () => cleanup())

/** A noop handler whose attempts follow a script: an error to throw, or an outcome. */
function scripted(script: Array<PipeError | string>, safe = true): {handler: StepHandler<'noop'>; calls: () => number} {
  let calls = 0
  const handler: StepHandler<'noop'> = {
    ...registry.noop,
    safeToRetry: safe,
    outcomes: (step) => [step.outcome ?? 'success'],
    async run() {
      const next = script[Math.min(calls++, script.length - 1)]!
      if (next instanceof PipeError) throw next
      return {type: 'done', outcome: next, reason: `scripted ${next}`, outputs: {}}
    },
  }
  return {handler, calls: () => calls}
}

const flaky = (): PipeError => new PipeError('E_TOOL_TIMEOUT', 'upstream timed out', {retryable: true})
const fatal = (): PipeError => new PipeError('E_INVALID_ARGS', 'bad request', {retryable: false})

describe('engine', () => {
  it('walks a chain and writes one snapshot per step with seq from 1', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(
      dir,
      'chain',
      'version: 1\nname: chain\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: noop}\n',
    )
    const out = await h.start(p)
    expect(out.status).to.equal('succeeded')
    const snaps = await h.store.readSnapshots(out.run_id)
    expect(snaps.map((s) => [s.step.seq, s.step.name, s.decisions[0]!.next_step])).to.deep.equal([
      [1, 'a', 'b'],
      [2, 'b', 'c'],
      [3, 'c', null],
    ])
    const events = await h.store.readEvents(out.run_id)
    expect(events.map((e) => e.event)).to.deep.equal(['created', 'started', 'step_started', 'step_started', 'step_started', 'succeeded'])
    // Each step's start names it, and moves the run's UPDATED.
    expect(events.filter((e) => e.event === 'step_started').map((e) => [e.step, e.seq])).to.deep.equal([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ])
  })

  it('retries a retry-safe step after retryable errors with 200/500 ms backoff, recording each attempt', async () => {
    const {handler, calls} = scripted([flaky(), flaky(), 'success'])
    const h = await harness(dir, {noop: handler})
    const p = await pipelineFrom(dir, 'retry', 'version: 1\nname: r\nsteps:\n  - {id: a, kind: noop}\n')
    const out = await h.start(p)
    expect(out.status).to.equal('succeeded')
    expect(calls()).to.equal(3)
    expect(h.sleeps).to.deep.equal([200, 500])
    const [snap] = await h.store.readSnapshots(out.run_id)
    expect(snap!.step.attempts).to.equal(3)
    expect(snap!.errors.map((e) => [e.code, e.attempt, e.retryable])).to.deep.equal([
      ['E_TOOL_TIMEOUT', 1, true],
      ['E_TOOL_TIMEOUT', 2, true],
    ])
  })

  it('gives up after max_retries and fails the run with a snapshot whose spec_version_out is null', async () => {
    const {handler, calls} = scripted([flaky()])
    const h = await harness(dir, {noop: handler})
    const p = await pipelineFrom(dir, 'retry', 'version: 1\nname: r\nsteps:\n  - {id: a, kind: noop, retry: {max_retries: 2}}\n')
    const out = await h.start(p)
    expect(out.status).to.equal('failed')
    expect(calls()).to.equal(3)
    expect(h.sleeps).to.deep.equal([200, 500])
    const [snap] = await h.store.readSnapshots(out.run_id)
    expect(snap!.spec_version_out).to.equal(null)
    expect(snap!.errors).to.have.length(3)
    expect(snap!.decisions[0]).to.include({decision: 'error', next_step: null})
    expect((await h.store.readRun(out.run_id)).error?.code).to.equal('E_TOOL_TIMEOUT')
  })

  it('never retries a non-retryable error, nor a step that is not safe to run twice', async () => {
    const nonRetryable = scripted([fatal(), 'success'])
    let h = await harness(dir, {noop: nonRetryable.handler})
    const p = await pipelineFrom(dir, 'once', 'version: 1\nname: o\nsteps:\n  - {id: a, kind: noop}\n')
    expect((await h.start(p)).status).to.equal('failed')
    expect(nonRetryable.calls()).to.equal(1)
    const unsafe = scripted([flaky(), 'success'], false)
    h = await harness(dir, {noop: unsafe.handler})
    expect((await h.start(p)).status).to.equal('failed')
    expect(unsafe.calls()).to.equal(1)
    expect(h.sleeps).to.deep.equal([])
  })

  it('times a step out with E_TOOL_TIMEOUT', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(dir, 'slow', 'version: 1\nname: s\nsteps:\n  - {id: a, kind: noop, sleep_ms: 5000, timeout_ms: 50, retry: {max_retries: 0}}\n')
    const out = await h.start(p)
    expect(out.status).to.equal('failed')
    expect(out.error?.code).to.equal('E_TOOL_TIMEOUT')
  })

  it('stops a step whose handler ignores the abort signal at its timeout, and ends the run failed', async () => {
    let calls = 0
    let signalled: AbortSignal | undefined
    const stubborn: StepHandler<'noop'> = {
      ...registry.noop,
      safeToRetry: false,
      // Never settles and never looks at its signal.
      run: async ({signal}) => {
        calls++
        signalled = signal
        return new Promise(() => undefined)
      },
    }
    const h = await harness(dir, {noop: stubborn})
    const p = await pipelineFrom(dir, 'stubborn', 'version: 1\nname: s\nsteps:\n  - {id: a, kind: noop, timeout_ms: 100, next: b}\n  - {id: b, kind: noop}\n')
    const out = await h.start(p)
    expect(out.status).to.equal('failed')
    expect(out.error).to.include({code: 'E_TOOL_TIMEOUT', step: 'a'})
    expect(calls).to.equal(1)
    expect(signalled?.aborted).to.equal(true)
    const snaps = await h.store.readSnapshots(out.run_id)
    expect(snaps.map((s) => [s.step.name, s.decisions[0]!.decision, s.decisions[0]!.run_status])).to.deep.equal([['a', 'error', 'failed']])
  })

  it('ends a run failed on a failure outcome with no route, and carries a handled failure the run ends on', async () => {
    // A noop ends with its step's outcome; this one declares "bad" a failure.
    const failing: StepHandler<'noop'> = {
      ...registry.noop,
      failures: {bad: {code: 'E_BUILD_FAIL', hint: ({run_id, step}) => `look at ${run_id} ${step}`}},
      run: async ({step}) => ({type: 'done', outcome: step.outcome ?? 'success', reason: `scripted ${step.outcome}`, outputs: {}}),
    }
    const h = await harness(dir, {noop: failing})
    const lone = await pipelineFrom(dir, 'lone', 'version: 1\nname: l\nsteps:\n  - {id: a, kind: noop, outcome: bad, next: b}\n  - {id: b, kind: ingest}\n')
    const out = await h.start(lone)
    expect(out.status).to.equal('failed')
    expect(out.error).to.deep.include({code: 'E_BUILD_FAIL', step: 'a', hint: `look at ${out.run_id} a`})
    const [snap] = await h.store.readSnapshots(out.run_id)
    expect(snap!.decisions[0]).to.include({decision: 'bad', next_step: null, run_status: 'failed'})
    expect(snap!.errors.at(-1)).to.include({code: 'E_BUILD_FAIL', retryable: false})

    const handled = 'version: 1\nname: h\nsteps:\n  - {id: a, kind: noop, outcome: bad, on: {bad: b}}\n  - {id: b, kind: ingest}\n'
    const carried = await h.start(await pipelineFrom(dir, 'handled', handled))
    expect(carried.status).to.equal('failed')
    expect(carried.error).to.include({code: 'E_BUILD_FAIL', step: 'b'})
    expect(carried.error?.message).to.contain('step a ended "bad"')
    expect((await h.start(await pipelineFrom(dir, 'fine', handled.replace(/bad/g, 'ok')))).status).to.equal('succeeded')
    // Going round a loop and leaving it by on_exhausted recovers nothing.
    const retried =
      'version: 1\nname: r\nsteps:\n  - {id: a, kind: noop, outcome: bad, on: {bad: b}, max_iterations: 2, on_exhausted: c}\n  - {id: b, kind: noop, next: a}\n  - {id: c, kind: noop}\n'
    expect((await h.start(await pipelineFrom(dir, 'retried', retried))).status).to.equal('failed')
  })

  it('routes a failure along on.error and goes on', async () => {
    const {handler} = scripted([fatal()])
    const h = await harness(dir, {gate: {...registry.gate, run: async () => Promise.reject(new PipeError('E_STATE', 'no spec'))}, noop: handler})
    const p = await pipelineFrom(
      dir,
      'err',
      'version: 1\nname: e\ngates:\n  g: {rules: [{path: goal, required: true}]}\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: check}\n  - {id: check, kind: gate, gates: [g], on: {error: recover, pass: done, fail: done}}\n  - {id: recover, kind: review}\n  - {id: done, kind: review}\n',
    )
    const out = await h.start(p)
    const snaps = await h.store.readSnapshots(out.run_id)
    expect(snaps[2]!.decisions[0]).to.include({decision: 'error', next_step: 'recover'})
    expect(snaps[2]!.errors[0]!.code).to.equal('E_STATE')
  })

  it('ends a loop at max_iterations as a decided failure, or follows on_exhausted', async () => {
    const h = await harness(dir)
    const loop = 'version: 1\nname: l\nsteps:\n  - {id: a, kind: noop, next: b, max_iterations: 3}\n  - {id: b, kind: noop, outcome: again, on: {again: a}}\n'
    const out = await h.start(await pipelineFrom(dir, 'loop', loop))
    expect(out.status).to.equal('failed')
    expect(out.error).to.include({code: 'E_LOOP_LIMIT', step: 'a'})
    const snaps = await h.store.readSnapshots(out.run_id)
    expect(snaps.map((s) => s.step.name)).to.deep.equal(['a', 'b', 'a', 'b', 'a', 'b'])
    expect(snaps.filter((s) => s.step.name === 'a').map((s) => s.step.iteration)).to.deep.equal([1, 2, 3])
    const escape = loop.replace('max_iterations: 3}', 'max_iterations: 2, on_exhausted: out}') + '  - {id: out, kind: noop}\n'
    const escaped = await h.start(await pipelineFrom(dir, 'escape', escape))
    expect(escaped.status).to.equal('succeeded')
    expect((await h.store.readSnapshots(escaped.run_id)).map((s) => s.step.name)).to.deep.equal(['a', 'b', 'a', 'b', 'out'])
    expect((await h.store.readEvents(escaped.run_id)).some((e) => e.event === 'loop_exhausted')).to.equal(true)
  })

  it('pauses for a review and continues after a decision, recording who decided', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(
      dir,
      'review',
      'version: 1\nname: rv\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: r}\n  - {id: r, kind: review, on: {go: done}}\n  - {id: done, kind: noop}\n',
    )
    const paused = await h.start(p)
    expect(paused.status).to.equal('awaiting_input')
    expect(paused.pending).to.include({kind: 'review', step: 'r'})
    expect(await h.store.readSnapshots(paused.run_id)).to.have.length(2)
    const held = await h.engine.resume(paused.run_id, {
      pipeline: p,
      policy: (await import('../../src/policy/policy.js')).defaultPolicy(),
      cwd: dir,
      review: {decision: 'hold', note: 'later'},
    })
    expect(held.status).to.equal('awaiting_input')
    const done = await h.engine.resume(paused.run_id, {
      pipeline: p,
      policy: (await import('../../src/policy/policy.js')).defaultPolicy(),
      cwd: dir,
      review: {decision: 'go'},
    })
    expect(done.status).to.equal('succeeded')
    const snaps = await h.store.readSnapshots(paused.run_id)
    expect(snaps.map((s) => [s.step.name, s.decisions[0]!.decision, s.decisions[0]!.next_step])).to.deep.equal([
      ['in', 'success', 'c'],
      ['c', 'success', 'r'],
      ['r', 'hold', 'r'],
      ['r', 'go', 'done'],
      ['done', 'success', null],
    ])
    expect(snaps[2]!.decisions[0]).to.include({by: 'tester', note: 'later'})
  })

  it('marks a run interrupted when its signal aborts, and resumes without repeating a step', async () => {
    const controller = new AbortController()
    const h = await harness(dir, {}, {signal: controller.signal, hook: (point) => void (point === 'after-step:b' && controller.abort())})
    const p = await pipelineFrom(
      dir,
      'int',
      'version: 1\nname: i\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: noop}\n',
    )
    const out = await h.start(p)
    expect(out.status).to.equal('interrupted')
    const again = await harness(dir)
    const resumed = await again.engine.resume(out.run_id, {pipeline: p, policy: (await import('../../src/policy/policy.js')).defaultPolicy(), cwd: dir})
    expect(resumed.status).to.equal('succeeded')
    expect((await again.store.readSnapshots(out.run_id)).map((s) => `${s.step.seq}:${s.step.name}`)).to.deep.equal(['1:a', '2:b', '3:c'])
  })

  it('refuses to resume when the pipeline changed', async () => {
    const h = await harness(dir)
    const text =
      'version: 1\nname: c\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: r}\n  - {id: r, kind: review, on: {go: d}}\n  - {id: d, kind: noop}\n'
    const waiting = await h.start(await pipelineFrom(dir, 'chg', text))
    expect(waiting.status).to.equal('awaiting_input')
    const changed = await pipelineFrom(dir, 'chg', text.replace('{id: d, kind: noop}', '{id: d, kind: noop, sleep_ms: 1}'))
    const {defaultPolicy} = await import('../../src/policy/policy.js')
    try {
      await h.engine.resume(waiting.run_id, {pipeline: changed, policy: defaultPolicy(), cwd: dir, review: {decision: 'go'}})
      expect.fail('resume should refuse')
    } catch (error) {
      expect((error as PipeError).code).to.equal('E_CONFLICT')
    }
    expect((await h.store.readRun(waiting.run_id)).status).to.equal('awaiting_input')
  })
})
