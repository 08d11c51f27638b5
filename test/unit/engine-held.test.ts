import {expect} from 'chai'
import path from 'node:path'
import {defaultPolicy} from '../../src/policy/policy.js'
import {registry} from '../../src/steps/registry.js'
import type {StepHandler} from '../../src/steps/types.js'
import {Store} from '../../src/store/file/store.js'
import type {RunRecord} from '../../src/types/run.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom, type Harness} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-held-')))
afterEach(async () => cleanup())

describe('engine: the run record it holds while driving a run', () => {
  it('is the record on disk at every step, and a later drive starts from what another writer changed in between', async () => {
    const seen: Array<{step: string; run: RunRecord; disk: RunRecord}> = []
    // The handler reads the store of the harness built with it.
    const built: {h?: Harness} = {}
    const probe: StepHandler<'noop'> = {
      ...registry.noop,
      async run(context) {
        seen.push({step: context.step.id, run: structuredClone(context.run), disk: await built.h!.store.readRun(context.run.run_id)})
        if (context.step.id === 'b' && !context.run.answers)
          return {type: 'await', kind: 'answers', reason: 'b needs an answer', questions: [{id: 'q1', question: 'Why?'}]}
        return {type: 'done', outcome: 'success', reason: 'ok', outputs: {}}
      },
    }
    const h = (built.h = await harness(dir, {noop: probe}))
    const pipeline = await pipelineFrom(
      dir,
      'held',
      'version: 1\nname: held\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: noop}\n',
    )
    const paused = await h.start(pipeline)
    expect(paused.status).to.equal('awaiting_input')

    // Another process (here another Store on the same folder) changes the record between the two drives.
    const other = await Store.open(path.join(dir, '.pipe'))
    await other.updateRun(paused.run_id, (r) => (r.answers = {q1: 'given elsewhere'}), {
      at: new Date().toISOString(),
      event: 'answers_given',
      reason: 'answers to q1',
      by: 'someone',
    })

    const ended = await h.engine.resume(paused.run_id, {pipeline, policy: defaultPolicy(), cwd: dir})
    expect(ended.status).to.equal('succeeded')
    expect(seen.map((s) => s.step)).to.deep.equal(['a', 'b', 'b', 'c'])
    for (const s of seen) expect(s.run, `the record step ${s.step} was given`).to.deep.equal(s.disk)
    expect(seen[2]!.run.answers).to.deep.equal({q1: 'given elsewhere'})
    const events = (await h.store.readEvents(paused.run_id)).map((e) => e.event)
    // Each step's start is a line of its own, recorded before the step acts.
    const s = 'step_started'
    expect(events).to.deep.equal(['created', 'started', s, s, 'paused', 'answers_given', 'resumed', s, s, 'succeeded'])
    expect((await h.store.readRun(paused.run_id)).head?.events).to.equal(10)
  })
})
