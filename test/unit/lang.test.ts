import {expect} from 'chai'
import {loadPipeline} from '../../src/config/pipeline.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {catalogOf, kindCatalog, registry} from '../../src/steps/registry.js'
import type {StepHandler} from '../../src/steps/types.js'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {LoadedPipeline} from '../../src/config/pipeline.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom, type Harness} from '../helpers/engine.js'
import {expectPipeError} from '../helpers/expect.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-lang-')))
afterEach(async () => cleanup())

/** A noop that reports the (resolved) step it was given, so tests see what resolution made of it. */
const echo: StepHandler<'noop'> = {
  ...registry.noop,
  outputsSchema: () => ({
    type: 'object',
    properties: {description: {type: ['string', 'null']}, items: {type: 'array', items: {type: 'string'}}},
    additionalProperties: false,
  }),
  async run({step}) {
    return {
      type: 'done',
      outcome: step.outcome ?? 'success',
      reason: `echo ${step.description ?? ''}`,
      outputs: {description: step.description ?? null, items: ['a', 'b', 'c']},
    }
  },
}

const echoCatalog = catalogOf({...registry, noop: echo})

function start(h: Harness, p: LoadedPipeline, inputs: Record<string, string | number | boolean> = {}) {
  return h.engine.start({
    pipeline: p,
    policy: defaultPolicy(),
    cwd: dir,
    input: {kind: 'none', ref: 'none://'},
    inputs,
    provider: {kind: 'offline', model: 'offline-rules-1', endpoint_host: null},
  })
}

const head =
  'version: 1\nname: lang\ninputs:\n  who: {type: string, default: world}\n  n: {type: integer, default: 2}\n  loud: {type: boolean, default: false}\n'

describe('pipeline language v2 in the engine', () => {
  it('resolves expressions in a step before its kind runs and records the values in the snapshot', async () => {
    const h = await harness(dir, {noop: echo})
    const p = await pipelineFrom(
      dir,
      'res',
      `${head}steps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, description: "hello \${{ inputs.who }} x\${{ inputs.n }} \${{ steps.a.outputs.items }} $\${{ literal }}"}\n`,
      echoCatalog,
    )
    const out = await start(h, p, {who: 'ada', n: 3, loud: false})
    expect(out.status).to.equal('succeeded')
    const snaps = await h.store.readSnapshots(out.run_id)
    expect((snaps[1]!.outputs as {description: string}).description).to.equal('hello ada x3 ["a","b","c"] ${{ literal }}')
    expect((snaps[1]!.inputs as {resolved: unknown}).resolved).to.deep.equal({description: 'hello ada x3 ["a","b","c"] ${{ literal }}'})
    expect((await h.store.readRun(out.run_id)).inputs).to.deep.equal({who: 'ada', n: 3, loud: false})
  })

  it('a false when: records the step skipped and follows next; a true one runs it', async () => {
    const h = await harness(dir, {noop: echo})
    const p = await pipelineFrom(
      dir,
      'when',
      `${head}steps:\n  - {id: a, kind: noop, when: "\${{ inputs.loud }}", next: b}\n  - {id: b, kind: noop, when: "\${{ steps.a.outcome == 'skipped' }}"}\n`,
    )
    const out = await start(h, p, {loud: false})
    expect(out.status).to.equal('succeeded')
    const snaps = await h.store.readSnapshots(out.run_id)
    expect(snaps.map((s) => [s.step.name, s.decisions[0]!.decision, s.decisions[0]!.next_step])).to.deep.equal([
      ['a', 'skipped', 'b'],
      ['b', 'success', null],
    ])
    expect(snaps[0]!.inputs).to.include.keys('resolved')
    expect((snaps[0]!.inputs as {resolved: unknown}).resolved).to.deep.equal({when: false})
  })

  it('a choice takes the first when that holds, else its default, and never evaluates the ones after', async () => {
    const h = await harness(dir)
    const yaml = (n: number) =>
      `${head}steps:\n  - id: route\n    kind: choice\n    choices:\n      - {when: "\${{ inputs.n > ${n} }}", next: big}\n      - {when: "\${{ 1 / (inputs.n - inputs.n) == 1 }}", next: big}\n    default: small\n  - {id: big, kind: end, status: succeeded, reason: big}\n  - {id: small, kind: end, status: succeeded, reason: small}\n`
    const taken = await start(h, await pipelineFrom(dir, 'choice1', yaml(1)), {n: 2})
    expect(taken.status).to.equal('succeeded')
    expect(taken.reason).to.equal('big')
    const first = await h.store.readSnapshots(taken.run_id)
    expect(first.map((s) => [s.step.name, s.decisions[0]!.decision])).to.deep.equal([
      ['route', 'big'],
      ['big', 'succeeded'],
    ])
    expect(first[0]!.outputs).to.deep.equal({chosen: 'big', matched: 1, condition: '${{ inputs.n > 1 }}'})
    expect((first[0]!.inputs as {resolved: unknown}).resolved).to.deep.equal({'choices[0].when': true})
    // The second when divides by zero: evaluated only when the first does not hold, it fails the step with E_CONFIG.
    const failed = await start(h, await pipelineFrom(dir, 'choice2', yaml(5)), {n: 2})
    expect(failed.status).to.equal('failed')
    expect(failed.error?.code, failed.error?.message).to.equal('E_CONFIG')
    const snap = (await h.store.readSnapshots(failed.run_id))[0]!
    expect(snap.errors).to.have.length(1)
    expect(snap.errors[0]!.message).to.match(/1 \/ \(inputs.n - inputs.n\) == 1/)
  })

  it('end failed ends the run failed with E_ENDED and its reason; cancelled cancels; succeeded succeeds with its reason', async () => {
    const h = await harness(dir)
    const body = (status: string) => `${head}steps:\n  - {id: stop, kind: end, status: ${status}, reason: "\${{ inputs.who }} said ${status}"}\n`
    const fp = await pipelineFrom(dir, 'f', body('failed'))
    const failed = await start(h, fp, {who: 'bob'})
    expect(failed.status).to.equal('failed')
    expect(failed.error).to.include({code: 'E_ENDED', message: 'bob said failed'})
    // The pipeline decided: nothing offers a redrive, and resume refuses one, which would only end the same way.
    expect(failed.redrivable).to.equal(false)
    await expectPipeError(h.engine.resume(failed.run_id, {pipeline: fp, policy: defaultPolicy(), cwd: dir}), 'E_STATE')
    const cancelled = await start(h, await pipelineFrom(dir, 'c', body('cancelled')), {who: 'bob'})
    expect(cancelled.status).to.equal('cancelled')
    expect(cancelled.reason).to.equal('bob said cancelled')
    const ok = await start(h, await pipelineFrom(dir, 's', body('succeeded')), {who: 'bob'})
    expect(ok.status).to.equal('succeeded')
    expect(ok.reason).to.equal('bob said succeeded')
  })

  it('end blocked stops the run blocked; pipe resume goes on at its next', async () => {
    const h = await harness(dir)
    const p = await pipelineFrom(
      dir,
      'b',
      `${head}steps:\n  - {id: stop, kind: end, status: blocked, reason: "needs a person", next: after}\n  - {id: after, kind: noop}\n`,
    )
    const blocked = await start(h, p)
    expect(blocked.status).to.equal('blocked')
    expect(blocked.error).to.include({code: 'E_ENDED', message: 'needs a person'})
    const resumed = await h.engine.resume(blocked.run_id, {pipeline: p, policy: defaultPolicy(), cwd: dir})
    expect(resumed.status).to.equal('succeeded')
    const snaps = await h.store.readSnapshots(blocked.run_id)
    expect(snaps.map((s) => [s.step.name, s.decisions[0]!.decision])).to.deep.equal([
      ['stop', 'blocked'],
      ['stop', 'resumed'],
      ['after', 'success'],
    ])
    expect(snaps[1]!.decisions[0]!.by).to.equal('tester')
  })

  it('a resolved value that does not fit the field is E_CONFIG before the kind runs (a list is never spread)', async () => {
    let ran = 0
    const h = await harness(dir, {noop: {...echo, run: async (c) => (ran++, echo.run(c))}})
    const p = await pipelineFrom(
      dir,
      'fit',
      `${head}steps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, description: "\${{ steps.a.outputs.items }}"}\n`,
      echoCatalog,
    )
    const out = await start(h, p)
    expect(out.status).to.equal('failed')
    expect(out.error?.code).to.equal('E_CONFIG')
    expect(out.error?.message).to.match(/description of step "b" resolved to a list/)
    expect(ran).to.equal(1)
    // Whole-scalar numbers and booleans where a string belongs become their text.
    const q = await pipelineFrom(dir, 'num', `${head}steps:\n  - {id: a, kind: noop, description: "\${{ inputs.n }}"}\n`)
    const num = await start(h, q, {n: 7})
    expect(((await h.store.readSnapshots(num.run_id))[0]!.outputs as {description: unknown}).description).to.equal('7')
  })

  it('reading a step that did not run on this path fails the step with E_CONFIG naming it and the guard', async () => {
    const h = await harness(dir, {noop: echo})
    const p = await pipelineFrom(
      dir,
      'path',
      `${head}steps:\n  - id: a\n    kind: choice\n    choices: [{when: "\${{ inputs.loud }}", next: b}]\n    default: c\n  - {id: b, kind: noop, next: c}\n  - {id: c, kind: noop, description: "\${{ steps.b.outcome }}"}\n`,
      echoCatalog,
    )
    const out = await start(h, p, {loud: false})
    expect(out.status).to.equal('failed')
    expect(out.error?.code).to.equal('E_CONFIG')
    expect(out.error?.message).to.match(/step "b" has not run in this run/)
    expect(out.error?.hint).to.include('has(steps.b)')
    const ok = await start(h, p, {loud: true})
    expect(ok.status).to.equal('succeeded')
  })

  it('secrets are read from the environment and redacted from snapshots; an unset one refuses the run', async () => {
    process.env.PIPE_LANG_TEST_S = 'hunter2-very-secret'
    try {
      const h = await harness(dir, {noop: echo})
      const p = await pipelineFrom(
        dir,
        'sec',
        `${head}secrets: [PIPE_LANG_TEST_S]\nsteps:\n  - {id: a, kind: noop, description: "token=\${{ secrets.PIPE_LANG_TEST_S }}"}\n`,
      )
      const out = await start(h, p)
      expect(out.status).to.equal('succeeded')
      const text = JSON.stringify(await h.store.readSnapshots(out.run_id))
      expect(text).not.to.include('hunter2-very-secret')
      expect(text).to.include('[REDACTED]')
      delete process.env.PIPE_LANG_TEST_S
      const refused = await start(h, p).catch((error: unknown) => error)
      expect(refused).to.have.property('code', 'E_CONFIG')
    } finally {
      delete process.env.PIPE_LANG_TEST_S
    }
  })
})

describe('pipeline language v2 in the loader', () => {
  async function diagnostics(yaml: string): Promise<string[]> {
    const file = path.join(dir, 'p.yaml')
    await writeFile(file, yaml)
    const result = await loadPipeline(file, kindCatalog)
    return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.col} ${d.path} ${d.message}`)
  }

  it('refuses ${{ }} outside steps, where nothing evaluates it (a model name would reach the endpoint as written)', async () => {
    const found = await diagnostics(
      [
        'version: 1',
        'name: x',
        'inputs:',
        '  m: {type: string, default: "${{ inputs.other }}"}',
        'provider:',
        '  model: "gpt-${{ inputs.m }}"',
        'steps:',
        '  - {id: a, kind: noop, description: "${{ inputs.m }} is fine here"}',
        '',
      ].join('\n'),
    )
    expect(found).to.deep.equal([
      '4:30 inputs.m.default ${{ }} is not evaluated in inputs.m.default: expressions are allowed only in the fields of steps, in outputs.NAME.value and in tools.NAME.argv',
      '6:10 provider.model ${{ }} is not evaluated in provider.model: expressions are allowed only in the fields of steps, in outputs.NAME.value and in tools.NAME.argv',
    ])
  })

  it('reports unknown inputs, steps and fields at the line and column inside the scalar, with did-you-mean', async () => {
    const found = await diagnostics(
      [
        'version: 1',
        'name: x',
        'inputs:',
        '  since: {type: string}',
        'steps:',
        '  - id: log',
        '    kind: command',
        '    run: [git, log, "${{ inputs.snce }}..HEAD"]',
        '    parse: lines',
        '    next: show',
        '  - id: show',
        '    kind: noop',
        '    description: "n=${{ size(steps.log.outputs.line) }} ${{ steps.lgo.outcome }}"',
        '    when: "${{ steps.log.outputs.stdout }}"',
        '',
      ].join('\n'),
    )
    expect(found, found.join('\n')).to.have.length(4)
    expect(found[0]).to.match(/^8:33 steps\[0\]\.run\[2\] unknown input "snce" .*did you mean "since"/)
    expect(found[1]).to.match(/^13:48 steps\[1\]\.description steps.log.outputs has no field "line" .*did you mean "lines"/)
    expect(found[2]).to.match(/^13:67 steps\[1\]\.description unknown step "lgo" — did you mean "log"/)
    expect(found[3]).to.match(/^14:16 steps\[1\]\.when expected a bool/)
  })

  it('a step read before it can have run is an error; choice targets count as transitions', async () => {
    const found = await diagnostics(
      [
        'version: 1',
        'name: x',
        'steps:',
        '  - id: first',
        '    kind: noop',
        '    description: "${{ steps.later.outcome }}"',
        '    next: route',
        '  - id: route',
        '    kind: choice',
        '    choices: [{when: "${{ steps.first.outcome == \'success\' }}", next: later}]',
        '    default: nowhere',
        '  - {id: later, kind: end, status: succeeded}',
        '',
      ].join('\n'),
    )
    expect(found).to.deep.equal([
      '6:19 steps[0].description steps.later.outcome reads step "later", which cannot have run before "first" (no path from "later" leads to "first"); the expression would fail at run time',
      '11:14 steps[1].default unknown step "nowhere" in default',
    ])
  })

  it('refuses routes a choice or an end would never take, and on.skipped without when', async () => {
    const found = await diagnostics(
      [
        'version: 1',
        'name: x',
        'steps:',
        '  - id: route',
        '    kind: choice',
        '    choices: [{when: "${{ true }}", next: done}]',
        '    default: done',
        '    next: done',
        '  - {id: done, kind: end, status: failed, next: route, on: {skipped: route}}',
        '',
      ].join('\n'),
    )
    expect(found).to.deep.equal([
      '4:9 steps[0].id steps route -> done form a cycle with no bound; set max_iterations on one of them',
      '8:5 steps[0].next a choice step goes where its choices say; next: is never taken (use default: for the fallback)',
      '9:43 steps[1].next an end step with status failed ends the run; next: applies only to status blocked (where pipe resume goes on)',
      '9:61 steps[1].on.skipped a end step has no outcome "skipped" (outcomes: failed, error, denied)',
    ])
  })

  it('checks input declarations and outcome names against their enum', async () => {
    const found = await diagnostics(
      [
        'version: 1',
        'name: x',
        'inputs:',
        '  n: {type: integer, default: "x"}',
        'steps:',
        '  - {id: a, kind: noop, when: "${{ steps.a.outcome == \'sucess\' }}"}',
        '',
      ].join('\n'),
    )
    expect(found.some((d) => d.startsWith('4:') && /default/.test(d))).to.equal(true)
    expect(found.some((d) => /"sucess"|sucess/.test(d))).to.equal(true)
  })
})
