/**
 * A detached run on a PostgreSQL store is the workers' for its whole life: answers and a review
 * given to it by `pipe answer` / `pipe review` are recorded and the run goes back on its queue
 * (the command prints "queued" and exits 0), and a worker drives it on; `pipe runs show` names the
 * worker holding a run, its lease and epoch, or that none holds it. Every wait is for a row.
 *
 * The workers, and the first `run`, `answer`, `review`, `audit verify`, `resume`, `runs show` and
 * `runs list`, are `pipe` processes; the other commands run in this process
 * (test/helpers/pipe-here.ts: the same command, output and exit code).
 */
import {expect} from 'chai'
import {mkdir, readdir, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import {defaultPipeline, examples, json, pipe, repoRoot} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {readIn, runRecordIn} from '../helpers/stores.js'
import {until, useWorkerSuite, type Worker} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'

const fixtures = path.join(repoRoot, 'test', 'fixtures', 'postgres')

interface Holding {
  worker: {host: string; pid: number; name?: string} | null
  lease_until: string | null
  epoch: number
  queue: string | null
  detached_queue: string | null
}

describe('a detached run handed back to the workers of a PostgreSQL store', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  const team = useWorkerSuite('pipe-pg-handback-', (suite) => ({cluster, dir, db, url} = suite))

  function startWorker(args: string[] = [], extra: Record<string, string> = {}): Worker {
    return team.start(url, args, {cwd: dir, env: {PIPE_INTERACTIVE: '0', ...extra}})
  }

  /** `pipe runs show RUN --json`, in this process or (`command` pipe) as a process. */
  const show = async <T>(runId: string, command: typeof pipeHere = pipeHere): Promise<T> =>
    json<T>(await command(['runs', 'show', runId, '--json', '--store', url], {cwd: dir}))
  const queued = async (runId: string): Promise<boolean> =>
    (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_queue WHERE run_id = $1', [runId]))[0]!.n === 1
  /**
   * What `runs show RUN --json` says of the run (its status and record), read in this process: the
   * waits below poll it, and a process per check was half of this file's processes.
   */
  const stateOf = (runId: string): Promise<{run: RunRecord; status: string}> => runRecordIn(dir, runId, url)
  /** The run waits for a person (of this kind) and no worker has it queued any more. */
  const waitsFor = (runId: string, kind: string) => async (): Promise<boolean> => {
    const run = await stateOf(runId)
    return run.status === 'awaiting_input' && run.run.pending?.kind === kind && !(await queued(runId))
  }

  it('pipe answer and pipe review put the run back on its queue (printing "queued") and a worker finishes it', async () => {
    const detached = await pipe(['run', defaultPipeline, '--input', path.join(examples, 'one-sentence.txt'), '--detach', '--store', url, '--json'], {cwd: dir})
    expect(detached.code, detached.stderr).to.equal(0)
    const runId = json<{run_id: string}>(detached).run_id
    const worker = startWorker(['--name', 'alpha'])
    await until('the run waits for answers', waitsFor(runId, 'answers'))

    const answered = await pipe(['answer', runId, '--file', path.join(examples, 'one-sentence.answers.yaml'), '--store', url, '--json'], {cwd: dir})
    expect(answered.code, answered.stderr).to.equal(0)
    expect(json(answered)).to.deep.include({run_id: runId, status: 'queued', queue: 'default', run_status: 'awaiting_input'})
    await until('the worker took the answers and the run waits for a review', waitsFor(runId, 'review'))

    const text = await pipe(['review', runId, '--decision', 'go', '--store', url], {cwd: dir})
    expect(text.code, text.stderr).to.equal(0)
    expect(text.stdout).to.equal(`${runId} queued on default: a pipe worker continues it; pipe runs show ${runId} follows it\n`)
    await until('the run has ended', async () => (await stateOf(runId)).status === 'succeeded' && !(await queued(runId)))

    // The worker, not the commands, drove every step after each pause: its session lines name them.
    const lines = worker
      .stderr()
      .split('\n')
      .filter((l) => l.includes(runId))
    expect(lines).to.deep.equal([`pipe worker: ${runId} awaiting_input`, `pipe worker: ${runId} awaiting_input`, `pipe worker: ${runId} succeeded`])
    const events = await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [runId])
    const names = events.map((e) => (JSON.parse(e.line) as {event: string}).event)
    expect(names.filter((n) => n === 'answers_given' || n === 'review_given')).to.deep.equal(['answers_given', 'review_given'])
    const audit = await pipe(['audit', 'verify', runId, '--json', '--store', url], {cwd: dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
  })

  it('pipe resume of a detached run that stopped puts it back on its queue instead of driving it here', async () => {
    const detached = await pipeHere(['run', defaultPipeline, '--input', path.join(examples, 'one-sentence.txt'), '--detach', '--store', url, '--json'], {
      cwd: dir,
    })
    const runId = json<{run_id: string}>(detached).run_id
    startWorker()
    await until('the run waits for answers', waitsFor(runId, 'answers'))
    const resumed = await pipe(['resume', runId, '--answers', path.join(examples, 'one-sentence.answers.yaml'), '--store', url, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json(resumed)).to.deep.include({run_id: runId, status: 'queued', queue: 'default'})
    await until('a worker took it on to the review', waitsFor(runId, 'review'))
  })

  it('pipe resume of a detached run that failed queues it again, and a worker redrives it', async () => {
    const failing = path.join(dir, 'failing.yaml')
    await writeFile(failing, 'version: 1\nname: failing\nsteps:\n  - {id: broken, kind: command, run: [sleep, "not-a-number"]}\n')
    const detached = await pipeHere(['run', failing, '--policy', path.join(fixtures, 'policy.yaml'), '--detach', '--store', url, '--json'], {cwd: dir})
    expect(detached.code, detached.stderr).to.equal(0)
    const runId = json<{run_id: string}>(detached).run_id
    const worker = startWorker()
    await until('the run has failed', async () => (await stateOf(runId)).status === 'failed' && !(await queued(runId)))
    const resumed = await pipeHere(['resume', runId, '--store', url, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json(resumed)).to.deep.include({run_id: runId, status: 'queued', queue: 'default', run_status: 'failed'})
    await until('the worker redrove it', async () => worker.stderr().split(`pipe worker: ${runId} failed`).length === 3)
    const events = await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [runId])
    expect(events.map((e) => (JSON.parse(e.line) as {event: string}).event).filter((n) => n === 'failed')).to.have.length(2)
  })

  it('pipe runs show names the worker holding a run (host, pid, --name), its lease and epoch, or that no worker holds it', async () => {
    const detached = await pipeHere(
      ['run', path.join(fixtures, 'fast.yaml'), '--policy', path.join(fixtures, 'policy.yaml'), '--detach', '--store', url, '--json'],
      {cwd: dir},
    )
    const runId = json<{run_id: string}>(detached).run_id
    const waiting = await show<{holding: Holding}>(runId, pipe)
    expect(waiting.holding).to.deep.equal({worker: null, lease_until: null, epoch: 0, queue: 'default', detached_queue: 'default'})
    const text = await pipeHere(['runs', 'show', runId, '--store', url], {cwd: dir})
    expect(text.stdout).to.include('worker: none, queued on default, no worker yet (epoch 0)\n')

    // The worker is held inside its first step's commit (a fault point) while the run is looked at, so it is surely running.
    const pauseDir = path.join(dir, 'pause')
    await mkdir(pauseDir)
    const worker = startWorker(['--name', 'builder-1'], {PIPE_FAULT_PAUSE_AT: 'before-commit:first', PIPE_FAULT_PAUSE_DIR: pauseDir})
    await until('the worker is inside the commit of step first', async () => (await readdir(pauseDir)).some((f) => f.startsWith('reached.')))
    await until('the worker holds the run', async () => ((await readIn(url, async (store) => store.holding?.(runId)))?.worker ?? null) !== null)
    const held = (await show<{holding: Holding}>(runId)).holding
    expect(held.worker).to.deep.equal({host: os.hostname(), pid: worker.child.pid, name: 'builder-1'})
    expect(held.epoch).to.equal(1)
    expect(Number.isNaN(Date.parse(held.lease_until ?? ''))).to.equal(false)
    const heldText = await pipeHere(['runs', 'show', runId, '--store', url], {cwd: dir})
    // The lease is renewed as the worker goes: its time is whatever it is now, the rest is exact.
    expect(heldText.stdout.replace(/lease until \S+,/, 'lease until T,')).to.include(
      `worker: builder-1 (host ${os.hostname()}, pid ${worker.child.pid}), lease until T, epoch 1\n`,
    )

    // pipe runs list names the worker of a running run, in --json and in a WORKER column.
    const listed = json<{runs: Array<{run_id: string; status: string; worker?: string}>}>(await pipe(['runs', 'list', '--json', '--store', url], {cwd: dir}))
    expect(listed.runs.map((r) => [r.run_id, r.status, r.worker])).to.deep.equal([[runId, 'running', 'builder-1']])
    const table = (await pipeHere(['runs', 'list', '--store', url], {cwd: dir})).stdout.split('\n')
    // And the step it is in, recorded before the step acted.
    expect(table[0]).to.match(/^RUN .* UPDATED +STEP +WORKER$/)
    expect(table[1]).to.match(new RegExp(`^${runId} +running .* first \\(#1\\) +builder-1$`))

    await writeFile(path.join(pauseDir, 'go'), '')
    await until('the run has ended', async () => !(await queued(runId)))
    const done = (await show<{holding: Holding}>(runId)).holding
    expect(done).to.deep.equal({worker: null, lease_until: null, epoch: 1, queue: null, detached_queue: 'default'})
    const doneText = await pipeHere(['runs', 'show', runId, '--store', url], {cwd: dir})
    expect(doneText.stdout).to.include('worker: none, not queued (a detached run of default; it has ended succeeded) (epoch 1)\n')
  })

  it('a file store shows no holding', async () => {
    const run = await pipeHere(['run', path.join(fixtures, 'fast.yaml'), '--policy', path.join(fixtures, 'policy.yaml'), '--json'], {cwd: dir})
    const runId = json<{run_id: string}>(run).run_id
    const shown = json<Record<string, unknown>>(await pipeHere(['runs', 'show', runId, '--json'], {cwd: dir}))
    expect(shown).to.not.have.property('holding')
    expect((await pipeHere(['runs', 'list'], {cwd: dir})).stdout.split('\n')[0]).to.match(/^RUN .* UPDATED$/)
  })
})
