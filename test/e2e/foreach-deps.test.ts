/**
 * A foreach's key: and depends_on: (seed 003: subtasks with dependencies, a dependency that failed
 * blocks its dependents) and counts given as expressions (concurrency, max_iterations), through
 * `pipe` commands.
 *
 * A real `pipe` process stays for the file's first run, validate's refusal, the kill and the resume
 * after it, and the 30,000-item cycle (no hang, no stack overflow: a process's timeout and its own
 * stack); the other commands run in this process (test/helpers/pipe-here.ts: the same command and
 * output).
 */
import {expect} from 'chai'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {snapshotsIn} from '../helpers/stores.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-foreach-deps-')))
afterEach(async () => cleanup())

async function runRecords(cwd: string): Promise<RunRecord[]> {
  const ids = (await readdir(path.join(cwd, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
  return Promise.all(ids.map(async (id) => JSON.parse(await readFile(path.join(cwd, '.pipe', 'runs', id, 'run.json'), 'utf8')) as RunRecord))
}

/** Run ids in the order they were created: the run index is appended to as each run is born. */
async function creationOrder(cwd: string): Promise<string[]> {
  return (await readFile(path.join(cwd, '.pipe', 'audit', 'runs.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as {run_id: string}).run_id)
}

/** What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts). */
const snapshotsOf = snapshotsIn

/** One task: fails when told to, else succeeds. */
const TASK = `version: 1
name: task
inputs:
  name: {type: string, required: true}
  fail: {type: boolean, default: false}
steps:
  - id: work
    kind: choice
    choices: [{when: "\${{ inputs.fail }}", next: bad}]
    default: done
  - {id: bad, kind: end, status: failed, reason: "\${{ inputs.name }} broke"}
  - {id: done, kind: end, status: succeeded, reason: "did \${{ inputs.name }}"}
`

/** A parent that runs TASK per item of `items` (a CEL list of {id, fail, deps}), keyed by id. */
function parent(items: string, concurrency = '1'): string {
  return `version: 1
name: main
inputs:
  parallel: {type: integer, default: 1}
steps:
  - id: each
    kind: foreach
    items: "\${{ ${items} }}"
    as: t
    key: "\${{ t.id }}"
    depends_on: "\${{ t.deps }}"
    pipeline: ./task.yaml
    with: {name: "\${{ t.id }}", fail: "\${{ t.fail }}"}
    concurrency: ${concurrency}
    on: {success: fin, partial: fin, fail: fin}
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outcome }}: \${{ steps.each.reason }}"}
`
}

interface Item {
  index: number
  key: string
  run_id: string | null
  status: string
  reason: string
  blocked_by?: string
}
interface Outputs {
  items: Item[]
  succeeded: number
  failed: number
  blocked: number
  total: number
}

const A_FAILS = "[{'id': 'a', 'fail': true, 'deps': []}, {'id': 'b', 'fail': false, 'deps': ['a']}, {'id': 'c', 'fail': false, 'deps': []}]"

describe('foreach key: and depends_on: on the built CLI', function () {
  this.timeout(180000)

  it('a fails, b depends on a and is blocked without a child run, c depends on nothing and succeeds; the step is partial', async () => {
    await writeFile(path.join(dir, 'task.yaml'), TASK)
    const main = path.join(dir, 'main.yaml')
    await writeFile(main, parent(A_FAILS, '3'))
    const validated = await pipeHere(['validate', main], {cwd: dir})
    expect(validated.code, validated.stdout + validated.stderr).to.equal(0)

    const run = await pipe(['run', main, '--text', 'x', '--json'], {cwd: dir})
    expect(run.code, run.stderr).to.equal(0)
    const out = json<{run_id: string; reason: string}>(run)
    expect(out.reason).to.equal('partial: 1 of 3 item(s) succeeded, 1 failed, 1 blocked by a dependency')
    const [each] = await snapshotsOf(dir, out.run_id)
    const outputs = each!.outputs as Outputs
    expect(outputs.items.map((i) => [i.key, i.status])).to.deep.equal([
      ['a', 'failed'],
      ['b', 'blocked'],
      ['c', 'succeeded'],
    ])
    expect(outputs).to.include({succeeded: 1, failed: 1, blocked: 1, total: 3})
    const b = outputs.items[1]!
    expect(b.run_id, 'b never ran').to.equal(null)
    expect(b.blocked_by).to.equal('a')
    expect(b.reason).to.equal('not run: it depends on "a", which failed (child run failed: E_ENDED: a broke)')
    // One child per item that ran, none for b.
    const kids = (await runRecords(dir)).filter((r) => r.parent?.run_id === out.run_id)
    expect(kids.map((k) => [k.parent!.index, k.status, k.inputs?.['name']]).sort()).to.deep.equal([
      [0, 'failed', 'a'],
      [2, 'succeeded', 'c'],
    ])
  })

  it('with concurrency 1, an item whose dependency comes later in the list waits for it; a chain blocks transitively', async () => {
    await writeFile(path.join(dir, 'task.yaml'), TASK)
    const main = path.join(dir, 'main.yaml')
    // x needs y (later in the list), y needs z (last); w needs nothing.
    await writeFile(
      main,
      parent(
        "[{'id': 'x', 'fail': false, 'deps': ['y']}, {'id': 'w', 'fail': false, 'deps': []}, {'id': 'y', 'fail': false, 'deps': ['z']}, {'id': 'z', 'fail': false, 'deps': []}]",
      ),
    )
    const run = await pipeHere(['run', main, '--text', 'x', '--json'], {cwd: dir})
    expect(run.code, run.stderr).to.equal(0)
    const out = json<{run_id: string; reason: string}>(run)
    expect(out.reason).to.equal('success: 4 of 4 item(s) succeeded, 0 failed')
    const kids = new Map((await runRecords(dir)).filter((r) => r.parent?.run_id === out.run_id).map((k) => [k.run_id, k.inputs?.['name']]))
    const order = (await creationOrder(dir)).filter((id) => kids.has(id)).map((id) => kids.get(id))
    // In list order among the ready ones: w and z first, then y once z succeeded, then x once y did.
    expect(order).to.deep.equal(['w', 'z', 'y', 'x'])

    // The same chain with z failing: y and x are blocked, naming the dependency that did not succeed.
    await writeFile(
      main,
      parent(
        "[{'id': 'x', 'fail': false, 'deps': ['y']}, {'id': 'w', 'fail': false, 'deps': []}, {'id': 'y', 'fail': false, 'deps': ['z']}, {'id': 'z', 'fail': true, 'deps': []}]",
      ),
    )
    const failed = await pipeHere(['run', main, '--text', 'x', '--json'], {cwd: dir})
    expect(failed.code, failed.stderr).to.equal(0)
    const second = json<{run_id: string; reason: string}>(failed)
    const [each] = await snapshotsOf(dir, second.run_id)
    const items = (each!.outputs as Outputs).items
    expect(items.map((i) => [i.key, i.status, i.blocked_by ?? null])).to.deep.equal([
      ['x', 'blocked', 'y'],
      ['w', 'succeeded', null],
      ['y', 'blocked', 'z'],
      ['z', 'failed', null],
    ])
    expect(items[0]!.reason).to.match(/^not run: it depends on "y", which was blocked \(not run: it depends on "z", which failed/)
    expect(
      (await runRecords(dir))
        .filter((r) => r.parent?.run_id === second.run_id)
        .map((k) => k.inputs?.['name'])
        .sort(),
    ).to.deep.equal(['w', 'z'])
  })

  it('a cycle, an unknown key and a duplicate key are E_CONFIG errors naming the keys, before any item runs', async () => {
    await writeFile(path.join(dir, 'task.yaml'), TASK)
    const main = path.join(dir, 'main.yaml')
    const cases: Array<[string, string]> = [
      [
        "[{'id': 'a', 'fail': false, 'deps': ['c']}, {'id': 'b', 'fail': false, 'deps': []}, {'id': 'c', 'fail': false, 'deps': ['a']}]",
        'step each: depends_on forms a cycle of 2 item(s): "a" -> "c" -> "a"; none of these items could ever start',
      ],
      [
        "[{'id': 'a', 'fail': false, 'deps': []}, {'id': 'b', 'fail': false, 'deps': ['nope']}]",
        'step each: depends_on names a key no item has: "b" depends on "nope" (keys: "a", "b")',
      ],
      ["[{'id': 'a', 'fail': false, 'deps': []}, {'id': 'a', 'fail': false, 'deps': []}]", 'step each: key gave the same value to several items: "a"'],
    ]
    for (const [items, message] of cases) {
      await writeFile(main, parent(items))
      const run = await pipeHere(['run', main, '--text', 'x', '--json'], {cwd: dir})
      expect(run.code, run.stderr).to.equal(1)
      const out = json<{run_id: string; status: string; error: {code: string; message: string}}>(run)
      expect(out.status).to.equal('failed')
      expect(out.error.message).to.contain(message)
      const [each] = await snapshotsOf(dir, out.run_id)
      expect(each!.errors?.at(-1)).to.include({code: 'E_CONFIG'})
      expect(
        (await runRecords(dir)).filter((r) => r.parent?.run_id === out.run_id),
        'no child run was created',
      ).to.deep.equal([])
    }
  })

  it('validate checks that depends_on gives a list', async () => {
    await writeFile(path.join(dir, 'task.yaml'), TASK)
    const main = path.join(dir, 'main.yaml')
    await writeFile(main, parent(A_FAILS).replace('depends_on: "${{ t.deps }}"', 'depends_on: "${{ \'a\' }}"'))
    const validated = await pipe(['validate', main], {cwd: dir})
    expect(validated.code).to.equal(2)
    expect(validated.stdout).to.contain('steps[0].depends_on  expected a list, but this expression gives string')
  })

  it('a SIGKILL after the independent item started, then pipe resume: the blocked dependent is still not run, the started child is finished once', async () => {
    await writeFile(path.join(dir, 'task.yaml'), TASK)
    const main = path.join(dir, 'main.yaml')
    await writeFile(main, parent(A_FAILS))
    // With concurrency 1: a's child (#1) fails, b is blocked, then c's child (#2) is created and the process dies.
    const killed = await pipe(['run', main, '--text', 'x'], {cwd: dir, env: {PIPE_FAULT_KILL_AT: 'child-created:each#2'}})
    expect(killed.signal).to.equal('SIGKILL')
    const before = await runRecords(dir)
    const top = before.find((r) => r.parent === undefined)!
    expect(top.status).to.equal('running')
    expect(
      before
        .filter((r) => r.parent)
        .map((r) => [r.parent!.index, r.status])
        .sort(),
    ).to.deep.equal([
      [0, 'failed'],
      [2, 'running'],
    ])

    const resumed = await pipe(['resume', top.run_id, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<{reason: string}>(resumed).reason).to.equal('partial: 1 of 3 item(s) succeeded, 1 failed, 1 blocked by a dependency')
    const kids = (await runRecords(dir)).filter((r) => r.parent?.run_id === top.run_id)
    expect(kids.map((k) => [k.parent!.index, k.status]).sort(), 'still no child for b, one for c').to.deep.equal([
      [0, 'failed'],
      [2, 'succeeded'],
    ])
    const [each] = await snapshotsOf(dir, top.run_id)
    expect((each!.outputs as Outputs).items.map((i) => [i.key, i.status, i.run_id === null])).to.deep.equal([
      ['a', 'failed', false],
      ['b', 'blocked', true],
      ['c', 'succeeded', false],
    ])
    // Resuming the finished parent again changes nothing.
    const again = await pipeHere(['resume', top.run_id, '--json'], {cwd: dir})
    expect((await runRecords(dir)).filter((r) => r.parent?.run_id === top.run_id)).to.have.length(2)
    expect(again.code).to.not.equal(0)
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
  })
})

describe('concurrency and max_iterations as expressions on the built CLI', function () {
  this.timeout(180000)

  const ITEMS = "[{'id': 'a', 'fail': false, 'deps': []}, {'id': 'b', 'fail': false, 'deps': []}, {'id': 'c', 'fail': false, 'deps': []}]"

  it('concurrency: "${{ inputs.parallel }}" runs with -i parallel=3; 0 and a fraction are clear errors, a string is a validate error', async () => {
    await writeFile(path.join(dir, 'task.yaml'), TASK)
    const main = path.join(dir, 'main.yaml')
    await writeFile(main, parent(ITEMS, '"${{ inputs.parallel }}"'))
    const validated = await pipeHere(['validate', main], {cwd: dir})
    expect(validated.code, validated.stdout + validated.stderr).to.equal(0)

    const run = await pipeHere(['run', main, '--text', 'x', '-i', 'parallel=3', '--json'], {cwd: dir})
    expect(run.code, run.stderr).to.equal(0)
    const out = json<{run_id: string; reason: string}>(run)
    expect(out.reason).to.equal('success: 3 of 3 item(s) succeeded, 0 failed')
    const [each] = await snapshotsOf(dir, out.run_id)
    expect((each!.inputs as {resolved: Record<string, unknown>}).resolved['concurrency']).to.equal(3)

    const zero = await pipeHere(['run', main, '--text', 'x', '-i', 'parallel=0', '--json'], {cwd: dir})
    expect(zero.code).to.equal(1)
    const z = json<{run_id: string; error: {code: string; message: string}}>(zero)
    expect(z.error.message).to.contain('concurrency of step "each" resolved to 0, which does not fit: it must be >= 1')
    expect((await runRecords(dir)).filter((r) => r.parent?.run_id === z.run_id)).to.deep.equal([])

    // A number input may hold a fraction: validate lets it through, the run refuses it.
    await writeFile(main, parent(ITEMS, '"${{ inputs.parallel }}"').replace('parallel: {type: integer, default: 1}', 'parallel: {type: number, default: 1}'))
    const half = await pipeHere(['run', main, '--text', 'x', '-i', 'parallel=1.5', '--json'], {cwd: dir})
    expect(half.code).to.equal(1)
    expect(json<{error: {message: string}}>(half).error.message).to.contain(
      'concurrency of step "each" resolved to 1.5, which does not fit: it must be integer',
    )

    await writeFile(main, parent(ITEMS, '"${{ \'three\' }}"'))
    const typed = await pipeHere(['validate', main], {cwd: dir})
    expect(typed.code).to.equal(2)
    expect(typed.stdout).to.contain('steps[0].concurrency  expected an int, but this expression gives string')
  })

  it('max_iterations: "${{ inputs.tries }}" bounds a loop by an input; 0 stops the run with E_CONFIG before the step', async () => {
    const main = path.join(dir, 'loop.yaml')
    await writeFile(
      main,
      `version: 1
name: loop
inputs:
  tries: {type: integer, default: 2}
steps:
  - {id: again, kind: noop, max_iterations: "\${{ inputs.tries }}", on_exhausted: out, next: again}
  - {id: out, kind: end, status: succeeded, reason: bounded}
`,
    )
    const validated = await pipeHere(['validate', main], {cwd: dir})
    expect(validated.code, validated.stdout + validated.stderr).to.equal(0)
    for (const tries of [2, 4]) {
      const run = await pipeHere(['run', main, '--text', 'x', '-i', `tries=${tries}`, '--json'], {cwd: dir})
      expect(run.code, run.stderr).to.equal(0)
      const out = json<{run_id: string; reason: string}>(run)
      expect(out.reason).to.equal('bounded')
      expect((await snapshotsOf(dir, out.run_id)).filter((s) => s.step.name === 'again')).to.have.length(tries)
    }
    const zero = await pipeHere(['run', main, '--text', 'x', '-i', 'tries=0', '--json'], {cwd: dir})
    expect(zero.code).to.equal(1)
    const z = json<{run_id: string; error: {code: string; message: string}}>(zero)
    expect(z.error).to.include({code: 'E_CONFIG', message: 'max_iterations of step "again" resolved to 0, which is not an integer from 1 to 1000'})
    const none = await pipeHere(['snapshot', 'show', z.run_id, '--json'], {cwd: dir})
    expect(none.stderr, 'the step was never entered').to.contain(`run ${z.run_id} has no snapshot for any step`)

    await writeFile(main, (await readFile(main, 'utf8')).replace('"${{ inputs.tries }}"', '"${{ inputs.tries > 1 }}"'))
    const typed = await pipeHere(['validate', main], {cwd: dir})
    expect(typed.code).to.equal(2)
    expect(typed.stdout).to.contain('steps[0].max_iterations  expected an int, but this expression gives bool')
  })

  it('a dependency cycle through 30,000 items read from a file is an E_CONFIG error at once, naming a few of its keys (no hang, no stack overflow)', async () => {
    const n = 30000
    await writeFile(path.join(dir, 'big.json'), JSON.stringify(Array.from({length: n}, (_, i) => ({id: `k${i}`, d: [`k${(i + n - 1) % n}`]}))))
    await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\nallowed_commands:\n  - [cat, big.json]\nresource_limits: {max_output_bytes: 2000000}\n')
    const file = path.join(dir, 'chain.yaml')
    await writeFile(
      file,
      'version: 1\nname: chain\nsteps:\n  - {id: read, kind: command, run: [cat, big.json], parse: json, next: each}\n  - id: each\n    kind: foreach\n    items: ${{ steps.read.outputs.json }}\n    as: t\n    key: ${{ t.id }}\n    depends_on: ${{ t.d }}\n    steps:\n      - {id: s, kind: noop}\n',
    )
    const run = await pipe(['run', file, '--text', 'x', '--json', '--policy', path.join(dir, 'policy.yaml')], {cwd: dir, timeoutMs: 120000})
    expect(run.code, run.stderr).to.equal(1)
    const out = json<{run_id: string; error: {code: string; message: string}}>(run)
    expect(out.error.code).to.equal('E_CONFIG')
    expect(out.error.message).to.contain(`depends_on forms a cycle of ${n} item(s): "k0" -> "k29999" -> "k29998"`).and.contain('… 29991 more …')
    expect(
      (await runRecords(dir)).filter((r) => r.parent?.run_id === out.run_id),
      'no child run was created',
    ).to.deep.equal([])
  })
})
