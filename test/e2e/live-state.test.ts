/**
 * What runs now, as pipe runs show and pipe runs list tell it, on a run held in the middle of a step:
 * the step's start is recorded before it acts, so the step (by touching a file) proves the record is
 * there when it starts. The step then waits on a FIFO the test opens when it is done looking: no
 * sleep decides anything. On a PostgreSQL store, a worker killed (SIGKILL) mid-step is shown as a
 * holder whose lease expired (the lease is run out by the database's clock, set to now), never as
 * one holding the run.
 *
 * The held run and the worker are `pipe` processes, as are runs list and runs show of a run in a
 * step and runs show of a run whose worker was killed; the --json reads, the reads after the run
 * ended and the detached run's enqueueing run in this process (test/helpers/pipe-here.ts: the same
 * command from argv and the same store code, reading what the other processes wrote).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {openGate, prepareHeldStep as prepare} from '../helpers/held-step.js'
import {changeIn} from '../helpers/wait.js'
import {useWorkerSuite} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'

const ISO = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z'

interface Shown {
  status: string
  run: {updated_at: string; created_at: string; current_step?: {step: string; seq: number; since: string; worker: {pid: number; host: string; name?: string}}}
  events: Array<{event: string; step?: string; seq?: number; at: string}>
  holding?: {worker: unknown; expired?: {worker: {name?: string; pid: number}; lease_until: string}}
}

describe('live state: the running step, as runs show and runs list tell it', function () {
  this.timeout(120000)

  describe('on a folder store', () => {
    let dir: string
    let cleanup: () => Promise<void>
    /** The run the test holds: let go and waited for before its folder goes. */
    let running: Promise<CliResult> | undefined
    beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-live-')))
    afterEach(async () => {
      openGate(dir)
      await running
      await cleanup()
    })

    it('shows the step a run is in, since when and in which process, and UPDATED moves with each step', async () => {
      const {pipeline, policy} = await prepare(dir)
      running = pipe(['run', pipeline, '--policy', policy, '--json'], {cwd: dir})
      await changeIn(dir, () => existsSync(path.join(dir, 'started')), 'the waiting step started', running)

      const list = await pipe(['runs', 'list'], {cwd: dir})
      expect(list.code, list.stderr).to.equal(0)
      expect(list.stdout.split('\n')[0]).to.match(/\bUPDATED\s+STEP\b/)
      expect(list.stdout).to.match(/running .* wait \(#2\)/)
      const listed = json<{runs: Array<{run_id: string; current_step?: {step: string; seq: number}}>}>(await pipeHere(['runs', 'list', '--json'], {cwd: dir}))
      const runId = listed.runs[0]!.run_id
      expect(listed.runs[0]!.current_step).to.include({step: 'wait', seq: 2})

      const shown = await pipe(['runs', 'show', runId], {cwd: dir})
      expect(shown.code, shown.stderr).to.equal(0)
      expect(shown.stdout).to.match(new RegExp(`^  running step wait \\(#2\\) since ${ISO} on \\(host \\S+, pid \\d+\\)$`, 'm'))
      expect(shown.stdout, 'a folder store has no queue to wait in').to.not.match(/waits for/)
      const mid = json<Shown>(await pipeHere(['runs', 'show', runId, '--json'], {cwd: dir}))
      expect(mid.status).to.equal('running')
      const now = mid.run.current_step!
      expect(now).to.include({step: 'wait', seq: 2})
      // UPDATED is the step's start: it moved past the run's creation with each step.
      expect(mid.run.updated_at).to.equal(now.since)
      const starts = mid.events.filter((e) => e.event === 'step_started')
      expect(starts.map((e) => [e.step, e.seq])).to.deep.equal([
        ['quick', 1],
        ['wait', 2],
      ])
      expect(starts[1]!.at).to.equal(now.since)
      expect(starts[0]!.at <= starts[1]!.at).to.equal(true)

      expect(openGate(dir), 'the step waits on the gate').to.equal(true)
      const ended: CliResult = await running
      expect(ended.code, ended.stderr).to.equal(0)
      const after = json<Shown>(await pipeHere(['runs', 'show', runId, '--json'], {cwd: dir}))
      expect(after.status).to.equal('succeeded')
      expect(after.run.current_step, 'an ended run is in no step').to.equal(undefined)
      expect(after.run.updated_at >= now.since).to.equal(true)
      const text = (await pipeHere(['runs', 'show', runId], {cwd: dir})).stdout
      expect(text).to.not.match(/running step/)
      expect(text, 'the timeline shows each step once, by its snapshot').to.not.match(/step_started/)
      const endedList = await pipeHere(['runs', 'list'], {cwd: dir})
      expect(endedList.stdout.split('\n')[0], 'no STEP column when no run is in a step').to.not.match(/STEP/)
    })
  })

  describe('on a PostgreSQL store, with workers', () => {
    let cluster: Cluster
    let dir: string
    let db: string
    let url: string
    const team = useWorkerSuite('pipe-pg-live-', (suite) => ({cluster, dir, db, url} = suite))
    afterEach(() => void openGate(dir))

    it('names the worker in the step, never also as waited for; a worker killed mid-step shows as a lease that expired, not as holding the run', async () => {
      const {pipeline, policy} = await prepare(dir)
      const detached = await pipeHere(['run', pipeline, '--policy', policy, '--detach', '--store', url, '--json'], {cwd: dir})
      expect(detached.code, detached.stderr).to.equal(0)
      const runId = json<{run_id: string}>(detached).run_id
      const worker = team.start(url, ['--name', 'w3'], {cwd: dir, env: {}})
      await changeIn(dir, () => existsSync(path.join(dir, 'started')), 'the waiting step started', worker.exited)

      const shown = await pipe(['runs', 'show', runId, '--store', url], {cwd: dir})
      expect(shown.code, shown.stderr).to.equal(0)
      expect(shown.stdout).to.match(new RegExp(`^  running step wait \\(#2\\) since ${ISO} on worker w3 \\(host \\S+, pid ${worker.child.pid}\\)$`, 'm'))
      expect(shown.stdout).to.match(new RegExp(`^worker: w3 \\(host \\S+, pid ${worker.child.pid}\\), lease until ${ISO}`, 'm'))
      expect(shown.stdout, 'a run a worker holds waits for none').to.not.match(/waits for/)
      const list = await pipeHere(['runs', 'list', '--store', url], {cwd: dir})
      expect(list.stdout.split('\n')[0]).to.match(/\bSTEP\s+WORKER\b/)
      expect(list.stdout).to.match(/running .* wait \(#2\)\s+w3/)

      worker.child.kill('SIGKILL')
      await worker.exited
      // The lease runs out by the database's clock, set to now: what time would do, without waiting for it.
      await cluster.sql(db, 'UPDATE pipe_runs SET lease_until = now() WHERE run_id = $1', [runId])
      const dead = await pipe(['runs', 'show', runId, '--store', url], {cwd: dir})
      expect(dead.code, dead.stderr).to.equal(0)
      expect(dead.stdout).to.match(
        new RegExp(`^worker: none; w3 \\(host \\S+, pid ${worker.child.pid}\\) held it until its lease expired at ${ISO}, a worker will take it over`, 'm'),
      )
      expect(dead.stdout, 'no lease is shown as held').to.not.match(/lease until/)
      expect(dead.stdout).to.match(/^ {2}was running step wait \(#2\)/m)
      expect(dead.stdout).to.match(/^queue: \S+, waits for a worker/m)
      const asJson = json<Shown>(await pipeHere(['runs', 'show', runId, '--json', '--store', url], {cwd: dir}))
      expect(asJson.holding!.worker).to.equal(null)
      expect(asJson.holding!.expired!.worker).to.include({name: 'w3', pid: worker.child.pid})
    })
  })
})
