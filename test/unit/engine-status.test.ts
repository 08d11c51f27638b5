/**
 * Every way the walk ends a run records the same fields: the run's error with a trace id that its
 * timeline line names too, the reason on the record and on the line, and the spec version the run
 * reached. Each case below ends a run a different way (issue 36: these were separate hand-written
 * blocks that had drifted apart).
 */
import {expect} from 'chai'
import type {LoadedPipeline} from '../../src/config/loaded.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {registry} from '../../src/steps/registry.js'
import type {StepHandler} from '../../src/steps/types.js'
import type {RunOutcome} from '../../src/engine/engine.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom, type Harness} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-engine-status-')))
afterEach(async () => cleanup())

/** A compile step that writes its spec version, then routes the run to a step the pipeline does not have. */
const strayCompile: StepHandler<'compile'> = {
  ...registry.compile,
  async run(context) {
    const result = await registry.compile.run(context)
    return result.type === 'done' ? {...result, next: 'ghost'} : result
  },
}

function start(h: Harness, p: LoadedPipeline, inputs: Record<string, number> = {}): Promise<RunOutcome> {
  return h.engine.start({
    pipeline: p,
    policy: defaultPolicy(),
    cwd: dir,
    input: {kind: 'text', ref: 'text://test', text: 'The tool must export reports as PDF.'},
    inputs,
    provider: {kind: 'offline', model: 'offline-rules-1', endpoint_host: null},
  })
}

/** What every failed run must record, whichever way it failed. */
async function expectFailureRecorded(h: Harness, out: RunOutcome, code: string): Promise<void> {
  expect(out.status).to.equal('failed')
  expect(out.error?.code).to.equal(code)
  const record = await h.store.readRun(out.run_id)
  expect(record.status).to.equal('failed')
  expect(record.error?.code, 'the run records its error').to.equal(code)
  expect(record.error?.trace_id, 'the error has a trace id').to.match(/^tr-[0-9a-f]{16}$/)
  expect(out.error?.trace_id, 'the outcome names the same occurrence').to.equal(record.error?.trace_id)
  expect(record.status_reason, 'the record says why').to.equal(out.reason)
  expect(record.spec_version, 'the record keeps the spec version the run reached').to.equal(out.spec_version)
  const failed = (await h.store.readEvents(out.run_id)).filter((e) => e.event === 'failed')
  expect(failed).to.have.length(1)
  expect(failed[0]!.reason, 'the timeline line says why').to.equal(out.reason)
  expect(failed[0]!.trace_id, 'the timeline line names the error').to.equal(record.error?.trace_id)
}

describe('engine: every way a run fails records the same fields', () => {
  it('a route to a step the pipeline does not have', async () => {
    const h = await harness(dir, {compile: strayCompile})
    const p = await pipelineFrom(dir, 'stray', 'version: 1\nname: stray\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile}\n')
    const out = await start(h, p)
    expect(out.spec_version, 'the compile step wrote a spec version before the run failed').to.be.a('string')
    await expectFailureRecorded(h, out, 'E_STATE')
  })

  it('a max_iterations expression that gives no valid bound', async () => {
    const h = await harness(dir)
    const text = 'version: 1\nname: bound\ninputs:\n  n: {type: integer, default: 0}\nsteps:\n  - {id: a, kind: noop, max_iterations: "${{ inputs.n }}"}\n'
    const p = await pipelineFrom(dir, 'bound', text)
    await expectFailureRecorded(h, await start(h, p), 'E_CONFIG')
  })

  it('a loop that reaches its max_iterations', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(
      dir,
      'loop',
      'version: 1\nname: loop\nsteps:\n  - {id: a, kind: noop, next: b, max_iterations: 2}\n  - {id: b, kind: noop, outcome: again, on: {again: a}}\n',
    )
    await expectFailureRecorded(h, await start(h, p), 'E_LOOP_LIMIT')
  })

  it('a failed step', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(dir, 'end', 'version: 1\nname: end\nsteps:\n  - {id: stop, kind: end, status: failed, reason: no}\n')
    await expectFailureRecorded(h, await start(h, p), 'E_ENDED')
  })

  it('declared outputs that cannot be evaluated', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(
      dir,
      'outputs',
      'version: 1\nname: outputs\ninputs:\n  s: {type: string, default: abc}\noutputs:\n  x: {type: integer, value: "${{ int(inputs.s) }}"}\nsteps:\n  - {id: a, kind: noop}\n',
    )
    const out = await start(h, p)
    expect(out.reason).to.match(/^the outputs failed/)
    await expectFailureRecorded(h, out, out.error!.code)
  })
})

describe('engine: a run stopped by a signal', () => {
  it('records why, and the spec version it reached, like every other status change', async () => {
    const stop = new AbortController()
    // The signal comes while this step runs, after the compile step wrote a spec version.
    const stopping: StepHandler<'noop'> = {
      ...registry.noop,
      async run() {
        stop.abort()
        return {type: 'done', outcome: 'success', reason: 'ok', outputs: {}}
      },
    }
    const h = await harness(dir, {noop: stopping}, {signal: stop.signal})
    const p = await pipelineFrom(
      dir,
      'stop',
      'version: 1\nname: stop\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: s}\n  - {id: s, kind: noop, next: t}\n  - {id: t, kind: noop}\n',
    )
    const out = await start(h, p)
    expect(out.status).to.equal('interrupted')
    expect(out.spec_version).to.be.a('string')
    const record = await h.store.readRun(out.run_id)
    expect(record.status).to.equal('interrupted')
    expect(record.status_reason).to.equal(out.reason)
    expect(record.spec_version).to.equal(out.spec_version)
  })
})
