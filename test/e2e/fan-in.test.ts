/**
 * Fan-in (issue 30 items 1 and 10) on the built CLI: a pipeline's typed outputs reach its parent as
 * each foreach item's outputs and a pipeline step's outputs.outputs, checked at validate from the
 * child's declaration; inline foreach steps read the as: alias directly, also after a resume.
 *
 * The first `validate` and the first `run` (the data-job example's) and the `resume` are `pipe`
 * processes; the further runs, validates and the snapshot read-backs run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string}
}

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-fan-in-'))
})
afterEach(async () => cleanup())

async function runRecords(): Promise<RunRecord[]> {
  const root = path.join(dir, '.pipe', 'runs')
  const ids = (await readdir(root)).filter((n) => n.startsWith('R-')).sort()
  return Promise.all(ids.map(async (id) => JSON.parse(await readFile(path.join(root, id, 'run.json'), 'utf8')) as RunRecord))
}

async function snapshotOf(runId: string, step: string): Promise<Snapshot> {
  const r = await pipeHere(['snapshot', 'show', runId, '--json'], {cwd: dir})
  expect(r.code, r.stderr).to.equal(0)
  return json<Snapshot[]>(r).find((s) => s.step.name === step)!
}

/** `pipe validate` of `text` (written to `file`) in this process. */
async function validate(file: string, text: string): Promise<{code: number | null; out: string}> {
  await writeFile(path.join(dir, file), text)
  const r = await pipeHere(['validate', path.join(dir, file)], {cwd: dir})
  return {code: r.code, out: r.stdout + r.stderr}
}

const ITEM = `version: 1
name: item
inputs:
  n: {type: integer, required: true}
outputs:
  total: {type: integer, value: "\${{ inputs.n * 2 }}"}
  label: {type: string, value: "n=\${{ inputs.n }}"}
steps:
  - {id: size, kind: choice, choices: [{when: "\${{ inputs.n > 20 }}", next: bad}], default: fin}
  - {id: bad, kind: end, status: failed, reason: too big}
  - {id: fin, kind: end, status: succeeded, reason: "ok \${{ inputs.n }}"}
`

describe('fan-in: typed child outputs and the inline alias', function () {
  this.timeout(180000)

  it("the data-job example sums its children's outputs into out/summary.txt; the file whose child failed has outputs null", async () => {
    const example = path.join(examples, 'data-job')
    execFileSync('git', ['init', '-q'], {cwd: dir})
    await cp(path.join(example, 'data'), path.join(dir, 'data'), {recursive: true})
    const policy = path.join(example, 'policy.yaml')
    const checked = await pipe(['validate', path.join(example, 'pipeline.yaml'), '--policy', policy], {cwd: dir})
    expect(checked.code, checked.stdout + checked.stderr).to.equal(0)
    const r = await pipe(['run', path.join(example, 'pipeline.yaml'), '--policy', policy, '-i', 'parallel=3', '--json'], {cwd: dir, timeoutMs: 120000})
    expect(r.code, r.stderr).to.equal(0)
    expect(json<RunJson>(r).reason).to.equal('2 of 3 file(s) read; summary in out/summary.txt')
    expect(await readFile(path.join(dir, 'out', 'summary.txt'), 'utf8')).to.equal(
      [
        'files: 3, read: 2, failed: 1',
        'rows: 5',
        'total: 36',
        'returns.csv: not read (failed)',
        'sales-1.csv: 3 rows, total 6',
        'sales-2.csv: 2 rows, total 30',
      ].join('\n') + '\n',
    )
    const each = await snapshotOf(json<RunJson>(r).run_id, 'each')
    const items = (each.outputs as {items: Array<{key: string; status: string; outputs: unknown}>}).items
    expect(items.map((i) => [i.key, i.status, i.outputs])).to.deep.equal([
      ['returns.csv', 'failed', null],
      ['sales-1.csv', 'succeeded', {rows: 3, total: 6}],
      ['sales-2.csv', 'succeeded', {rows: 2, total: 30}],
    ])
    // The child's run record holds what it gave back.
    const children = (await runRecords()).filter((c) => c.parent !== undefined)
    expect(children.map((c) => c.outputs ?? null).filter((o) => o !== null)).to.have.deep.members([
      {rows: 3, total: 6},
      {rows: 2, total: 30},
    ])
  })

  it("a pipeline step carries its child's outputs as outputs.outputs, and a foreach item as outputs (null for a failed item)", async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const main = `version: 1
name: main
steps:
  - {id: one, kind: pipeline, file: ./item.yaml, with: {n: 4}, next: each}
  - id: each
    kind: foreach
    items: "\${{ [3, 25, 12] }}"
    pipeline: ./item.yaml
    with: {n: "\${{ item }}"}
    on: {success: done, partial: done, fail: done}
  - id: done
    kind: end
    status: succeeded
    reason: "\${{ steps.one.outputs.outputs.label }} sum \${{ sum(steps.each.outputs.items.filter(i, i.outputs != null).map(i, i.outputs.total)) }} \${{ steps.each.outputs.items.map(i, i.outputs == null ? 'none' : i.outputs.label).join(',') }}"
`
    expect((await validate('main.yaml', main)).code).to.equal(0)
    const r = await pipeHere(['run', path.join(dir, 'main.yaml'), '--text', 'x', '--json'], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    expect(json<RunJson>(r).reason).to.equal('n=4 sum 30 n=3,none,n=12')
  })

  it('a misspelled output name is an error at file:line:col with a did-you-mean, for a file child, a pipeline step and inline steps', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const fromFile = await validate(
      'a.yaml',
      `version: 1
name: a
steps:
  - {id: each, kind: foreach, items: "\${{ [1, 2] }}", pipeline: ./item.yaml, with: {n: "\${{ item }}"}, next: done}
  - {id: done, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.items.map(i, i.outputs.totl) }}"}
`,
    )
    expect(fromFile.code).to.equal(2)
    expect(fromFile.out).to.contain(
      'a.yaml:5:101  steps[1].reason  steps.each.outputs.items[].outputs has no field "totl" (it has total, label) — did you mean "total"?',
    )
    const step = await validate(
      'b.yaml',
      `version: 1
name: b
steps:
  - {id: one, kind: pipeline, file: ./item.yaml, with: {n: 4}, next: done}
  - {id: done, kind: end, status: succeeded, reason: "\${{ steps.one.outputs.outputs.lable }}"}
`,
    )
    expect(step.code).to.equal(2)
    expect(step.out).to.contain('b.yaml:5:85  steps[1].reason  steps.one.outputs.outputs has no field "lable" (it has total, label) — did you mean "label"?')
    const inline = await validate(
      'c.yaml',
      `version: 1
name: c
steps:
  - id: each
    kind: foreach
    items: "\${{ ['x', 'y'] }}"
    outputs:
      size: {type: integer, value: "\${{ size(item) }}"}
    steps:
      - {id: fin, kind: end, status: succeeded, reason: ok}
    next: done
  - {id: done, kind: end, status: succeeded, reason: "\${{ sum(steps.each.outputs.items.map(i, i.outputs.sise)) }}"}
`,
    )
    expect(inline.code).to.equal(2)
    expect(inline.out).to.contain('c.yaml:12:105  steps[1].reason  steps.each.outputs.items[].outputs has no field "sise" (it has size) — did you mean "size"?')
    // An output whose value cannot be of its declared type is caught before any run.
    const typed = await validate(
      'd.yaml',
      `version: 1
name: d
inputs:
  who: {type: string, default: me}
outputs:
  count: {type: integer, value: "\${{ inputs.who }}"}
steps:
  - {id: fin, kind: end, status: succeeded, reason: ok}
`,
    )
    expect(typed.code).to.equal(2)
    expect(typed.out).to.contain('d.yaml:6:34  outputs.count.value  output "count" is an integer, but ${{ inputs.who }} gives string')
  })

  it('an output of the wrong type at run time fails that child, naming the output; the parent sees the item failed with outputs null', async () => {
    await writeFile(
      path.join(dir, 'child.yaml'),
      `version: 1
name: child
inputs:
  raw: {type: object, required: true}
outputs:
  total: {type: integer, value: "\${{ inputs.raw.total }}"}
steps:
  - {id: fin, kind: end, status: succeeded, reason: ok}
`,
    )
    const main = `version: 1
name: main
steps:
  - id: each
    kind: foreach
    items: "\${{ [{'total': 5}, {'total': 'five'}] }}"
    pipeline: ./child.yaml
    with: {raw: "\${{ item }}"}
    on: {success: done, partial: done, fail: done}
  - {id: done, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.items.map(i, i.status + ':' + (i.outputs == null ? 'null' : string(i.outputs.total))).join(' ') }}"}
`
    expect((await validate('main.yaml', main)).code).to.equal(0)
    const r = await pipeHere(['run', path.join(dir, 'main.yaml'), '--text', 'x', '--json'], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    expect(json<RunJson>(r).reason).to.equal('succeeded:5 failed:null')
    const failed = (await runRecords()).find((c) => c.parent?.index === 1)!
    expect(failed.status).to.equal('failed')
    expect(failed.outputs).to.equal(undefined)
    expect(failed.error?.message).to.equal('output "total" of pipeline child is declared an integer, but ${{ inputs.raw.total }} gave string "five"')
  })

  it('inline steps read the as: alias directly; the child records it, and resume of a paused child still sees it', async () => {
    const main = `version: 1
name: main
steps:
  - id: each
    kind: foreach
    items: "\${{ [{'name': 'alpha'}, {'name': 'beta'}] }}"
    as: task
    outputs:
      greeting: {type: string, value: "hello \${{ task.name }}"}
    steps:
      - {id: wait, kind: end, status: blocked, reason: "a person checks \${{ task.name }}", next: fin}
      - {id: fin, kind: end, status: succeeded, reason: "checked \${{ task.name }}"}
    on: {success: done, partial: done, fail: done}
  - {id: done, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.items.map(i, i.outputs.greeting).join(', ') }}"}
`
    expect((await validate('main.yaml', main)).code).to.equal(0)
    const first = await pipeHere(['run', path.join(dir, 'main.yaml'), '--text', 'x', '--json'], {cwd: dir})
    expect(first.code, first.stderr).to.equal(6)
    const parent = json<RunJson>(first)
    expect(parent.reason).to.contain('a person checks alpha').and.contain('a person checks beta')
    const children = (await runRecords()).filter((c) => c.parent?.run_id === parent.run_id)
    expect(children.map((c) => [c.status, c.aliases])).to.deep.equal([
      ['blocked', {task: {name: 'alpha'}}],
      ['blocked', {task: {name: 'beta'}}],
    ])
    const resumed = await pipe(['resume', parent.run_id, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).reason).to.equal('hello alpha, hello beta')
    const after = (await runRecords()).filter((c) => c.parent?.run_id === parent.run_id)
    expect(after.map((c) => [c.status, c.outputs])).to.deep.equal([
      ['succeeded', {greeting: 'hello alpha'}],
      ['succeeded', {greeting: 'hello beta'}],
    ])
    // The step after the pause, run by the resume, read the alias from the child's record.
    const fins = await Promise.all(after.map(async (c) => (await snapshotOf(c.run_id, 'fin')).decisions.at(-1)!.reason))
    expect(fins).to.deep.equal(['checked alpha', 'checked beta'])
  })

  it('an as: that hides a name every expression reads is a validate error at the as: key; a misspelled alias in inline steps has a did-you-mean', async () => {
    const clash = await validate(
      'clash.yaml',
      `version: 1
name: clash
steps:
  - id: each
    kind: foreach
    items: "\${{ [1, 2] }}"
    as: inputs
    steps:
      - {id: fin, kind: end, status: succeeded, reason: ok}
`,
    )
    expect(clash.code).to.equal(2)
    expect(clash.out).to.contain('clash.yaml:7:9  steps[0].as  as: "inputs" is already a name every expression reads; choose another')
    const typo = await validate(
      'typo.yaml',
      `version: 1
name: typo
steps:
  - id: each
    kind: foreach
    items: "\${{ ['a.csv'] }}"
    as: file
    steps:
      - {id: fin, kind: end, status: succeeded, reason: "read \${{ fil }}"}
`,
    )
    expect(typo.code).to.equal(2)
    expect(typo.out).to.contain(
      'typo.yaml:9:67  steps[0].steps[0].reason  unknown name "fil"; an expression reads inputs, steps, spec, run, secrets, policy or a foreach alias — did you mean "file"?',
    )
  })
})
