/**
 * pipe run --detach and pipe worker on a real PostgreSQL store: runs spread over several worker
 * processes, each run driven to its end once; a worker killed (SIGKILL) loses its run to another
 * once its lease runs out; a worker frozen past its lease (SIGSTOP) cannot commit when it wakes;
 * SIGTERM drains a worker, which exits 0. Every wait is for an event (a row, a line), never a sleep.
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {mkdir, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot} from '../helpers/cli.js'
import {expectAuditPasses, statusIn} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'
import {saidBy, until, useWorkerSuite, type Worker} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'

const fixtures = path.join(repoRoot, 'test', 'fixtures', 'postgres')
const policy = path.join(fixtures, 'policy.yaml')

describe('pipe worker on a PostgreSQL store', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  const team = useWorkerSuite('pipe-pg-worker-', (suite) => ({cluster, dir, db, url} = suite))

  const untilFor = until

  function startWorker(args: string[], extra: Record<string, string> = {}): Worker {
    return team.start(url, args, {cwd: dir, env: extra})
  }

  /** Waits for a condition on the database (each check is a query; no fixed sleep decides anything). */

  const detach = async (pipeline: string): Promise<string> => {
    const result = await pipe(['run', path.join(fixtures, pipeline), '--policy', policy, '--detach', '--store', url, '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    const out = json<{run_id: string; status: string}>(result)
    expect(out.status).to.equal('queued')
    return out.run_id
  }

  /**
   * The environment of a worker that stops at its run's first step (a synchronous pause until the
   * folder `name` holds `go`), so that the test kills or freezes it inside the run however slow the
   * machine: the step's own length no longer decides whether the test came in time.
   */
  const pausedAtFirstStep = async (name: string): Promise<Record<string, string>> => {
    await mkdir(path.join(dir, name))
    return {PIPE_FAULT_PAUSE_AT: 'before-step:first', PIPE_FAULT_PAUSE_DIR: path.join(dir, name)}
  }

  /** A lease run out, now: what the clock would do once a dead or frozen holder stops renewing it, without waiting for the clock. */
  const expireLease = async (runId: string): Promise<void> => {
    await cluster.sql(db, 'UPDATE pipe_runs SET lease_until = now() WHERE run_id = $1', [runId])
  }
  const queueEmpty = async (): Promise<boolean> => (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_queue'))[0]!.n === 0
  /** What `pipe runs show RUN --json` says the status is, read here: the waits poll it, a process per check would be most of this file's CPU. */
  const statusOf = (runId: string): Promise<string> => statusIn(url, runId)
  /** The note a worker left on a queued run (what `pipe runs show` prints after "waits for"). */
  const noteOf = async (runId: string): Promise<string> =>
    (await cluster.sql<{note: string | null}>(db, 'SELECT note FROM pipe_queue WHERE run_id = $1', [runId]))[0]?.note ?? ''

  /** Each run has snapshots 1..N exactly once, and the whole store passes its audit. */
  async function expectWhole(runIds: string[], steps: number): Promise<void> {
    for (const runId of runIds) {
      const rows = await cluster.sql<{seq: number}>(db, 'SELECT seq FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq', [runId])
      expect(
        rows.map((r) => r.seq),
        runId,
      ).to.deep.equal(Array.from({length: steps}, (_, i) => i + 1))
    }
    // `pipe audit verify --store URL` exits 0 (its code, in this process: what it prints is audit.test.ts's).
    await expectAuditPasses(dir, undefined, url)
  }

  it('refuses --detach on a folder store before writing anything', async () => {
    const result = await pipe(['run', path.join(fixtures, 'fast.yaml'), '--policy', policy, '--detach', '--store', path.join(dir, 'files')], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stderr).to.match(/--detach needs a PostgreSQL store/)
    expect(await readdir(dir)).to.deep.equal([])
  })

  it('refuses a queue name no printed command could carry (empty, spaces, shell characters), queueing nothing', async () => {
    for (const queue of ['', 'a b', 'x;DROP']) {
      const detached = await pipe(['run', path.join(fixtures, 'fast.yaml'), '--policy', policy, '--detach', '--queue', queue, '--store', url, '--json'], {
        cwd: dir,
      })
      expect(detached.code, detached.stdout).to.equal(2)
      expect(json<{error: {code: string}}>(detached).error.code).to.equal('E_INVALID_ARGS')
      const worker = await pipe(['worker', '--queue', queue, '--store', url], {cwd: dir})
      expect(worker.code, worker.stderr).to.equal(2)
      expect(worker.stderr).to.match(/is not a queue name/)
    }
    expect(await cluster.sql(db, 'SELECT count(*)::int AS n FROM pipe_runs')).to.deep.equal([{n: 0}])
    expect(await cluster.sql(db, 'SELECT count(*)::int AS n FROM pipe_workers')).to.deep.equal([{n: 0}])
  })

  it('a run whose pipeline was deleted or changed after it was queued waits with the reason in runs show, and keeps neither the worker nor the queue busy', async () => {
    const own = path.join(dir, 'own.yaml')
    const original = await readFile(path.join(fixtures, 'fast.yaml'), 'utf8')
    const detachOwn = async (): Promise<string> => {
      const result = await pipe(['run', own, '--policy', policy, '--detach', '--store', url, '--json'], {cwd: dir})
      expect(result.code, result.stderr).to.equal(0)
      return json<{run_id: string}>(result).run_id
    }
    await writeFile(own, original)
    const deleted = await detachOwn()
    const changed = await detachOwn()
    await rm(own)
    // Queued after both: a worker that spun on the first would never reach it (one at a time).
    const fine = await detach('fast.yaml')
    const worker = startWorker(['--concurrency', '1', '--name', 'ci-9'])
    await untilFor('the run behind them has ended', async () => (await statusOf(fine)) === 'succeeded')
    await untilFor('the worker noted why the first waits', async () => /^a worker that can start it: ci-9 could not \(\[E_CONFIG\]/.test(await noteOf(deleted)))
    // The worker tries the run again meanwhile (and notes it again), so runs show is waited for as well.
    await untilFor('runs show says why the first waits', async () =>
      /waits for a worker that can start it: ci-9 could not \(\[E_CONFIG\]/.test((await pipe(['runs', 'show', deleted, '--store', url], {cwd: dir})).stdout),
    )
    expect(worker.stderr()).to.match(/tries it again in \d+ s/)
    // Its pipeline back as it was: the run that needs it goes on; one changed since stays waiting, saying so.
    await writeFile(own, `${original}# changed\n`)
    await untilFor('the worker noted the pipeline changed', async () =>
      /could not \(\[E_CONFLICT\] the pipeline .* changed since run/.test(await noteOf(changed)),
    )
    const shownChanged = await pipe(['runs', 'show', changed, '--json', '--store', url], {cwd: dir})
    expect(JSON.stringify(json(shownChanged)), 'runs show says the pipeline changed').to.match(/could not \(\[E_CONFLICT\] the pipeline .* changed since run/)
    await writeFile(own, original)
    await untilFor('both runs have ended', async () => (await statusOf(deleted)) === 'succeeded' && (await statusOf(changed)) === 'succeeded')
    expect(await queueEmpty()).to.equal(true)
  })

  it('pipe cancel of a foreach run a worker holds ends it and its children, and leaves the worker and its other runs going', async () => {
    await writeFile(
      path.join(dir, 'item.yaml'),
      'version: 1\nname: item\ninputs:\n  name: {type: string}\nsteps:\n  - {id: work, kind: command, run: [sleep, "3"], next: done}\n  - {id: done, kind: end, status: succeeded, reason: ok}\n',
    )
    await writeFile(
      path.join(dir, 'each.yaml'),
      `version: 1\nname: each\nsteps:\n  - id: each\n    kind: foreach\n    items: "\${{ ['a', 'b', 'c', 'd', 'e', 'f'] }}"\n    pipeline: ./item.yaml\n    with: {name: "\${{ item }}"}\n    concurrency: 2\n    on: {success: fin, partial: fin, fail: fin}\n  - {id: fin, kind: end, status: succeeded, reason: all}\n`,
    )
    const worker = startWorker(['--concurrency', '2'])
    await untilFor('the worker listens', async () => worker.stderr().includes('pipe worker: queue default'))
    const queued = await pipe(['run', path.join(dir, 'each.yaml'), '--policy', policy, '--detach', '--store', url, '--json'], {cwd: dir})
    expect(queued.code, queued.stderr).to.equal(0)
    const parent = json<{run_id: string}>(queued).run_id
    const other = await detach('slow.yaml')
    const running = async (): Promise<string[]> =>
      (await cluster.sql<{run_id: string}>(db, `SELECT run_id FROM pipe_runs WHERE body::json->>'status' = 'running'`)).map((r) => r.run_id)
    await untilFor('the parent, a child and the other run are running', async () => {
      const now = await running()
      return now.includes(other) && now.includes(parent) && now.length >= 3
    })
    const cancelled = await pipe(['cancel', parent, '--reason', 'superseded', '--store', url, '--json'], {cwd: dir, timeoutMs: 60000})
    expect(cancelled.code, cancelled.stderr).to.equal(0)
    expect(json<{status: string}>(cancelled).status).to.equal('cancelled')
    const kids = await cluster.sql<{status: string}>(db, `SELECT body::json->>'status' AS status FROM pipe_runs WHERE parent_run = $1`, [parent])
    expect(kids.length).to.be.greaterThan(0)
    for (const kid of kids) expect(kid.status).to.be.oneOf(['succeeded', 'cancelled'])
    // The worker was not drained: it finishes the other run and is still there.
    await untilFor('the other run has ended', async () => (await statusOf(other)) !== 'running' && (await statusOf(other)) !== 'pending')
    expect(await statusOf(other)).to.equal('succeeded')
    expect(worker.child.exitCode).to.equal(null)
  })

  it('an idle worker takes a run the moment it is queued (a notice from the database), not at its next poll', async () => {
    // An hour between polls: only the notice can bring the run to this worker within the test.
    const idle = startWorker([], {PIPE_WORKER_POLL_MS: '3600000'})
    await untilFor('the worker listens', async () => idle.stderr().includes('pipe worker: queue default'))
    const first = await detach('fast.yaml')
    await untilFor('the first run has stopped', queueEmpty)
    const second = await detach('fast.yaml')
    await untilFor('the second run has stopped', queueEmpty)
    expect(await statusOf(first)).to.equal('succeeded')
    expect(await statusOf(second)).to.equal('succeeded')
  })

  it('spreads queued runs over 3 workers × concurrency 2: each run ends once, one snapshot per seq, and SIGTERM drains each worker to exit 0', async () => {
    // Queued in one call (pipe run --detach --inputs-file, one run a line): what is tested here is how
    // workers share the queue, and one process queueing 12 runs spares 11 processes.
    await writeFile(path.join(dir, 'runs.jsonl'), '{}\n'.repeat(12))
    const queued = await pipe(
      ['run', path.join(fixtures, 'fast.yaml'), '--policy', policy, '--detach', '--inputs-file', 'runs.jsonl', '--store', url, '--json'],
      {
        cwd: dir,
      },
    )
    expect(queued.code, queued.stderr).to.equal(0)
    const runIds = json<Array<{run_id: string; status: string}>>(queued).map((r) => r.run_id)
    expect(runIds).to.have.length(12)
    const team = [startWorker(['--concurrency', '2']), startWorker(['--concurrency', '2']), startWorker(['--concurrency', '2'])]
    await untilFor('every queued run has stopped', queueEmpty)
    for (const w of team) w.child.kill('SIGTERM')
    expect(await Promise.all(team.map((w) => w.exited))).to.deep.equal([0, 0, 0])
    const ended = team.flatMap((w) => [...w.stderr().matchAll(/pipe worker: (R-\d{8}-\d{4}) succeeded/g)].map((m) => m[1]!))
    expect([...ended].sort(), 'each run ended once, by one worker').to.deep.equal([...runIds].sort())
    for (const runId of runIds) expect(await statusOf(runId)).to.equal('succeeded')
    await expectWhole(runIds, 3)
  })

  it('hands a run whose worker was killed (SIGKILL) to another worker once the lease runs out', async () => {
    const runId = await detach('slow.yaml')
    const first = startWorker([], await pausedAtFirstStep('gate-killed'))
    // Held and recorded running: killed between taking the lease and recording that it resumed, the
    // run would be pending still, and nobody would have to say it was interrupted.
    await untilFor('the first worker holds the run and has recorded it running', async () => {
      const [row] = await cluster.sql<{holder: string | null; body: string}>(db, 'SELECT holder, body FROM pipe_runs WHERE run_id = $1', [runId])
      return row!.holder?.includes(`"pid":${first.child.pid}`) === true && (JSON.parse(row!.body) as {status: string}).status === 'running'
    })
    first.child.kill('SIGKILL')
    await first.exited
    await expireLease(runId)
    const second = startWorker([])
    await untilFor('the run has stopped', queueEmpty)
    await saidBy(second, `pipe worker: ${runId} succeeded`)
    second.child.kill('SIGTERM')
    expect(await second.exited).to.equal(0)
    // The second worker found the run left running by a process that is gone, and said so.
    const events = await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [runId])
    expect(events.map((e) => (JSON.parse(e.line) as {event: string}).event)).to.include('interrupted')
    await expectWhole([runId], 3)
  })

  it('refuses the commit of a worker frozen past its lease (SIGSTOP): the run is finished by another, once', async () => {
    const runId = await detach('slow.yaml')
    const frozenGate = 'gate-frozen'
    const frozen = startWorker([], await pausedAtFirstStep(frozenGate))
    await untilFor('the first worker holds the run and has recorded it running', async () => {
      const [row] = await cluster.sql<{holder: string | null; body: string}>(db, 'SELECT holder, body FROM pipe_runs WHERE run_id = $1', [runId])
      return row!.holder?.includes(`"pid":${frozen.child.pid}`) === true && (JSON.parse(row!.body) as {status: string}).status === 'running'
    })
    frozen.child.kill('SIGSTOP')
    await expireLease(runId)
    const other = startWorker([])
    await untilFor('the run has stopped', queueEmpty).catch((error: Error) => {
      throw new Error(`${error.message}; the other worker's stderr: ${other.stderr()}`)
    })
    await saidBy(other, `pipe worker: ${runId} succeeded`)
    frozen.child.kill('SIGCONT')
    await writeFile(path.join(dir, frozenGate, 'go'), '')
    // Refused either way: its transaction's fencing check, or the server ending a transaction left idle past idle_in_transaction_session_timeout (below the lease).
    await untilFor('the woken worker was refused', async () =>
      /was taken over by another holder|terminating connection due to idle-in-transaction timeout/.test(frozen.stderr()),
    ).catch((error: Error) => {
      throw new Error(`${error.message}; its stderr: ${frozen.stderr()}`)
    })
    expect(frozen.stderr()).to.not.include(`${runId} succeeded`)
    for (const w of [frozen, other]) w.child.kill('SIGTERM')
    expect(await Promise.all([frozen.exited, other.exited])).to.deep.equal([0, 0])
    expect(await statusOf(runId)).to.equal('succeeded')
    await expectWhole([runId], 3)
  })

  it('a worker that wakes after its run was taken over leaves the new holder its claim and its place on the queue', async () => {
    const runId = await detach('fast.yaml')
    // Held just after its claim (PIPE_FAULT_PAUSE_AT=claimed), before it has read the run: frozen, no lease renewed.
    const gate = path.join(dir, 'gate')
    await mkdir(gate)
    const woken = startWorker([], {PIPE_FAULT_PAUSE_AT: 'claimed', PIPE_FAULT_PAUSE_DIR: gate})
    await changeIn(gate, () => existsSync(path.join(gate, `reached.${woken.child.pid}`)), 'the first worker to claim the run', woken.exited)
    await expireLease(runId)
    const other = startWorker([])
    await untilFor('the other worker has finished the run', queueEmpty)
    other.child.kill('SIGTERM')
    expect(await other.exited).to.equal(0)
    expect(await statusOf(runId)).to.equal('succeeded')
    // Someone else's claim of the run now (as a person's answer would put a run back and a third worker take it).
    const [claim] = await cluster.sql<{epoch: string}>(
      db,
      `UPDATE pipe_runs SET holder = '{"pid":1,"host":"elsewhere","token":"t"}', epoch = epoch + 1, lease_until = now() + interval '1 hour'
       WHERE run_id = $1 RETURNING epoch`,
      [runId],
    )
    await cluster.sql(db, "INSERT INTO pipe_queue (run_id, queue) VALUES ($1, 'default')", [runId])
    await writeFile(path.join(gate, 'go'), '')
    // Its next move finds the run ended (E_STATE): it must leave the queue row and the claim alone.
    await untilFor('the woken worker was refused', async () => new RegExp(`pipe worker: ${runId}: \\[E_STATE\\]`).test(woken.stderr())).catch(
      (error: Error) => {
        throw new Error(`${error.message}; its stderr: ${woken.stderr()}`)
      },
    )
    woken.child.kill('SIGTERM')
    expect(await woken.exited).to.equal(0)
    const [row] = await cluster.sql<{holder: string; epoch: string}>(db, 'SELECT holder, epoch FROM pipe_runs WHERE run_id = $1', [runId])
    expect(row!.epoch, 'the other claim is untouched').to.equal(claim!.epoch)
    expect(row!.holder).to.include('elsewhere')
    expect(await queueEmpty(), 'the run is still on the queue').to.equal(false)
  })
})
