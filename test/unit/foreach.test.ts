import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {loadPipeline} from '../../src/config/pipeline.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {kindCatalog, registry} from '../../src/steps/registry.js'
import type {StepHandler} from '../../src/steps/types.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Store} from '../../src/store/file/store.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-foreach-')))
afterEach(async () => cleanup())

/** A clock that moves one millisecond per reading, so the order of readings is the order of times. */
function ticking(): () => Date {
  let t = Date.parse('2026-01-01T00:00:00Z')
  return () => new Date(t++)
}

const ITEM = `version: 1
name: item
inputs:
  name: {type: string, required: true}
  fail: {type: boolean, default: false}
steps:
  - id: check
    kind: choice
    choices:
      - {when: "\${{ inputs.fail }}", next: bad}
    default: work
  - {id: work, kind: noop, next: good}
  - {id: good, kind: end, status: succeeded, reason: "done \${{ inputs.name }} under \${{ run.parent }}"}
  - {id: bad, kind: end, status: failed, reason: "item \${{ inputs.name }} failed"}
`

function parent(items: string, extra: string): string {
  return `version: 1
name: parent
steps:
  - id: each
    kind: foreach
    items: "\${{ ${items} }}"
    as: it
    pipeline: ./item.yaml
    with: {name: "\${{ it.name }}", fail: "\${{ it.fail }}"}
${extra}
`
}

async function children(store: Store, parentId: string): Promise<RunRecord[]> {
  const out: RunRecord[] = []
  for (const id of await store.listRunIds()) {
    const r = await store.readRun(id)
    if (r.parent?.run_id === parentId) out.push(r)
  }
  return out.sort((a, b) => (a.parent!.index ?? 0) - (b.parent!.index ?? 0))
}

/**
 * The most children alive at one moment: each child from its creation to its end (run.json
 * created_at, ended_at), or only while its `work` step ran (snapshot times). An end at the same
 * instant as a start does not overlap it.
 */
async function maxOverlap(store: Store, runs: RunRecord[], what: 'runs' | 'work'): Promise<number> {
  const points: Array<[number, number]> = []
  for (const r of runs) {
    if (what === 'runs') points.push([Date.parse(r.created_at), 1], [Date.parse(r.ended_at!), -1])
    else {
      for (const s of await store.readSnapshots(r.run_id)) {
        if (s.step.name === 'work') points.push([Date.parse(s.step.started_at), 1], [Date.parse(s.step.ended_at), -1])
      }
    }
  }
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let now = 0
  let max = 0
  for (const [, d] of points) max = Math.max(max, (now += d))
  return max
}

/** A noop whose runs meet in pairs: each waits until its partner has started too (no sleeps, no timing). */
function pairs(): StepHandler<'noop'> {
  let arrived = 0
  const waiting: Array<{need: number; go: () => void}> = []
  return {
    ...registry.noop,
    async run() {
      const me = ++arrived
      const need = Math.ceil(me / 2) * 2
      for (const w of waiting.filter((x) => arrived >= x.need)) w.go()
      if (arrived < need) await new Promise<void>((go) => waiting.push({need, go}))
      return {type: 'done', outcome: 'success', reason: `pair member ${me}`, outputs: {}}
    },
  }
}

describe('foreach', () => {
  it('runs one child run per item, at most concurrency at a time (measured by overlapping child steps)', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const h = await harness(dir, {noop: pairs()}, {now: ticking()})
    const items =
      "[{'name': 'a', 'fail': false}, {'name': 'b', 'fail': false}, {'name': 'c', 'fail': false}, {'name': 'd', 'fail': false}, {'name': 'e', 'fail': false}, {'name': 'f', 'fail': false}]"
    const p = await pipelineFrom(dir, 'parent', parent(items, '    concurrency: 2'))
    const out = await h.start(p)
    expect(out.status, out.reason).to.equal('succeeded')
    const kids = await children(h.store, out.run_id)
    expect(kids.map((k) => [k.parent!.index, k.status, k.inputs?.['name']])).to.deep.equal(['a', 'b', 'c', 'd', 'e', 'f'].map((n, i) => [i, 'succeeded', n]))
    // Two children meet at work, so two were running at once; never more than concurrency were alive.
    expect(await maxOverlap(h.store, kids, 'work')).to.equal(2)
    expect(await maxOverlap(h.store, kids, 'runs')).to.equal(2)
    const [snap] = await h.store.readSnapshots(out.run_id)
    expect(snap!.decisions[0]!.decision).to.equal('success')
    const outputs = snap!.outputs as {items: Array<{index: number; run_id: string; status: string}>; succeeded: number; failed: number}
    expect(outputs).to.include({succeeded: 6, failed: 0})
    expect(outputs.items.map((i) => i.run_id)).to.deep.equal(kids.map((k) => k.run_id))
    // Each child reads its parent's id as run.parent and records its own run.
    const last = (await h.store.readSnapshots(kids[0]!.run_id)).at(-1)!
    expect(last.decisions[0]!.reason).to.equal(`done a under ${out.run_id}`)
  })

  it('runs the children one at a time by default', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const h = await harness(dir, {}, {now: ticking()})
    const p = await pipelineFrom(
      dir,
      'parent',
      parent(
        "[{'name': 'a', 'fail': false}, {'name': 'b', 'fail': true}, {'name': 'c', 'fail': false}]",
        '    on: {partial: done}\n  - {id: done, kind: end, status: succeeded, reason: "${{ steps.each.outputs.failed }} failed"}',
      ),
    )
    const out = await h.start(p)
    expect(out.status, out.reason).to.equal('succeeded')
    expect(out.reason).to.equal('1 failed')
    const kids = await children(h.store, out.run_id)
    expect(kids.map((k) => k.status)).to.deep.equal(['succeeded', 'failed', 'succeeded'])
    expect(await maxOverlap(h.store, kids, 'runs')).to.equal(1)
  })

  it('with fail_fast, the first failed child cancels the rest and the parent records why; fail unrouted fails the run', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    // A child that does not fail waits at work until it is stopped: only fail_fast can end it.
    const stuck: StepHandler<'noop'> = {
      ...registry.noop,
      run: ({signal}) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error), {once: true})),
    }
    const h = await harness(dir, {noop: stuck})
    const items = "[{'name': 'a', 'fail': false}, {'name': 'b', 'fail': true}, {'name': 'c', 'fail': false}, {'name': 'd', 'fail': false}]"
    const p = await pipelineFrom(dir, 'parent', parent(items, '    concurrency: 2\n    fail_fast: true'))
    const out = await h.start(p)
    expect(out.status).to.equal('failed')
    const [snap] = await h.store.readSnapshots(out.run_id)
    expect(snap!.decisions[0]!.decision).to.equal('fail')
    expect(snap!.decisions[0]!.reason).to.match(/^item 1 failed \(child run failed: E_ENDED: item b failed\); fail_fast stopped the rest/)
    const outputs = snap!.outputs as {
      items: Array<{index: number; run_id: string | null; status: string; reason: string}>
      succeeded: number
      failed: number
      cancelled: number
    }
    expect(outputs).to.include({succeeded: 0, failed: 1, cancelled: 3})
    expect(outputs.items.map((i) => i.status)).to.deep.equal(['cancelled', 'failed', 'cancelled', 'cancelled'])
    expect(outputs.items[2]!.run_id).to.equal(null)
    expect(outputs.items[2]!.reason).to.match(/^not started: item 1 failed/)
    const kids = await children(h.store, out.run_id)
    expect(kids.map((k) => [k.parent!.index, k.status])).to.deep.equal([
      [0, 'cancelled'],
      [1, 'failed'],
    ])
    expect(kids[0]!.status_reason).to.match(/cancelled by fail_fast: item 1 failed/)
    const run = await h.store.readRun(out.run_id)
    expect(run.error?.message).to.match(/failure outcome "fail"/)
  })

  it('is bounded only by its own timeout_ms, not the policy step timeout its children each have', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const h = await harness(dir)
    const policy = defaultPolicy()
    // Far shorter than creating and driving a child run takes; each child step itself finishes at once.
    policy.policy.resource_limits.step_timeout_ms = 1
    const p = await pipelineFrom(dir, 'parent', parent("[{'name': 'a', 'fail': false}, {'name': 'b', 'fail': false}]", ''))
    const out = await h.engine.start({
      pipeline: p,
      policy,
      cwd: dir,
      input: {kind: 'text', ref: 'text://test', text: 'x'},
      provider: {kind: 'offline', model: 'offline-rules-1', endpoint_host: null},
    })
    expect(out.status, out.reason).to.equal('succeeded')
    expect((await children(h.store, out.run_id)).map((k) => k.status)).to.deep.equal(['succeeded', 'succeeded'])
  })

  it('runs inline steps as an anonymous child pipeline with its own inputs, checked in the file that holds them', async () => {
    const h = await harness(dir)
    const inline = (reason: string): string => `version: 1
name: inline
steps:
  - id: each
    kind: foreach
    items: "\${{ ['a', 'b'] }}"
    inputs:
      name: {type: string, required: true}
    steps:
      - {id: work, kind: noop, next: done}
      - {id: done, kind: end, status: succeeded, reason: "${reason}"}
    with: {name: "\${{ item }}"}
    on: {success: fin, partial: fin, fail: fin}
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.succeeded }} ok"}
`
    const p = await pipelineFrom(dir, 'inline', inline('did ${{ inputs.name }}'))
    const out = await h.start(p)
    expect(out.status, out.reason).to.equal('succeeded')
    const kids = await children(h.store, out.run_id)
    expect(kids.map((k) => [k.status, k.pipeline.name, k.pipeline.path, k.inputs])).to.deep.equal(
      ['a', 'b'].map((n) => ['succeeded', 'inline.each', `${path.join(dir, 'inline.yaml')}#each`, {name: n}]),
    )
    expect((await h.store.readSnapshots(kids[1]!.run_id)).at(-1)!.decisions[0]!.reason).to.equal('did b')
    // The inline steps read the child's inputs, not the parent's: a typo is found at its place in the parent's file.
    const file = path.join(dir, 'bad.yaml')
    await writeFile(file, inline('did ${{ inputs.nmae }}'))
    const bad = await loadPipeline(file, kindCatalog)
    expect(bad.ok).to.equal(false)
    if (!bad.ok)
      expect(bad.diagnostics.map((d) => `${path.basename(d.file)}:${d.line}:${d.col} ${d.message}`)).to.deep.equal([
        'bad.yaml:11:74 unknown input "nmae" (declared: name) — did you mean "name"?',
      ])
  })

  it('validate checks items, the alias, the child file, its inputs and cycles', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const bad = async (name: string, yaml: string): Promise<string[]> => {
      const file = path.join(dir, `${name}.yaml`)
      await writeFile(file, yaml)
      const result = await loadPipeline(file, kindCatalog)
      expect(result.ok, name).to.equal(false)
      return result.ok ? [] : result.diagnostics.map((d) => `${d.line}:${d.col} ${d.message}`)
    }
    const typed = `version: 1\nname: t\ninputs:\n  names: {type: string, default: x}\nsteps:\n  - {id: each, kind: foreach, items: "\${{ inputs.names }}", pipeline: ./item.yaml, with: {name: "\${{ itme }}"}}\n`
    const found = await bad('typed', typed)
    expect(found.join('\n')).to.match(/expected a list/)
    expect(found.join('\n')).to.match(/unknown name "itme".*did you mean "item"/)
    expect(
      await bad(
        'keys',
        `version: 1\nname: k\nsteps:\n  - {id: each, kind: foreach, items: "\${{ ['a'] }}", pipeline: ./item.yaml, with: {nam: "\${{ item }}"}}\n`,
      ),
    ).to.deep.equal([
      '4:77 the pipeline ./item.yaml requires input "name": give it under with:',
      '4:84 the pipeline ./item.yaml has no input "nam" — did you mean "name"?; its inputs: name, fail',
    ])
    expect(await bad('missing', 'version: 1\nname: m\nsteps:\n  - {id: sub, kind: pipeline, file: ./nowhere.yaml}\n')).to.deep.equal([
      `4:37 pipeline file ./nowhere.yaml does not exist (looked for ${path.join(dir, 'nowhere.yaml')})`,
    ])
    await writeFile(path.join(dir, 'b.yaml'), 'version: 1\nname: b\nsteps:\n  - {id: back, kind: pipeline, file: ./a.yaml}\n')
    const cycle = await bad('a', 'version: 1\nname: a\nsteps:\n  - {id: sub, kind: pipeline, file: ./b.yaml}\n')
    expect(cycle.join('\n')).to.match(/sub-pipelines form a cycle: .*a\.yaml -> .*b\.yaml -> .*a\.yaml/)
    // A literal value that does not fit the child's input type is found before the run.
    const literal = await bad('literal', `version: 1\nname: l\nsteps:\n  - {id: sub, kind: pipeline, file: ./item.yaml, with: {name: x, fail: maybe}}\n`)
    expect(literal).to.have.length(1)
    expect(literal[0]).to.match(/^4:72 input "fail" of the pipeline \.\/item\.yaml: fail: "maybe" is not true or false/)
    await writeFile(
      path.join(dir, 'modes.yaml'),
      'version: 1\nname: modes\ninputs:\n  mode: {type: string, enum: [fast, slow]}\n  label: {type: string, default: x}\nsteps:\n  - {id: s, kind: noop}\n',
    )
    expect(await bad('enum', `version: 1\nname: e\nsteps:\n  - {id: sub, kind: pipeline, file: ./modes.yaml, with: {mode: medium, label: 7}}\n`)).to.deep.equal(
      ['4:64 input "mode" of the pipeline ./modes.yaml: mode: "medium" is not one of "fast", "slow"'],
    )
    // An expression in with: is typed too: one that can never give the input's type is an error before the run, at the value.
    const exprs = await bad(
      'exprtypes',
      `version: 1\nname: x\ninputs:\n  n: {type: integer, default: 1}\nsteps:\n  - {id: sub, kind: pipeline, file: ./item.yaml, with: {name: "\${{ inputs.n }}", fail: "\${{ inputs.n + 1 }}"}, next: each}\n  - {id: each, kind: foreach, items: "\${{ ['a', 'b'] }}", pipeline: ./item.yaml, with: {name: "\${{ item }}", fail: "\${{ size(item) }}"}, next: txt}\n  - {id: txt, kind: pipeline, file: ./item.yaml, with: {name: x, fail: "is \${{ inputs.n > 0 }}"}}\n`,
    )
    expect(exprs).to.deep.equal([
      '6:88 input "fail" of the pipeline ./item.yaml is a boolean, but ${{ inputs.n + 1 }} gives int',
      '7:116 input "fail" of the pipeline ./item.yaml is a boolean, but ${{ size(item) }} gives int',
      '8:72 input "fail" of the pipeline ./item.yaml is a boolean, but text around ${{ }} makes a string',
    ])
    // The alias is typed by the items' element: a field the element lacks is an error.
    const elem = await bad(
      'elem',
      `version: 1\nname: e\nsteps:\n  - {id: a, kind: foreach, items: "\${{ ['x'] }}", pipeline: ./item.yaml, with: {name: x}, next: b}\n  - {id: b, kind: foreach, items: "\${{ steps.a.outputs.items }}", as: r, pipeline: ./item.yaml, with: {name: "\${{ r.run_idd }}"}}\n`,
    )
    expect(elem.join('\n')).to.match(/has no field "run_idd".*did you mean "run_id"/)
  })
})
