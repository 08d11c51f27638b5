/**
 * Seed 002's hard rule, every step leaves a snapshot, for a cancelled one too (issue 37, item 1):
 * pipe cancel of a run whose command step runs, whose compile waits on a model, or which waits at
 * a review records that step's snapshot with the outcome cancelled, ends the run cancelled, and
 * the process that drove it says so (exit 5, CANCELLED), not "interrupted … pipe resume continues".
 * A child of a foreach driven in its parent's process is cancelled alone.
 *
 * The process that drives a run is always a process of its own; the cancel of a driven run runs in
 * this process (test/helpers/pipe-here.ts: the same command, its request and signal to the driver,
 * its exit code). The first cancel of a run no process drives (paused at a review, on the file
 * store) is a `pipe` process; the other cancels, the runs that pause and the refused review after
 * them run here.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {existsSync} from 'node:fs'
import {copyFile, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, defaultPipeline, examples, json, pipe, repoRoot, tempDir, testHome} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {expectAuditPasses, runRecordIn, runsIn, snapshotsIn} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'
import {openStore} from '../../src/store/open.js'
import type {Snapshot} from '../../src/types/snapshot.js'

let dir: string
let cleanup: () => Promise<void>

/** Blocks on a FIFO no one writes to: only a cancel ends it. It says it started, and prints what it did so far. */
const WAIT_SH = 'echo "half of the work done"\n: > "started-$1"\ncat gate.fifo\n'
const POLICY = 'version: 1\nallowed_commands:\n  - [sh, wait.sh, "{arg}"]\n'

async function workspace(): Promise<void> {
  await writeFile(path.join(dir, 'wait.sh'), WAIT_SH)
  await writeFile(path.join(dir, 'policy.yaml'), POLICY)
  const made = await new Promise<number | null>((resolve) => spawn('mkfifo', [path.join(dir, 'gate.fifo')]).on('close', resolve))
  expect(made, 'mkfifo').to.equal(0)
}

/**
 * A pipeline that pauses at a review as soon as it can (a review needs a spec: the default
 * pipeline's ingest and compile, offline, write one), written into the test's folder: the default
 * pipeline's steps between them cost a run ~2.6 s of CPU against ~1 s.
 */
async function reviewPipeline(): Promise<string> {
  await mkdir(path.join(dir, 'prompts'))
  await copyFile(path.join(repoRoot, 'pipelines', 'prompts', 'compile.md'), path.join(dir, 'prompts', 'compile.md'))
  await writeFile(
    path.join(dir, 'review.yaml'),
    'version: 1\nname: review\nsteps:\n  - {id: ingest, kind: ingest, next: compile}\n  - {id: compile, kind: compile, prompt: prompts/compile.md, next: manual_review}\n  - {id: manual_review, kind: review, next: done}\n  - {id: done, kind: end, status: succeeded}\n',
  )
  return path.join(dir, 'review.yaml')
}

interface Driving {
  done: Promise<{code: number | null; signal: string | null; stdout: string; stderr: string}>
}

/** `pipe run …` as a process of its own, driving the run until it ends. */
function drive(args: string[], env: Record<string, string> = {}): Driving {
  const child = spawn(process.execPath, [bin, ...args], {cwd: dir, env: {...process.env, NO_COLOR: '1', PIPE_HOME: testHome, ...env}})
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  return {done: new Promise((resolve) => child.on('close', (code, signal) => resolve({code, signal, stdout, stderr})))}
}

/**
 * The store a test's commands are given: `--store URL` for PostgreSQL, none for the file store (.pipe
 * in the test's folder). The reads below go through it in this process, as the read commands would.
 */
const storeOf = (storeArgs: string[]): string | undefined => storeArgs[1]

/** The store's runs, parents and children, with the status `pipe runs list --all --json` gives (read in this process). */
function runIds(storeArgs: string[]): ReturnType<typeof runsIn> {
  return runsIn(dir, storeOf(storeArgs))
}

/** What `pipe snapshot show RUN --json` prints (read in this process). */
function snapshotsOf(storeArgs: string[], runId: string): Promise<Snapshot[]> {
  return snapshotsIn(dir, runId, storeOf(storeArgs))
}

/** The excerpts of the log evidence the run's last snapshot links (read through the file store as pipe reads it). */
async function logExcerpts(runId: string): Promise<string[]> {
  const store = await openStore(path.join(dir, '.pipe'), 'existing')
  const last = (await store.readSnapshots(runId)).at(-1)
  const excerpts: string[] = []
  for (const link of last?.evidence_links.filter((l) => l.type === 'log') ?? [])
    excerpts.push(String(((await store.readEvidence(link.evidence_id)).content as {excerpt?: unknown}).excerpt))
  return excerpts
}

/** What every cancelled step's snapshot and run must say, and that the audit passes. */
async function expectCancelled(storeArgs: string[], runId: string, step: string, reason = /^cancelled by .+: no longer needed$/): Promise<Snapshot> {
  const snapshots = await snapshotsOf(storeArgs, runId)
  const last = snapshots.at(-1)!
  expect(last.step.name, JSON.stringify(snapshots.map((s) => s.step.name))).to.equal(step)
  expect(last.decisions.at(-1)).to.deep.include({decision: 'cancelled', next_step: null, run_status: 'cancelled'})
  expect(last.decisions.at(-1)!.reason).to.match(reason)
  expect(last.spec_version_out).to.equal(null)
  expect(last.errors, 'the cancelled step recorded no error').to.deep.equal([])
  expect(Date.parse(last.step.ended_at)).to.be.at.least(Date.parse(last.step.started_at))
  // The run record `pipe runs show RUN --json` prints as run, and `pipe audit verify RUN` exiting 0, in this process.
  const shown = (await runRecordIn(dir, runId, storeOf(storeArgs))).run
  expect(shown.status).to.equal('cancelled')
  expect(shown.status_reason).to.match(reason)
  await expectAuditPasses(dir, runId, storeOf(storeArgs))
  return last
}

/** `pipe cancel RUN --reason …` in this process, or (`command` pipe) as a process. */
async function cancel(runId: string, storeArgs: string[], command: typeof pipeHere = pipeHere): Promise<void> {
  const cancelled = await command(['cancel', runId, '--reason', 'no longer needed', ...storeArgs], {cwd: dir})
  expect(cancelled.code, cancelled.stdout + cancelled.stderr).to.equal(0)
}

/** The driving process agrees with the record: cancelled (5), never interrupted. */
function expectSaidCancelled(ended: Awaited<Driving['done']>, runId: string): void {
  expect(ended.code, ended.stderr).to.equal(5)
  expect(ended.stdout + ended.stderr)
    .to.contain(`run ${runId}  cancelled`)
    .and.match(/cancelled by .+: no longer needed/)
  expect(ended.stdout + ended.stderr).to.not.match(/interrupted|pipe resume/)
}

const stores: Array<{name: string; setup: (context: Mocha.Context) => Promise<{args: string[]}>}> = [
  {name: 'the file store', setup: async () => ({args: []})},
  {
    name: 'PostgreSQL',
    setup: async (context) => {
      cluster ??= await startCluster(context)
      const url = cluster.url(await cluster.createDatabase())
      return {args: ['--store', url]}
    },
  },
]
let cluster: Cluster | undefined

describe('pipe cancel leaves the snapshot of the step it stopped (seed 002)', function () {
  this.timeout(120000)
  beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-cancel-snap-')))
  afterEach(async () => cleanup())
  after(async () => cluster?.stop())

  for (const {name, setup} of stores) {
    describe(name, () => {
      it('a command step that is running: cancelled, with the output it printed until then as evidence', async function () {
        const {args} = await setup(this)
        await workspace()
        await writeFile(
          path.join(dir, 'one.yaml'),
          'version: 1\nname: one\nsteps:\n  - {id: work, kind: command, run: [sh, wait.sh, a], next: after}\n  - {id: after, kind: noop}\n',
        )
        const driving = drive(['run', 'one.yaml', '--text', 'x', '--policy', 'policy.yaml', ...args])
        await changeIn(dir, () => existsSync(path.join(dir, 'started-a')), 'the command step started', driving.done)
        const [run] = await runIds(args)
        await cancel(run!.run_id, args)
        const ended = await driving.done
        expectSaidCancelled(ended, run!.run_id)
        await expectCancelled(args, run!.run_id, 'work')
        if (args.length === 0) expect((await logExcerpts(run!.run_id)).join('\n')).to.contain('half of the work done')
      })

      it('a compile waiting on a slow model: cancelled, no spec version out', async function () {
        const {args} = await setup(this)
        const server = await ModelServer.start()
        try {
          server.script('compile', {hang: true})
          const driving = drive(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--provider', 'openai', ...args], {
            OPENAI_BASE_URL: server.url,
            OPENAI_API_KEY: 'sk-test-4f1c9a7e2b6d8e0f3a5c7b9d1e2f4a6c',
          })
          await Promise.race([server.waitForRequests(1), driving.done.then((e) => Promise.reject(new Error(`the run ended first: ${e.stderr}`)))])
          const [run] = await runIds(args)
          await cancel(run!.run_id, args)
          const ended = await driving.done
          expectSaidCancelled(ended, run!.run_id)
          await expectCancelled(args, run!.run_id, 'compile')
        } finally {
          await server.close()
        }
      })

      it('a run paused at a review, which no process drives: the waiting step is recorded cancelled', async function () {
        const {args} = await setup(this)
        const paused = await pipeHere(['run', await reviewPipeline(), '--input', path.join(examples, 'full-prd.md'), '--json', ...args], {cwd: dir})
        expect(paused.code, paused.stderr).to.equal(10)
        const runId = json<{run_id: string}>(paused).run_id
        // The file store's cancel is a process (the file's only one), PostgreSQL's runs here.
        await cancel(runId, args, args.length === 0 ? pipe : pipeHere)
        const snapshots = await snapshotsOf(args, runId)
        const last = await expectCancelled(args, runId, 'manual_review')
        expect(last.step.seq).to.equal(snapshots.at(-2)!.step.seq + 1)
      })

      it('a grandchild paused at a review, two pipeline steps down: cancelling the top run records its waiting step cancelled too, and a decision after is refused', async function () {
        const {args} = await setup(this)
        const sub = (id: string, file: string): string =>
          `version: 1\nname: ${id}\nsteps:\n  - {id: ${id}, kind: pipeline, file: ${JSON.stringify(file)}, on: {success: done, fail: bad}}\n  - {id: done, kind: end, status: succeeded}\n  - {id: bad, kind: end, status: failed, reason: child failed}\n`
        await writeFile(path.join(dir, 'mid.yaml'), sub('inner', await reviewPipeline()))
        await writeFile(path.join(dir, 'top.yaml'), sub('mid', './mid.yaml'))
        const blocked = await pipeHere(['run', 'top.yaml', '--input', path.join(examples, 'full-prd.md'), '--json', ...args], {cwd: dir})
        expect(json<{status: string}>(blocked).status, blocked.stderr).to.equal('blocked')
        const top = json<{run_id: string}>(blocked).run_id
        await cancel(top, args)
        const runs = await runIds(args)
        expect(runs.map((r) => r.status)).to.deep.equal(['cancelled', 'cancelled', 'cancelled'])
        // The top run's child's child: the run of the pipeline with the review.
        const child = runs.find((r) => r.parent?.run_id === top)!.run_id
        const grandchild = runs.find((r) => r.parent?.run_id === child)!.run_id
        await expectCancelled(
          args,
          grandchild,
          'manual_review',
          /^parent run R-\S+ was cancelled: parent run R-\S+ was cancelled: cancelled by .+: no longer needed$/,
        )
        const late = await pipeHere(['review', grandchild, '--decision', 'go', ...args], {cwd: dir})
        expect(late.code, late.stderr).to.equal(2)
        expect(late.stderr).to.contain('E_STATE').and.contain('cancelled')
      })
    })
  }

  it('pipe cancel CHILD of a foreach driven in its parent process stops that child alone; the parent goes on', async () => {
    await workspace()
    await writeFile(
      path.join(dir, 'many.yaml'),
      'version: 1\nname: many\nsteps:\n  - id: each\n    kind: foreach\n    items: "${{ [\\"a\\", \\"b\\"] }}"\n    concurrency: 1\n    steps:\n      - {id: work, kind: command, run: [sh, wait.sh, "${{ item }}"]}\n',
    )
    // Item b's command does not block: the script blocks on the FIFO only for a.
    await writeFile(path.join(dir, 'wait.sh'), `if [ "$1" = a ]; then\n${WAIT_SH}fi\n`)
    const driving = drive(['run', 'many.yaml', '--text', 'x', '--policy', 'policy.yaml'])
    await changeIn(dir, () => existsSync(path.join(dir, 'started-a')), 'the first child started', driving.done)
    const runs = await runIds([])
    const child = runs.find((r) => r.parent !== undefined)!
    const parent = runs.find((r) => r.parent === undefined)!
    await cancel(child.run_id, [])
    const ended = await driving.done
    expect(ended.stdout + ended.stderr, 'the parent was not interrupted').to.not.match(/interrupted/)
    expect(ended.signal).to.equal(null)
    const after = await runIds([])
    expect(after.find((r) => r.run_id === parent.run_id)!.status).to.not.equal('interrupted')
    const children = after.filter((r) => r.parent !== undefined)
    expect(children.map((r) => r.status).sort()).to.deep.equal(['cancelled', 'succeeded'])
    await expectCancelled([], child.run_id, 'work')
  })

  it('pipe cancel PARENT of a live foreach: it ends cancelled, and so do its children driven in the same process', async () => {
    await workspace()
    await writeFile(
      path.join(dir, 'many.yaml'),
      'version: 1\nname: many\nsteps:\n  - id: each\n    kind: foreach\n    items: "${{ [\\"a\\", \\"b\\"] }}"\n    concurrency: 2\n    steps:\n      - {id: work, kind: command, run: [sh, wait.sh, "${{ item }}"]}\n',
    )
    const driving = drive(['run', 'many.yaml', '--text', 'x', '--policy', 'policy.yaml'])
    await changeIn(dir, () => existsSync(path.join(dir, 'started-a')) && existsSync(path.join(dir, 'started-b')), 'both children started', driving.done)
    const parent = (await runIds([])).find((r) => r.parent === undefined)!
    await cancel(parent.run_id, [])
    const ended = await driving.done
    expect(ended.code, ended.stderr).to.equal(5)
    expect(ended.stdout).to.contain(`run ${parent.run_id}  cancelled`)
    expect(ended.stdout + ended.stderr).to.not.match(/interrupted|pipe resume/)
    const after = await runIds([])
    expect(after.map((r) => r.status)).to.deep.equal(['cancelled', 'cancelled', 'cancelled'])
    await expectCancelled([], parent.run_id, 'each')
    // Each child records its own step cancelled, whether its own request or its parent's stop reached it first.
    for (const child of after.filter((r) => r.parent !== undefined)) {
      const last = await expectCancelled([], child.run_id, 'work', /^parent run R-\d+-\d+ was cancelled: cancelled by .+: no longer needed$/)
      expect(last.decisions.at(-1)!.reason).to.contain(parent.run_id)
    }
  })
})
