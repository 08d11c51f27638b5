/**
 * Faults of the database under a worker, on a real PostgreSQL cluster of this file's own (it is
 * restarted): the server restarted (`pg_ctl restart -m immediate`) or the worker's connection
 * killed (`pg_terminate_backend`) while a step's commit is open. Nothing partial may be recorded
 * (the step's snapshot, its timeline line and the run's head go together or not at all) and the run
 * goes on once the database is back. The worker is held inside the commit by a fault point
 * (PIPE_FAULT_PAUSE_AT, see src/util/faults.ts) and let go once the fault is made: no sleep decides
 * anything. Also: two workers publishing one ledger key deliver it once.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp, mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {deliveredKeys} from '../../src/steps/registry.js'
import {effectiveStatus} from '../../src/store/queries.js'
import {defaultPipeline, examples, json, pipe, repoRoot} from '../helpers/cli.js'
import {expectAuditPasses, readIn} from '../helpers/stores.js'
import {until, useWorkerSuite, type Worker} from '../helpers/workers.js'
import {postgresBin, type Cluster} from '../helpers/postgres.js'
import {ModelServer} from '../helpers/model-server.js'
import {WebhookServer} from '../helpers/webhook-server.js'

const fixtures = path.join(repoRoot, 'test', 'fixtures', 'postgres')
const policy = path.join(fixtures, 'policy.yaml')

describe('faults of the database under a pipe worker', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  const team = useWorkerSuite('pipe-pg-faults-', (suite) => ({cluster, dir, db, url} = suite), {durable: true})

  function startWorker(extra: Record<string, string> = {}): Worker {
    return team.start(url, [], {cwd: dir, env: extra})
  }

  const detach = async (pipeline: string): Promise<string> => {
    const result = await pipe(['run', path.join(fixtures, pipeline), '--policy', policy, '--detach', '--store', url, '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    return json<{run_id: string}>(result).run_id
  }

  /**
   * Every lease of a database run out, now: what the clock does once a killed or frozen holder stops
   * renewing, done by the test so that nothing waits for a duration.
   */
  const expireLeases = async (database: string): Promise<void> => {
    await cluster.sql(database, 'UPDATE pipe_runs SET lease_until = now() WHERE holder IS NOT NULL')
  }

  /** What the store holds of a run: its snapshots' seqs, its timeline's events, and its sealed head. */
  async function recorded(runId: string): Promise<{seqs: number[]; events: string[]; head: {seq: number; events: number}}> {
    const seqs = (await cluster.sql<{seq: number}>(db, 'SELECT seq FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq', [runId])).map((r) => r.seq)
    const events = (await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [runId])).map(
      (r) => (JSON.parse(r.line) as {event: string}).event,
    )
    const body = (await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_runs WHERE run_id = $1', [runId]))[0]!.body
    const {head} = JSON.parse(body) as {head: {seq: number; events: number}}
    return {seqs, events, head: {seq: head.seq, events: head.events}}
  }

  /** Holds a worker inside the commit of step `second` (after its snapshot row is written), until `go()`. */
  async function pausedInCommit(): Promise<{worker: Worker; go: () => Promise<void>; pauseDir: string}> {
    const pauseDir = path.join(dir, 'pause')
    await mkdir(pauseDir)
    // The default lease: the server must not end the paused transaction itself (2/3 of the lease) before the test does.
    const worker = startWorker({PIPE_FAULT_PAUSE_AT: 'before-commit:second', PIPE_FAULT_PAUSE_DIR: pauseDir})
    await until('the worker is inside the commit of step second', async () => (await readdir(pauseDir)).some((f) => f.startsWith('reached.')))
    return {worker, pauseDir, go: () => writeFile(path.join(pauseDir, 'go'), '')}
  }

  async function expectWhole(runId: string): Promise<void> {
    const after = await recorded(runId)
    expect(after.seqs).to.deep.equal([1, 2, 3])
    expect(after.head.seq).to.equal(3)
    expect(after.head.events).to.equal(after.events.length)
    // `pipe audit verify --store URL` exits 0 (its code, in this process: what it prints is audit.test.ts's).
    await expectAuditPasses(dir, undefined, url)
  }

  it('a connection killed mid-commit (pg_terminate_backend) records nothing of the step, and the run goes on to its end', async () => {
    const runId = await detach('fast.yaml')
    const {worker, go} = await pausedInCommit()
    const before = await recorded(runId)
    expect(before.seqs, 'step second is not committed yet').to.deep.equal([1])
    // The worker's connection is the one left open in its transaction.
    const killed = await cluster.sql<{ok: boolean}>(
      db,
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'`,
      [db],
    )
    expect(killed.map((k) => k.ok)).to.deep.equal([true])
    // The worker is still frozen in its commit: what the store holds now is what the fault left.
    const lost = await recorded(runId)
    expect(lost.seqs, 'the killed commit left no snapshot').to.deep.equal([1])
    expect(lost.head, 'nor moved the head').to.deep.equal(before.head)
    expect(lost.events, 'nor wrote a timeline line').to.deep.equal(before.events)
    await go()
    // The worker says so once it has recorded the end: waited for, not raced (the store shows the end first).
    await until(
      'the worker says the run has succeeded',
      async () => worker.stderr().includes(`pipe worker: ${runId} succeeded`) && (await recorded(runId)).events.includes('succeeded'),
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}; the timeline: ${(await recorded(runId)).events.join(' ')}; the worker said: ${worker.stderr()}`)
    })
    expect(worker.stderr()).to.include(`pipe worker: ${runId} succeeded`)
    // The worker said why the session stopped, and took the run again once the database answered.
    expect(worker.stderr()).to.include(`pipe worker: ${runId}: [E_IO] cannot record step second of ${runId}: `)
    await expectWhole(runId)
  })

  it('the database restarted mid-commit (pg_ctl restart -m immediate) records nothing of the step, and the run goes on after reconnection', async () => {
    const runId = await detach('fast.yaml')
    const {worker, go} = await pausedInCommit()
    const before = await recorded(runId)
    cluster.ctl('-m', 'immediate', 'restart')
    const lost = await recorded(runId)
    expect(lost.seqs).to.deep.equal(before.seqs)
    expect(lost.head).to.deep.equal(before.head)
    expect(lost.events).to.deep.equal(before.events)
    await go()
    // The worker says so once it has recorded the end: waited for, not raced (the store shows the end first).
    await until(
      'the worker says the run has succeeded',
      async () => worker.stderr().includes(`pipe worker: ${runId} succeeded`) && (await recorded(runId)).events.includes('succeeded'),
    ).catch(async (error: Error) => {
      throw new Error(`${error.message}; the timeline: ${(await recorded(runId)).events.join(' ')}; the worker said: ${worker.stderr()}`)
    })
    expect(worker.stderr()).to.include(`pipe worker: ${runId} succeeded`)
    // The worker said why the session stopped, and took the run again once the database answered.
    expect(worker.stderr()).to.include(`pipe worker: ${runId}: [E_IO] cannot record step second of ${runId}: `)
    await expectWhole(runId)
  })

  it('pipe run whose commit loses its connection fails with a clear E_IO error, recording nothing of the step, and pipe resume continues it', async () => {
    const pauseDir = path.join(dir, 'pause')
    await mkdir(pauseDir)
    const running = pipe(['run', path.join(fixtures, 'fast.yaml'), '--policy', policy, '--store', url, '--json'], {
      cwd: dir,
      env: {PIPE_FAULT_PAUSE_AT: 'before-commit:second', PIPE_FAULT_PAUSE_DIR: pauseDir},
    })
    await until('pipe run is inside the commit of step second', async () => (await readdir(pauseDir)).some((f) => f.startsWith('reached.')))
    const runId = (await cluster.sql<{run_id: string}>(db, 'SELECT run_id FROM pipe_runs'))[0]!.run_id
    const before = await recorded(runId)
    await cluster.sql(db, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND state = 'idle in transaction'`, [db])
    await writeFile(path.join(pauseDir, 'go'), '')
    const result = await running
    expect(result.code, result.stderr).to.not.equal(0)
    expect(result.stderr).to.include(`Error [E_IO]: cannot record step second of ${runId}: terminating connection due to administrator command`)
    expect(result.stderr).to.include('nothing partial was recorded')
    expect(result.stderr).to.include('pipe resume RUN goes on from the last step')
    const after = await recorded(runId)
    expect(after.seqs).to.deep.equal(before.seqs)
    expect(after.head).to.deep.equal(before.head)
    const resumed = await pipe(['resume', runId, '--store', url, '--json'], {cwd: dir})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<{status: string}>(resumed).status).to.equal('succeeded')
    await expectWhole(runId)
  })

  it('two workers publishing one ledger key deliver it once: the first killed after delivering, before its step committed', async () => {
    const server = await WebhookServer.start()
    try {
      // The default pipeline (its prompts beside it) publishing to one webhook on the local server.
      const pipelines = path.join(dir, 'pipelines')
      await cp(path.join(repoRoot, 'pipelines'), pipelines, {recursive: true})
      const text = (await readFile(defaultPipeline, 'utf8')).replace(
        '      - {name: local, type: file, dir: published}\n',
        '      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK}\n',
      )
      expect(text).to.include('url_env: JSON_HOOK')
      await writeFile(path.join(pipelines, 'hooks.yaml'), text)
      const file = path.join(pipelines, 'hooks.yaml')
      const detached = await pipe(['run', file, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--detach', '--store', url, '--json'], {
        cwd: dir,
      })
      expect(detached.code, detached.stderr).to.equal(0)
      const runId = json<{run_id: string}>(detached).run_id
      const hook = {JSON_HOOK: `${server.url}/json`}
      // The first worker delivers, records the delivery in the ledger, and dies inside the step's commit.
      const first = startWorker({...hook, PIPE_FAULT_KILL_AT: 'before-snapshot:publish'})
      expect(await first.exited).to.equal(null)
      expect(server.deliveries('/json')).to.have.length(1)
      await expireLeases(db)
      const second = startWorker(hook)
      // The worker says so once it has recorded the end: waited for, not raced (the store shows the end first).
      await until(
        'the worker says the run has succeeded',
        async () => second.stderr().includes(`pipe worker: ${runId} succeeded`) && (await recorded(runId)).events.includes('succeeded'),
      ).catch(async (error: Error) => {
        throw new Error(`${error.message}; the timeline: ${(await recorded(runId)).events.join(' ')}; the worker said: ${second.stderr()}`)
      })
      expect(second.stderr()).to.include(`pipe worker: ${runId} succeeded`)
      // The second worker ran the publish step again and found the key delivered: nothing was sent.
      expect(server.arrived, 'requests that reached the target').to.have.length(1)
      const publish = json<Array<{outputs: {publish_result?: Array<{status: string}>}}>>(
        await pipe(['snapshot', 'show', runId, '--step', 'publish', '--json', '--store', url], {cwd: dir}),
      )
      expect(publish.map((s) => s.outputs.publish_result?.map((r) => r.status))).to.deep.equal([['already_published']])
      const ledger = json<{entries: Array<{status: string; attempts: unknown[]}>}>(await pipe(['ledger', 'list', '--json', '--store', url], {cwd: dir}))
      expect(ledger.entries.map((e) => [e.status, e.attempts.length])).to.deep.equal([['delivered', 1]])
    } finally {
      await server.close()
    }
  })

  it('a worker killed (SIGKILL) at points spread across a run of the default pipeline leaves a whole trail; another worker ends the run as one that was never killed', async () => {
    /** The default pipeline, detached in a folder of its own (its publication goes there), in a database of its own. */
    const queued = async (name: string): Promise<{cwd: string; store: string; db: string; runId: string}> => {
      const cwd = path.join(dir, name)
      await mkdir(cwd)
      const own = await cluster.createDatabase()
      const store = cluster.url(own)
      const result = await pipe(
        ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--detach', '--store', store, '--json'],
        {
          cwd,
        },
      )
      expect(result.code, result.stderr).to.equal(0)
      return {cwd, store, db: own, runId: json<{run_id: string}>(result).run_id}
    }
    const worker = (at: {cwd: string; store: string}, extra: Record<string, string>): Worker => team.start(at.store, [], {cwd: at.cwd, env: extra})
    // The checks read the store in this process, through the store code `runs show`, `snapshot list`,
    // `audit verify` and `ledger list` print from (the first kill's audit stays a `pipe audit verify`
    // process): the kills, the workers and the queueing stay real processes.
    const ended = async (at: {store: string; runId: string}): Promise<{status: string; steps: string[]}> =>
      readIn(at.store, async (store) => ({
        status: await effectiveStatus(store, await store.readRun(at.runId)),
        steps: (await store.readSnapshots(at.runId)).map((s) => s.step.name),
      }))
    const problems = async (at: {cwd: string; store: string}, asProcess: boolean): Promise<unknown[]> =>
      asProcess
        ? json<{problems: unknown[]}>(await pipe(['audit', 'verify', '--json', '--store', at.store], {cwd: at.cwd})).problems
        : readIn(at.store, async (store) => (await store.audit(undefined, {deliveredKeys})).problems)
    // The baseline: every fault point one worker passes on its way through the run.
    const base = await queued('baseline')
    const trace = path.join(dir, 'trace.txt')
    const tracer = worker(base, {PIPE_FAULT_TRACE: trace})
    await until('the baseline run has ended', async () => tracer.stderr().includes(`${base.runId} succeeded`))
    const baseline = await ended(base)
    expect(baseline.status).to.equal('succeeded')
    const points = (await readFile(trace, 'utf8'))
      .split('\n')
      .filter((p) => /^(evidence-written|spec-written|before-snapshot|before-commit|committed):/.test(p))
    expect(points.length).to.be.greaterThan(10)
    const chosen = Array.from({length: 6}, (_, i) => points[Math.floor((i * (points.length - 1)) / 5)]!)
    for (const [i, point] of chosen.entries()) {
      const at = await queued(`killed-${i}`)
      const killed = worker(at, {PIPE_FAULT_KILL_AT: point})
      expect(await killed.exited, `the worker was killed at ${point}: ${killed.stderr()}`).to.equal(null)
      expect(await problems(at, i === 0), `right after the kill at ${point}`).to.deep.equal([])
      await expireLeases(at.db)
      const next = worker(at, {})
      await until(`the run killed at ${point} has ended`, async () => next.stderr().includes(`${at.runId} succeeded`))
      expect(await ended(at), `killed at ${point}`).to.deep.equal(baseline)
      expect(await problems(at, i === 0), `after the run killed at ${point} ended`).to.deep.equal([])
      const ledger = await readIn(at.store, async (store) => store.ledger().list({}))
      expect(
        ledger.map((e) => e.status),
        `killed at ${point}`,
      ).to.deep.equal(['delivered'])
    }
  })

  it('a pg_dump of the store restored into an empty database passes pipe audit verify and lists the same runs', async () => {
    const result = await pipe(['run', path.join(fixtures, 'fast.yaml'), '--policy', policy, '--store', url, '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    const dump = path.join(dir, 'store.dump')
    execFileSync(path.join(postgresBin(), 'pg_dump'), ['--format=custom', `--file=${dump}`, url])
    await cluster.sql('postgres', `CREATE DATABASE ${db}_restored`)
    execFileSync(path.join(postgresBin(), 'pg_restore'), ['--dbname', cluster.url(`${db}_restored`), dump])
    const restored = cluster.url(`${db}_restored`)
    const audit = await pipe(['audit', 'verify', '--json', '--store', restored], {cwd: dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
    expect(audit.code).to.equal(0)
    const list = async (store: string): Promise<unknown> => json(await pipe(['runs', 'list', '--json', '--store', store], {cwd: dir}))
    expect(await list(restored)).to.deep.equal(await list(url))
    // The append-only triggers came back with the rows.
    const refused = await cluster.sql(`${db}_restored`, 'DELETE FROM pipe_snapshots').catch((error: Error) => error.message)
    expect(refused).to.match(/append-only/)
  })

  it("a worker frozen past its lease (SIGSTOP) cannot write an agent's conversation state when it wakes", async () => {
    let release: () => void = () => undefined
    const released = new Promise<void>((resolve) => (release = resolve))
    // The frozen worker's model call is answered only once it is frozen; the next worker's, at once.
    const server = await ModelServer.start(() => ({content: 'from the worker that took over'}))
    try {
      server.script('talk', {content: 'from the frozen worker', until: released})
      execFileSync('git', ['init', '-q'], {cwd: dir})
      await writeFile(path.join(dir, 'talk.md'), 'Say something.\n')
      await writeFile(path.join(dir, 'agent.yaml'), 'version: 1\nname: agent\nsteps:\n  - {id: talk, kind: agent, prompt: talk.md, tools: [read_file]}\n')
      const model = {OPENAI_BASE_URL: server.url}
      const detached = await pipe(['run', path.join(dir, 'agent.yaml'), '--policy', policy, '--detach', '--store', url, '--json'], {cwd: dir, env: model})
      expect(detached.code, detached.stderr).to.equal(0)
      const runId = json<{run_id: string}>(detached).run_id
      const frozen = startWorker(model)
      await server.waitForRequests(1)
      frozen.child.kill('SIGSTOP')
      release()
      await expireLeases(db)
      const other = startWorker(model)
      await until('the run has succeeded', async () => (await recorded(runId)).events.includes('succeeded')).catch(async (error: Error) => {
        throw new Error(`${error.message}; the timeline: ${(await recorded(runId)).events.join(' ')}; the worker said: ${other.stderr()}`)
      })
      const state = async (): Promise<string[]> =>
        (await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_step_state WHERE run_id = $1 ORDER BY seq', [runId])).map((r) => r.body)
      const kept = await state()
      expect(kept.join('')).to.include('from the worker that took over')
      frozen.child.kill('SIGCONT')
      await until('the woken worker was refused', async () => frozen.stderr().includes(`pipe worker: ${runId}: [E_CONFLICT]`)).catch((error: Error) => {
        throw new Error(`${error.message}; its stderr: ${frozen.stderr()}`)
      })
      expect(frozen.stderr()).to.include('was taken over by another holder')
      expect(await state(), 'the conversation state the run finished with').to.deep.equal(kept)
      expect(kept.join('')).to.not.include('from the frozen worker')
    } finally {
      await server.close()
    }
  })
})
