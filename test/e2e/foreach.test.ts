import {expect} from 'chai'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

// Each behaviour keeps a `pipe` process for the command that shows it (the kills, the first resume
// after one, a run of a pipeline step, the runs list of children, a cancel); the commands that set up
// or read back run in this process (test/helpers/pipe-here.ts: the same command and output).

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-foreach-e2e-')))
afterEach(async () => cleanup())

async function runRecords(cwd: string): Promise<RunRecord[]> {
  const ids = (await readdir(path.join(cwd, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
  return Promise.all(ids.sort().map(async (id) => JSON.parse(await readFile(path.join(cwd, '.pipe', 'runs', id, 'run.json'), 'utf8')) as RunRecord))
}

async function snapshotsOf(cwd: string, runId: string): Promise<Snapshot[]> {
  const result = await pipeHere(['snapshot', 'show', runId, '--json'], {cwd})
  expect(result.code, result.stderr).to.equal(0)
  return json<Snapshot[]>(result)
}

const ITEM = `version: 1
name: item
inputs:
  name: {type: string, required: true}
steps:
  - {id: work, kind: noop, next: done}
  - {id: done, kind: end, status: succeeded, reason: "did \${{ inputs.name }}"}
`

describe('foreach and pipeline steps on the built CLI', function () {
  this.timeout(180000)

  it('a SIGKILL in the middle of a foreach with concurrency 2, then pipe resume, finishes every child exactly once', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const main = path.join(dir, 'main.yaml')
    await writeFile(
      main,
      `version: 1
name: main
steps:
  - id: each
    kind: foreach
    items: "\${{ ['a', 'b', 'c', 'd', 'e'] }}"
    pipeline: ./item.yaml
    with: {name: "\${{ item }}"}
    concurrency: 2
    next: fin
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.succeeded }} of \${{ steps.each.outputs.total }}"}
`,
    )
    // Killed when the third child's work step has been recorded: some children finished, some did not, some never started.
    const killed = await pipe(['run', main, '--text', 'x'], {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'after-step:work#3'}})
    expect(killed.signal).to.equal('SIGKILL')
    const before = await runRecords(dir)
    const parent = before.find((r) => r.parent === undefined)!
    expect(parent.status).to.equal('running')
    const finishedBefore = new Map(before.filter((r) => r.parent && r.status === 'succeeded').map((r) => [r.run_id, r.head]))
    expect(before.filter((r) => r.parent).length).to.be.within(3, 4)
    expect(
      before.some((r) => r.parent && r.status !== 'succeeded'),
      'a child was cut off',
    ).to.equal(true)

    const resumed = await pipe(['resume', parent.run_id, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<{status: string; reason: string}>(resumed)).to.include({status: 'succeeded', reason: '5 of 5'})
    const after = await runRecords(dir)
    const kids = after.filter((r) => r.parent?.run_id === parent.run_id).sort((a, b) => a.parent!.index! - b.parent!.index!)
    expect(
      kids.map((k) => [k.parent!.index, k.status, k.inputs?.['name']]),
      'one child per item, no more',
    ).to.deep.equal(['a', 'b', 'c', 'd', 'e'].map((n, i) => [i, 'succeeded', n]))
    for (const kid of kids) {
      const snaps = await snapshotsOf(dir, kid.run_id)
      expect(
        snaps.map((s) => s.step.name),
        `${kid.run_id} ran each step once`,
      ).to.deep.equal(['work', 'done'])
      // A child that had finished before the crash was not touched again.
      if (finishedBefore.has(kid.run_id)) expect(kid.head).to.deep.equal(finishedBefore.get(kid.run_id))
    }
    const [each] = await snapshotsOf(dir, parent.run_id)
    expect((each!.outputs as {items: Array<{run_id: string}>}).items.map((i) => i.run_id)).to.deep.equal(kids.map((k) => k.run_id))
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
  })

  it('a SIGKILL after a child run was indexed but before its folder was renamed into place: resume finishes that child, never a second one for the item', async () => {
    await writeFile(path.join(dir, 'item.yaml'), ITEM)
    const main = path.join(dir, 'main.yaml')
    await writeFile(
      main,
      `version: 1
name: main
steps:
  - {id: each, kind: foreach, items: "\${{ ['a', 'b'] }}", pipeline: ./item.yaml, with: {name: "\${{ item }}"}, concurrency: 1, next: fin}
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outputs.succeeded }} of \${{ steps.each.outputs.total }}"}
`,
    )
    // Creation #1 is the parent, #2 the first child.
    const killed = await pipe(['run', main, '--text', 'x'], {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'run-indexed#2'}})
    expect(killed.signal).to.equal('SIGKILL')
    const staged = (await readdir(path.join(dir, '.pipe', 'runs'))).filter((n) => n.startsWith('.new-'))
    expect(staged, 'the child was left staged').to.have.length(1)
    const parent = (await runRecords(dir)).find((r) => r.parent === undefined)!
    const resumed = await pipeHere(['resume', parent.run_id, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<{status: string; reason: string}>(resumed)).to.include({status: 'succeeded', reason: '2 of 2'})
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
    const kids = (await runRecords(dir)).filter((r) => r.parent?.run_id === parent.run_id)
    expect(kids.map((k) => [k.parent!.index, k.status]).sort(), 'one child per item').to.deep.equal([
      [0, 'succeeded'],
      [1, 'succeeded'],
    ])
    expect(staged[0]).to.contain(kids.find((k) => k.parent!.index === 0)!.run_id)
    // The staged child was finished, not replaced: each run is in the run index once, and audit had nothing to tidy.
    const indexed = (await readFile(path.join(dir, '.pipe', 'audit', 'runs.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as {run_id: string}).run_id)
    expect(indexed).to.have.length(3)
    expect(new Set(indexed).size).to.equal(3)
    expect(audit.stderr).to.not.contain('cleaned')
  })

  it('a pipeline step passes with: inputs to a child run, and the child status routes the parent', async () => {
    await writeFile(
      path.join(dir, 'publish.yaml'),
      `version: 1
name: publish
inputs:
  target: {type: string, required: true}
  ok: {type: boolean, default: true}
steps:
  - id: decide
    kind: choice
    choices:
      - {when: "\${{ inputs.ok }}", next: shipped}
    default: refused
  - {id: shipped, kind: end, status: succeeded, reason: "shipped to \${{ inputs.target }} for \${{ run.parent }}"}
  - {id: refused, kind: end, status: failed, reason: "\${{ inputs.target }} refused"}
`,
    )
    const main = path.join(dir, 'main.yaml')
    await writeFile(
      main,
      `version: 1
name: main
inputs:
  ok: {type: boolean, default: true}
steps:
  - id: pub
    kind: pipeline
    file: ./publish.yaml
    with: {target: "prod-\${{ run.id }}", ok: "\${{ inputs.ok }}"}
    on: {success: good, fail: bad}
  - {id: good, kind: end, status: succeeded, reason: "child \${{ steps.pub.outputs.run_id }}: \${{ steps.pub.outputs.reason }}"}
  - {id: bad, kind: end, status: failed, reason: "publish failed: \${{ steps.pub.outputs.reason }}"}
`,
    )
    const validated = await pipeHere(['validate', main], {cwd: dir})
    expect(validated.code, validated.stdout + validated.stderr).to.equal(0)

    const ok = await pipe(['run', main, '--text', 'x', '--json'], {cwd: dir})
    expect(ok.code, ok.stderr).to.equal(0)
    const good = json<{run_id: string; status: string; reason: string}>(ok)
    const child = (await runRecords(dir)).find((r) => r.parent?.run_id === good.run_id)!
    expect(child.parent).to.deep.equal({run_id: good.run_id, step: 'pub', seq: 1})
    expect(child.inputs).to.deep.equal({target: `prod-${good.run_id}`, ok: true})
    expect(good.reason).to.equal(`child ${child.run_id}: shipped to prod-${good.run_id} for ${good.run_id}`)
    // pipe export writes the child run beside its parent, and the parent's state names it.
    const exported = await pipeHere(['export', good.run_id, '--dir', path.join(dir, 'out'), '--json'], {cwd: dir})
    expect(exported.code, exported.stderr).to.equal(0)
    expect(json<{files: string[]}>(exported).files).to.include.members([
      `runs/${good.run_id}/state.json`,
      `runs/${child.run_id}/state.json`,
      `runs/${child.run_id}/timeline.md`,
    ])
    const state = JSON.parse(await readFile(path.join(dir, 'out', 'runs', good.run_id, 'state.json'), 'utf8')) as {child_runs: string[]}
    expect(state.child_runs).to.deep.equal([child.run_id])

    const refused = await pipeHere(['run', main, '--text', 'x', '-i', 'ok=false', '--json'], {cwd: dir})
    expect(refused.code).to.equal(1)
    const bad = json<{run_id: string; status: string; error: {code: string; message: string}}>(refused)
    expect(bad.status).to.equal('failed')
    const [pub] = await snapshotsOf(dir, bad.run_id)
    expect(pub!.decisions[0]).to.include({decision: 'fail', next_step: 'bad'})
    expect(bad.error.message).to.match(/^publish failed: E_ENDED|publish failed: .*refused/)
  })
})

describe('child runs in runs list, runs show, resume and cancel', function () {
  this.timeout(180000)

  const CHILD = `version: 1
name: child
steps:
  - {id: wait, kind: end, status: blocked, reason: needs a person, next: fin}
  - {id: fin, kind: end, status: succeeded, reason: dealt with}
`
  const MAIN = `version: 1
name: main
steps:
  - {id: sub, kind: pipeline, file: ./child.yaml, next: after}
  - {id: after, kind: end, status: succeeded, reason: "child \${{ steps.sub.outputs.status }}"}
`

  async function blockedParent(): Promise<{parent: string; child: string}> {
    await writeFile(path.join(dir, 'child.yaml'), CHILD)
    await writeFile(path.join(dir, 'main.yaml'), MAIN)
    const run = await pipeHere(['run', path.join(dir, 'main.yaml'), '--text', 'x', '--json'], {cwd: dir})
    expect(run.code, run.stderr).to.equal(6)
    const parent = json<{run_id: string; status: string}>(run)
    expect(parent.status).to.equal('blocked')
    const child = (await runRecords(dir)).find((r) => r.parent?.run_id === parent.run_id)!
    expect(child.status).to.equal('blocked')
    return {parent: parent.run_id, child: child.run_id}
  }

  it('lists children under their parent (--all: every run), nests them in runs show, and resume of the parent continues the blocked child', async () => {
    const {parent, child} = await blockedParent()
    const listed = json<{runs: Array<{run_id: string; children?: Array<{run_id: string; parent: {step: string}}>}>}>(
      await pipeHere(['runs', 'list', '--json'], {cwd: dir}),
    )
    expect(listed.runs.map((r) => r.run_id)).to.deep.equal([parent])
    expect(listed.runs[0]!.children!.map((c) => [c.run_id, c.parent.step])).to.deep.equal([[child, 'sub']])
    const text = await pipe(['runs', 'list'], {cwd: dir})
    expect(text.stdout).to.match(new RegExp(`\\n\\s+└ ${child}\\s+blocked .*child \\(sub\\)`))
    const all = json<{runs: Array<{run_id: string}>}>(await pipeHere(['runs', 'list', '--all', '--json'], {cwd: dir}))
    expect(all.runs.map((r) => r.run_id).sort()).to.deep.equal([parent, child].sort())
    const shown = json<{children: Array<{run_id: string; status: string}>}>(await pipeHere(['runs', 'show', parent, '--json'], {cwd: dir}))
    expect(shown.children.map((c) => [c.run_id, c.status])).to.deep.equal([[child, 'blocked']])
    const shownText = await pipeHere(['runs', 'show', child], {cwd: dir})
    expect(shownText.stdout).to.contain(`child of ${parent} step sub (#1)`)

    const resumed = await pipeHere(['resume', parent, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<{status: string; reason: string}>(resumed)).to.include({status: 'succeeded', reason: 'child succeeded'})
    const runs = await runRecords(dir)
    expect(
      runs.filter((r) => r.parent).map((r) => [r.run_id, r.status]),
      'the same child, continued',
    ).to.deep.equal([[child, 'succeeded']])
    expect((await snapshotsOf(dir, child)).map((s) => `${s.step.name}:${s.decisions[0]!.decision}`)).to.deep.equal([
      'wait:blocked',
      'wait:resumed',
      'fin:succeeded',
    ])
  })

  it('cancel of a parent cancels its unfinished children', async () => {
    const {parent, child} = await blockedParent()
    const cancelled = await pipe(['cancel', parent, '--reason', 'not needed'], {cwd: dir})
    expect(cancelled.code, cancelled.stderr).to.equal(0)
    const runs = await runRecords(dir)
    expect(runs.map((r) => [r.run_id, r.status]).sort()).to.deep.equal(
      [
        [parent, 'cancelled'],
        [child, 'cancelled'],
      ].sort(),
    )
    expect(runs.find((r) => r.run_id === child)!.status_reason).to.match(new RegExp(`^parent run ${parent} was cancelled: cancelled by .+: not needed$`))
  })
})
