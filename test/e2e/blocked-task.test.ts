/**
 * A person's ways out of BLOCKED for one task (seed 001, issue 37 items 4 and 5), on the built CLI
 * as a process: skipping a blocked task of a foreach (pipe resume RUN --skip KEY --note TEXT), on
 * the file store and on PostgreSQL, and rolling a blocked task's workspace back to the checkpoint
 * its git step made (pipe rollback RUN --checkpoint), checked with real git.
 *
 * Most commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
 * and exit code). Real `pipe` processes: each skip and rollback itself (what the tests are about, on
 * the built CLI), and the file's first use of each other command (a run, the first refusal of a skip
 * and of a rollback, runs show, audit verify, export), each marked.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunEvent, RunRecord} from '../../src/types/run.js'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {expectAuditPasses, readIn, runRecordIn, snapshotsIn} from '../helpers/stores.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-blocked-task-')))
afterEach(async () => cleanup())

/** One task: ends blocked (a person must deal with it) when told to, else succeeds. */
const TASK = `version: 1
name: task
inputs:
  name: {type: string, required: true}
  block: {type: boolean, default: false}
steps:
  - id: work
    kind: choice
    choices: [{when: "\${{ inputs.block }}", next: stuck}]
    default: done
  - {id: stuck, kind: end, status: blocked, reason: "\${{ inputs.name }} needs a person"}
  - {id: done, kind: end, status: succeeded, reason: "did \${{ inputs.name }}"}
`

/** T1 blocks, T2 depends on T1, T3 depends on nothing. */
const MAIN = `version: 1
name: main
steps:
  - id: each
    kind: foreach
    items: "\${{ [{'id': 'T1', 'block': true, 'deps': []}, {'id': 'T2', 'block': false, 'deps': ['T1']}, {'id': 'T3', 'block': false, 'deps': []}] }}"
    as: t
    key: "\${{ t.id }}"
    depends_on: "\${{ t.deps }}"
    pipeline: ./task.yaml
    with: {name: "\${{ t.id }}", block: "\${{ t.block }}"}
    on: {success: fin, partial: fin, fail: failed}
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outcome }}: \${{ steps.each.reason }}"}
  - {id: failed, kind: end, status: failed, reason: "\${{ steps.each.reason }}"}
`

interface Item {
  key: string
  run_id: string | null
  status: string
  reason: string
  blocked_by?: string
}

const errorCode = (r: CliResult): string | undefined => /^Error \[(E_[A-Z_]+)\]/m.exec(r.stderr)?.[1]

/** Starts the parent (in this process, or `asProcess`); it stops blocked at each, T1's child waiting for a person. */
async function blockedParent(storeArgs: string[], asProcess = false): Promise<string> {
  await writeFile(path.join(dir, 'task.yaml'), TASK)
  await writeFile(path.join(dir, 'main.yaml'), MAIN)
  const run = await (asProcess ? pipe : pipeHere)(['run', 'main.yaml', '--text', 'x', '--json', ...storeArgs], {cwd: dir})
  const out = json<{run_id: string; status: string}>(run)
  expect(out.status, run.stderr).to.equal('blocked')
  return out.run_id
}

/** `first`: the file's first flow, whose run, first refusal, runs show and audit verify are processes. */
async function skipFlow(storeArgs: string[], location: string, first = false): Promise<void> {
  const cli = first ? pipe : pipeHere
  const parent = await blockedParent(storeArgs, first)
  const timeline = async (): Promise<RunEvent[]> => readIn(location, (s) => s.readEvents(parent))
  const before = (await timeline()).length

  // Bad input is refused with a clear error and changes nothing (the first refusal: `cli`).
  const noNote = await cli(['resume', parent, '--skip', 'T1', ...storeArgs], {cwd: dir})
  expect(errorCode(noNote), noNote.stderr).to.equal('E_INVALID_ARGS')
  expect(noNote.stderr).to.contain(`pipe resume ${parent} --skip T1 --note`)
  const unknown = await pipeHere(['resume', parent, '--skip', 'T9', '--note', 'x', ...storeArgs], {cwd: dir})
  expect(errorCode(unknown), unknown.stderr).to.equal('E_INVALID_ARGS')
  expect(unknown.stderr).to.contain(`run ${parent} has no task "T9"; its tasks: "T1", "T3"`)
  const finished = await pipeHere(['resume', parent, '--skip', 'T3', '--note', 'x', ...storeArgs], {cwd: dir})
  expect(errorCode(finished), finished.stderr).to.equal('E_STATE')
  expect(finished.stderr).to.match(/task "T3" of run R-\S+ \(child run R-\S+\) is succeeded, not waiting for a person; nothing was skipped/)
  expect((await timeline()).length, 'nothing was written').to.equal(before)
  expect((await readIn(location, (s) => s.readRun(parent))).status).to.equal('blocked')

  // The skip as a process.
  const skipped = await pipe(['resume', parent, '--skip', 'T1', '--note', 'done by hand in PR 12', '--json', ...storeArgs], {cwd: dir})
  expect(skipped.code, skipped.stderr).to.equal(0)
  const out = json<{status: string; reason: string}>(skipped)
  // A skipped task never reads as plain success: the foreach is partial and says why.
  expect(out.status).to.equal('succeeded')
  expect(out.reason).to.equal('partial: 1 of 3 item(s) succeeded, 0 failed, 1 skipped by a person, 1 blocked by a dependency')

  const snapshots = await readIn(location, (s) => s.readSnapshots(parent))
  const each = snapshots.filter((s) => s.step.name === 'each').at(-1)!
  const outputs = each.outputs as {items: Item[]; skipped?: number; succeeded: number; total: number}
  expect(outputs.items.map((i) => [i.key, i.status, i.blocked_by ?? null])).to.deep.equal([
    ['T1', 'skipped', null],
    ['T2', 'blocked', 'T1'],
    ['T3', 'succeeded', null],
  ])
  expect(outputs).to.include({skipped: 1, succeeded: 1, total: 3})
  expect(outputs.items[0]!.reason).to.equal('skipped by a person: done by hand in PR 12')
  expect(outputs.items[1]!.reason).to.equal('not run: it depends on "T1", which was skipped (skipped by a person: done by hand in PR 12)')

  const record: RunRecord = await readIn(location, (s) => s.readRun(parent))
  const child = outputs.items[0]!.run_id!
  const user = (await import('node:os')).userInfo().username
  expect(record.skips).to.have.length(1)
  expect(record.skips![0]).to.include({step: 'each', key: 'T1', index: 0, run_id: child, by: user, note: 'done by hand in PR 12', run_dependents: false})
  const line = (await timeline()).find((e) => e.event === 'task_skipped')!
  expect(line).to.include({step: 'each', by: user, at: record.skips![0]!.at})
  expect(line.reason).to.contain('task "T1"').and.contain('done by hand in PR 12')
  // The skipped task's child run is ended, saying why: nothing is left waiting.
  const task = await readIn(location, (s) => s.readRun(child))
  expect(task.status).to.equal('cancelled')
  expect(task.status_reason).to.contain('skipped by').and.contain('done by hand in PR 12')

  const shown = await cli(['runs', 'show', parent, ...storeArgs], {cwd: dir})
  expect(shown.stdout).to.match(/task_skipped step each by \S+: task "T1" \(child run R-\S+\) skipped: done by hand in PR 12/)
  const audit = await cli(['audit', 'verify', ...storeArgs], {cwd: dir})
  expect(audit.code, audit.stdout + audit.stderr).to.equal(0)

  // A finished run's tasks cannot be skipped.
  const again = await pipeHere(['resume', parent, '--skip', 'T1', '--note', 'again', ...storeArgs], {cwd: dir})
  expect(errorCode(again), again.stderr).to.equal('E_STATE')
}

describe('skipping a blocked task on the built CLI', function () {
  this.timeout(180000)

  it('file store: T1 skipped with a note, T2 (depends on T1) not run, T3 done; recorded with who and why, audit passes', async () => {
    await skipFlow([], path.join(dir, '.pipe'), true)
  })

  it('--run-dependents: the tasks that depend on the skipped one run; export shows the skip', async () => {
    const parent = await blockedParent([])
    // The skip as a process.
    const skipped = await pipe(['resume', parent, '--skip', 'T1', '--run-dependents', '--note', 'not needed', '--json'], {cwd: dir})
    expect(skipped.code, skipped.stderr).to.equal(0)
    expect(json<{reason: string}>(skipped).reason).to.equal('partial: 2 of 3 item(s) succeeded, 0 failed, 1 skipped by a person')
    const each = (await snapshotsIn(dir, parent)).filter((s) => s.step.name === 'each').at(-1)!
    expect((each.outputs as {items: Item[]}).items.map((i) => [i.key, i.status])).to.deep.equal([
      ['T1', 'skipped'],
      ['T2', 'succeeded'],
      ['T3', 'succeeded'],
    ])
    expect((await runRecordIn(dir, parent)).run.skips![0]).to.include({run_dependents: true})
    // As a process: the file's one export.
    const exported = await pipe(['export', parent, '--dir', 'out', '--json'], {cwd: dir})
    expect(exported.code, exported.stderr).to.equal(0)
    const timeline = await readFile(path.join(dir, 'out', 'runs', parent, 'timeline.md'), 'utf8')
    expect(timeline).to.match(/\*\*task_skipped\*\*: task "T1" \(child run R-\S+\) skipped: not needed; the tasks that depend on it run as if it had succeeded/)
    await expectAuditPasses(dir)
    // The skip is part of the sealed trail: a note changed afterwards is found.
    const file = path.join(dir, '.pipe', 'runs', parent, 'run.json')
    await writeFile(file, (await readFile(file, 'utf8')).replace('not needed', 'forged note'))
    const forged = await pipeHere(['audit', 'verify'], {cwd: dir})
    expect(forged.code, forged.stdout + forged.stderr).to.equal(4)
    expect(forged.stdout).to.contain(`${parent}: the seal does not match`)
  })

  describe('on PostgreSQL', () => {
    let cluster: Cluster
    before(async function () {
      cluster = await startCluster(this)
    })
    after(async () => cluster?.stop())

    it('the same skip, recorded through the same trail, audit passes', async () => {
      const url = cluster.url(await cluster.createDatabase())
      await skipFlow(['--store', url], url)
    })
  })
})

/** A task that checkpoints the repository, changes it, and ends blocked with the change in the working tree. */
const CODING_TASK = `version: 1
name: coding-task
inputs:
  name: {type: string, required: true}
steps:
  - {id: checkpoint, kind: git, action: checkpoint, message: "pipe: checkpoint before \${{ inputs.name }}", next: edit}
  - id: edit
    kind: command
    run: [node, -e, "require('fs').writeFileSync('app.txt', 'broken by \${{ inputs.name }}\\\\n'); require('fs').writeFileSync('new.txt', 'x')"]
    next: stuck
  - {id: stuck, kind: end, status: blocked, reason: "\${{ inputs.name }}: QA still fails; a person must look"}
`

const CODING_MAIN = `version: 1
name: coding
steps:
  - id: each
    kind: foreach
    items: "\${{ ['T1'] }}"
    as: t
    key: "\${{ t }}"
    pipeline: ./coding-task.yaml
    with: {name: "\${{ t }}"}
    on: {success: fin, partial: fin, fail: failed}
  - {id: fin, kind: end, status: succeeded, reason: "\${{ steps.each.outcome }}: \${{ steps.each.reason }}"}
  - {id: failed, kind: end, status: failed, reason: "\${{ steps.each.reason }}"}
`

const git = (cwd: string, ...args: string[]): string => execFileSync('git', args, {cwd, encoding: 'utf8'}).trim()

/**
 * A task that ends blocked with its change in the working tree, rolled back by a person; the store
 * is named by PIPE_STORE when given (so the command the rollback prints runs as printed). `first`:
 * the file's first rollback flow, whose first refusal is a process.
 */
async function rollbackFlow(env: Record<string, string>, store?: string, first = false): Promise<void> {
  const location = store ?? path.join(dir, '.pipe')
  const auditPasses = async (): Promise<void> => {
    const audit = await pipeHere(['audit', 'verify'], {cwd: dir, env})
    expect(audit.code, audit.stdout + audit.stderr).to.equal(0)
  }
  git(dir, 'init', '-q')
  git(dir, 'config', 'user.email', 'dev@example.com')
  git(dir, 'config', 'user.name', 'dev')
  await writeFile(path.join(dir, '.gitignore'), '.pipe/\n')
  await writeFile(path.join(dir, 'app.txt'), 'works\n')
  await writeFile(path.join(dir, 'coding-task.yaml'), CODING_TASK)
  await writeFile(path.join(dir, 'coding.yaml'), CODING_MAIN)
  await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\nallowed_commands:\n  - [node, -e, "{arg}"]\n')
  git(dir, 'add', '-A')
  git(dir, 'commit', '-q', '-m', 'start')

  const run = await pipeHere(['run', 'coding.yaml', '--policy', 'policy.yaml', '--text', 'x', '--json'], {cwd: dir, env})
  const parent = json<{run_id: string; status: string}>(run)
  expect(parent.status, run.stderr).to.equal('blocked')
  const each = (await readIn(location, (s) => s.readSnapshots(parent.run_id))).find((s) => s.step.name === 'each')!
  const task = (each.outputs as {items: Item[]}).items[0]!.run_id!
  const checkpoint = (await readIn(location, (s) => s.readSnapshots(task))).find((s) => s.step.name === 'checkpoint')!
  const commit = (checkpoint.outputs as {checkpoint: {commit: string}}).checkpoint.commit
  expect(await readFile(path.join(dir, 'app.txt'), 'utf8')).to.equal('broken by T1\n')

  // Bad input changes nothing: a run with no checkpoint (as a process in the first flow), a missing note.
  const noCheckpoint = await (first ? pipe : pipeHere)(['rollback', parent.run_id, '--checkpoint', '--note', 'x'], {cwd: dir, env})
  expect(errorCode(noCheckpoint), noCheckpoint.stderr).to.equal('E_INVALID_ARGS')
  expect(noCheckpoint.stderr).to.contain('has made no checkpoint')
  const noNote = await pipeHere(['rollback', task, '--checkpoint'], {cwd: dir, env})
  expect(errorCode(noNote), noNote.stderr).to.equal('E_INVALID_ARGS')
  expect(await readFile(path.join(dir, 'app.txt'), 'utf8')).to.equal('broken by T1\n')

  // Something the person wrote while looking at the blocked task: discarded from the tree, never lost.
  await writeFile(path.join(dir, 'notes.txt'), 'what I saw\n')
  // The rollback as a process.
  const rolled = await pipe(['rollback', task, '--checkpoint', '--note', 'the agent went the wrong way'], {cwd: dir, env})
  expect(rolled.code, rolled.stderr).to.equal(0)
  // Real git: HEAD is the checkpoint commit, the tree is clean, the change and the new file are gone.
  expect(git(dir, 'rev-parse', 'HEAD')).to.equal(commit)
  expect(git(dir, 'status', '--porcelain')).to.equal('')
  expect(await readFile(path.join(dir, 'app.txt'), 'utf8')).to.equal('works\n')

  const record = await readIn(location, (s) => s.readRun(task))
  expect(record.status, 'the task waits, idle, for a person: skipped or run again').to.equal('blocked')
  expect(record.rollbacks).to.have.length(1)
  expect(record.rollbacks![0]).to.include({step: 'checkpoint', seq: checkpoint.step.seq, to: commit, note: 'the agent went the wrong way'})
  expect(record.rollbacks![0]!.files).to.deep.equal(['app.txt', 'new.txt', 'notes.txt'])
  const saved = record.rollbacks![0]!.saved!
  expect(rolled.stdout).to.contain(`git stash apply ${saved}`)
  expect(git(dir, 'show', `${saved}^3:notes.txt`), 'the stash keeps the untracked file').to.equal('what I saw')
  expect(git(dir, 'show', `${saved}:app.txt`), "and the agent's change").to.equal('broken by T1')
  const line = (await readIn(location, (s) => s.readEvents(task))).find((e) => e.event === 'rolled_back')!
  expect(line.reason).to.contain(commit).and.contain('the agent went the wrong way')
  await auditPasses()

  // Rolled back once, it is not rolled back again by mistake.
  const twice = await pipeHere(['rollback', task, '--checkpoint', '--note', 'again'], {cwd: dir, env})
  expect(errorCode(twice), twice.stderr).to.equal('E_STATE')

  // The hint it printed continues the parent run: run exactly that command.
  const hint = /^\s+(pipe resume \S+ --skip \S+ --note '[^']*')$/m.exec(rolled.stdout)?.[1]
  expect(hint, rolled.stdout).to.equal(`pipe resume ${parent.run_id} --skip T1 --note 'the agent went the wrong way'`)
  const go = await pipeHere(['resume', parent.run_id, '--skip', 'T1', '--note', 'the agent went the wrong way', '--json'], {cwd: dir, env})
  // Its only task skipped, the foreach did not succeed: the run says so and fails.
  const ended = json<{status: string; reason: string}>(go)
  expect(ended.status).to.equal('failed')
  expect(ended.reason).to.match(/: 0 of 1 item\(s\) succeeded, 0 failed, 1 skipped by a person$/)
  await auditPasses()
  // A task that has ended (skipped: its child run cancelled) is not rolled back.
  const late = await pipeHere(['rollback', task, '--checkpoint', '--note', 'late'], {cwd: dir, env})
  expect(errorCode(late), late.stderr).to.equal('E_STATE')
}

describe('rolling a blocked task back to its checkpoint on the built CLI', function () {
  this.timeout(180000)

  it('pipe rollback --checkpoint puts the workspace at the checkpoint commit, records who, why and which commits, and its hint continues the run', async () => {
    await rollbackFlow({}, undefined, true)
  })

  describe('on PostgreSQL', () => {
    let cluster: Cluster
    before(async function () {
      cluster = await startCluster(this)
    })
    after(async () => cluster?.stop())

    it('the same rollback, recorded through the same trail, audit passes', async () => {
      const url = cluster.url(await cluster.createDatabase())
      await rollbackFlow({PIPE_STORE: url}, url)
    })
  })
})
