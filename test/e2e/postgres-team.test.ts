/**
 * A team of pipe workers on one PostgreSQL store, under the conditions a team meets: several workers
 * racing for every queued run (one claim wins, nobody attempts a run another holds), the LISTEN
 * connection dropped, the database down when a worker starts, and a worker frozen inside a step's
 * transaction while the others go on committing. Every wait is for an event (a row, a line, a
 * backend), never a sleep; a lease runs out when the test says so (an UPDATE of lease_until), not
 * when a clock does.
 */
import {expect} from 'chai'
import {mkdir, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {examples, json, pipe, repoRoot} from '../helpers/cli.js'
import {saidBy, until, useWorkerSuite, type Worker} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'

const fixtures = path.join(repoRoot, 'test', 'fixtures', 'postgres')
const policy = path.join(fixtures, 'policy.yaml')

describe('a team of pipe workers on one PostgreSQL store', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  // Its own cluster: tests here stop and restart the server.
  const team = useWorkerSuite('pipe-pg-team-', (suite) => ({cluster, dir, db, url} = suite), {own: true})

  const startWorker = (args: string[], extra: Record<string, string> = {}): Worker => team.start(url, args, {cwd: dir, env: extra})

  const detach = async (pipeline: string, extra: string[] = []): Promise<string> => {
    const result = await pipe(['run', pipeline, '--policy', policy, ...extra, '--detach', '--store', url, '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    return json<{run_id: string}>(result).run_id
  }
  const queueEmpty = async (): Promise<boolean> => (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_queue'))[0]!.n === 0
  const statusOf = async (runId: string): Promise<string> =>
    (await cluster.sql<{status: string}>(db, `SELECT body::json->>'status' AS status FROM pipe_runs WHERE run_id = $1`, [runId]))[0]!.status
  const listening = async (): Promise<number[]> =>
    (await cluster.sql<{pid: number}>(db, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND query = 'LISTEN pipe_queue'`, [db])).map((r) => r.pid)

  it('3 workers racing for every queued run: one claim wins each, no E_CONFLICT in any log, every run succeeds exactly once', async () => {
    const workers = [0, 1, 2].map(() => startWorker(['--concurrency', '2']))
    await until('every worker listens', async () => (await listening()).length === 3)
    // Queued while all three are idle, in one call (--inputs-file, a line per run): each run wakes all of them at once.
    await writeFile(path.join(dir, 'twelve.jsonl'), '{}\n'.repeat(12))
    const queued = await pipe(
      ['run', path.join(fixtures, 'fast.yaml'), '--policy', policy, '--detach', '--inputs-file', 'twelve.jsonl', '--store', url, '--json'],
      {
        cwd: dir,
      },
    )
    expect(queued.code, queued.stderr).to.equal(0)
    const runIds = json<Array<{run_id: string}>>(queued).map((r) => r.run_id)
    expect(runIds).to.have.length(12)
    await until('every queued run has stopped', queueEmpty)
    for (const w of workers) w.child.kill('SIGTERM')
    expect(await Promise.all(workers.map((w) => w.exited))).to.deep.equal([0, 0, 0])
    const logs = workers.map((w) => w.stderr()).join('')
    expect(logs.match(/E_CONFLICT/g) ?? [], logs).to.deep.equal([])
    const ended = [...logs.matchAll(/pipe worker: (R-\d{8}-\d{4,}) succeeded/g)].map((m) => m[1]!)
    expect([...ended].sort(), 'each run ended once, by one worker').to.deep.equal([...runIds].sort())
    for (const runId of runIds) expect(await statusOf(runId)).to.equal('succeeded')
    // Taken once each: a claim that lost would have moved the epoch on a run it then left.
    const epochs = await cluster.sql<{epoch: string}>(db, 'SELECT epoch FROM pipe_runs')
    expect(epochs.map((e) => Number(e.epoch))).to.deep.equal(runIds.map(() => 1))
  })

  it('a queued run passes the same redacting door as every record: a token in its inputs is masked in every row', async () => {
    await writeFile(
      path.join(dir, 'greet.yaml'),
      'version: 1\nname: greet\ninputs:\n  name: {type: string, required: true}\nsteps:\n  - {id: done, kind: end, status: succeeded, reason: greeted}\n',
    )
    const token = `ghp_${'Q7'.repeat(18)}`
    await writeFile(path.join(dir, 'runs.jsonl'), `${JSON.stringify({name: token})}\n`)
    const queued = await pipe(['run', path.join(dir, 'greet.yaml'), '--policy', policy, '--detach', '--inputs-file', 'runs.jsonl', '--store', url, '--json'], {
      cwd: dir,
    })
    expect(queued.code, queued.stderr).to.equal(0)
    const rows = await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_runs UNION ALL SELECT line AS body FROM pipe_events')
    expect(rows.length).to.be.greaterThan(1)
    for (const {body} of rows) expect(body).to.not.include(token)
  })

  it('pipe run --detach --inputs-file queues one run per line in one call, each id in the answer; a bad line or an empty file queues nothing', async () => {
    await writeFile(
      path.join(dir, 'greet.yaml'),
      'version: 1\nname: greet\ninputs:\n  name: {type: string, required: true}\n  times: {type: integer, default: 1}\nsteps:\n  - {id: hello, kind: command, run: [sleep, "0"], next: done}\n  - {id: done, kind: end, status: succeeded, reason: greeted}\n',
    )
    const batch = (file: string, json = true): Promise<Awaited<ReturnType<typeof pipe>>> =>
      pipe(['run', path.join(dir, 'greet.yaml'), '--policy', policy, '--detach', '--inputs-file', file, '--store', url, ...(json ? ['--json'] : [])], {
        cwd: dir,
      })
    const runs = async (): Promise<number> => (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_runs'))[0]!.n
    // Every line is checked before anything is written: a bad second line refuses the first too.
    await writeFile(path.join(dir, 'bad.jsonl'), '{"name": "ada"}\n{"name": 5}\n{"name": "cy", "colour": "red"}\nnot json\n')
    const refused = await batch('bad.jsonl')
    expect(refused.code, refused.stdout).to.equal(2)
    const error = json<{error: {code: string; message: string}}>(refused).error
    expect(error.code).to.equal('E_INVALID_ARGS')
    expect(error.message).to.include('bad.jsonl line 2: ')
    expect(error.message).to.include('bad.jsonl line 3: ')
    expect(error.message).to.include('bad.jsonl line 4: not JSON')
    expect(error.message).to.not.include('line 1:')
    await writeFile(path.join(dir, 'empty.jsonl'), '\n')
    const empty = await batch('empty.jsonl')
    expect(empty.code, empty.stdout).to.equal(2)
    expect(json<{error: {code: string; message: string}}>(empty).error.message).to.include('empty.jsonl holds no run')
    await writeFile(path.join(dir, 'blank.jsonl'), '\n  \n\n')
    const blank = await batch('blank.jsonl')
    expect(blank.code, blank.stdout).to.equal(2)
    expect(json<{error: {code: string; message: string}}>(blank).error).to.deep.include({code: 'E_INVALID_ARGS'})
    expect(await runs()).to.equal(0)
    await writeFile(path.join(dir, 'runs.jsonl'), '{"name": "ada"}\n\n{"name": "bo", "times": 2}\n{"name": "cy"}\n')
    const queued = await batch('runs.jsonl')
    expect(queued.code, queued.stderr).to.equal(0)
    const answer = json<Array<{run_id: string; status: string; queue: string}>>(queued)
    expect(answer.map((r) => [r.status, r.queue])).to.deep.equal([
      ['queued', 'default'],
      ['queued', 'default'],
      ['queued', 'default'],
    ])
    const inputs = await cluster.sql<{run_id: string; inputs: unknown}>(db, `SELECT run_id, body::json->'inputs' AS inputs FROM pipe_runs ORDER BY run_id`)
    expect(inputs).to.deep.equal([
      {run_id: answer[0]!.run_id, inputs: {name: 'ada', times: 1}},
      {run_id: answer[1]!.run_id, inputs: {name: 'bo', times: 2}},
      {run_id: answer[2]!.run_id, inputs: {name: 'cy', times: 1}},
    ])
    // Without --json: a line per run.
    await writeFile(path.join(dir, 'one.jsonl'), '{"name": "di"}\n{"name": "ed"}\n')
    const plain = await batch('one.jsonl', false)
    expect(plain.code, plain.stderr).to.equal(0)
    expect(
      plain.stdout
        .trim()
        .split('\n')
        .map((line) => /^(R-\d{8}-\d{4,}) queued on default /.exec(line)?.[1]),
    )
      .to.have.length(2)
      .and.not.include(undefined)
    const worker = startWorker(['--concurrency', '2'])
    await until('every queued run has stopped', queueEmpty)
    for (const {run_id: runId} of answer) await saidBy(worker, `pipe worker: ${runId} succeeded`)
  })

  it('a LISTEN connection the server drops is made again: a run queued after it is taken by notice, not by the poll', async () => {
    // An hour between polls: only a notice can bring the run to this worker within the test.
    const worker = startWorker([], {PIPE_WORKER_POLL_MS: '3600000'})
    await until('the worker listens', async () => (await listening()).length === 1)
    const [first] = await listening()
    await cluster.sql(db, 'SELECT pg_terminate_backend($1)', [first])
    await until('the worker listens again, on a new connection', async () => {
      const now = await listening()
      return now.length === 1 && now[0] !== first
    }).catch((error: Error) => {
      throw new Error(`${error.message}; the worker said: ${worker.stderr()}`)
    })
    const runId = await detach(path.join(fixtures, 'fast.yaml'))
    await until('the run has stopped', queueEmpty)
    expect(await statusOf(runId)).to.equal('succeeded')
    await saidBy(worker, `pipe worker: ${runId} succeeded`)
  })

  describe('the database down when a worker starts', () => {
    // The cluster is this file's: started again whatever a test left it as.
    afterEach(() => {
      try {
        cluster.ctl('restart')
      } catch {
        // Running already.
      }
    })

    it('a worker started while the database is down waits, says so once, and serves the queue once it is up', async () => {
      const runId = await detach(path.join(fixtures, 'fast.yaml'))
      cluster.ctl('-m', 'fast', 'stop')
      const worker = startWorker([])
      await until('the worker says it waits', async () => worker.stderr().includes('pipe worker: waiting for the database'))
      // Started with the options it was stopped with (postmaster.opts).
      cluster.ctl('restart')
      await until('the queued run has stopped', queueEmpty).catch((error: Error) => {
        throw new Error(`${error.message}; the worker said: ${worker.stderr()}`)
      })
      expect(await statusOf(runId)).to.equal('succeeded')
      expect(worker.stderr().match(/waiting for the database/g), worker.stderr()).to.have.length(1)
      expect(worker.child.exitCode).to.equal(null)
      worker.child.kill('SIGTERM')
      expect(await worker.exited).to.equal(0)
    })

    it('Ctrl-C stops a worker that waits for the database, cleanly', async () => {
      cluster.ctl('-m', 'fast', 'stop')
      const worker = startWorker([])
      await until('the worker says it waits', async () => worker.stderr().includes('pipe worker: waiting for the database'))
      worker.child.kill('SIGINT')
      expect(await worker.exited, worker.stderr()).to.equal(0)
      expect(worker.stderr()).to.not.match(/E_INTERNAL|Error \[/)
    })
  })

  it("a worker frozen inside a step's transaction holds up no other worker: they go on committing, and its run moves to one of them once its lease is out", async () => {
    // A step that records evidence (an E- id) inside its commit.
    await writeFile(
      path.join(dir, 'ingest.yaml'),
      'version: 1\nname: ingested\nsteps:\n  - {id: ingest, kind: ingest, next: done}\n  - {id: done, kind: end, status: succeeded, reason: ok}\n',
    )
    const input = ['--input', path.join(examples, 'full-prd.md')]
    const pauseDir = path.join(dir, 'pause')
    await mkdir(pauseDir)
    // A long lease: nothing here may depend on it running out by itself.
    const lease = {PIPE_LEASE_MS: '600000'}
    const frozenRun = await detach(path.join(dir, 'ingest.yaml'), input)
    const frozen = startWorker([], {...lease, PIPE_FAULT_PAUSE_AT: 'evidence-written:ingest', PIPE_FAULT_PAUSE_DIR: pauseDir})
    await until('the first worker is inside the commit, its evidence written', async () => (await readdir(pauseDir)).some((f) => f.startsWith('reached.')))
    frozen.child.kill('SIGSTOP')
    const inTransaction = async (): Promise<number[]> =>
      (await cluster.sql<{pid: number}>(db, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'`, [db])).map((r) => r.pid)
    expect(await inTransaction()).to.have.length(1)
    const others = [await detach(path.join(dir, 'ingest.yaml'), input), await detach(path.join(dir, 'ingest.yaml'), input)]
    const other = startWorker([], lease)
    await until('the other worker has ended the runs queued after', async () =>
      others.every((r) => other.stderr().includes(`pipe worker: ${r} succeeded`)),
    ).catch((error: Error) => {
      throw new Error(`${error.message}; the other worker said: ${other.stderr()}`)
    })
    // Committed while the frozen one still sat in its transaction: nothing of it held them up.
    expect(await inTransaction(), 'the frozen transaction is still open').to.have.length(1)
    // What the server does to a session idle in a transaction past 2/3 of the lease, and the lease running out.
    await cluster.sql(db, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'`, [db])
    await cluster.sql(db, 'UPDATE pipe_runs SET lease_until = now() WHERE run_id = $1', [frozenRun])
    await until('the frozen worker’s run was ended by the other', async () => other.stderr().includes(`pipe worker: ${frozenRun} succeeded`)).catch(
      (error: Error) => {
        throw new Error(`${error.message}; the other worker said: ${other.stderr()}`)
      },
    )
    frozen.child.kill('SIGCONT')
    await writeFile(path.join(pauseDir, 'go'), '')
    expect(await statusOf(frozenRun)).to.equal('succeeded')
    const audit = await pipe(['audit', 'verify', '--json', '--store', url], {cwd: dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
  })
})
