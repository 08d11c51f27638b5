/**
 * pipe worker --schedule on a real PostgreSQL store: two workers with the clock (PIPE_NOW) past a
 * slot queue exactly one run for it. The workers take runs from another queue than the schedule's,
 * so the run stays queued to be counted; the wait is for each worker's log line, never a sleep.
 */
import {expect} from 'chai'
import {copyFile, mkdir, readdir, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'
import {changeIn} from '../helpers/wait.js'
import {until, useWorkerSuite} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'

describe('pipe worker --schedule on a PostgreSQL store', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  const team = useWorkerSuite('pipe-pg-schedules-', (suite) => ({cluster, dir, db, url} = suite))

  it('two workers past a slot queue one run for it', async () => {
    await copyFile(path.join(repoRoot, 'test', 'fixtures', 'postgres', 'policy.yaml'), path.join(dir, 'policy.yaml'))
    await writeFile(
      path.join(dir, 'nightly.yaml'),
      `version: 1
name: nightly
schedules:
  - {cron: "0 2 * * *", timezone: Europe/Berlin, queue: nightly}
steps:
  - {id: first, kind: command, run: [sleep, "0"], next: done}
  - {id: done, kind: end, status: succeeded, reason: all steps ran}
`,
    )
    const env = {PIPE_NOW: '2026-11-28T01:00:20Z'}
    const slot = /nightly\.yaml 0 2026-11-28T01:00:00\.000Z: (queued R-\S+ on nightly|fired already by another process)/
    const workers = [0, 1].map(() => team.start(url, ['--queue', 'other', '--schedule', 'nightly.yaml'], {cwd: dir, env}))
    // A worker that looks after the other queued the slot finds it fired (its last firing) and says nothing,
    // so the wait is for the one run queued; the unique firing key is what refuses a second, whenever it looks.
    await until('a worker queued the slot', async () => workers.some((w) => slot.test(w.stderr())))
    await until('the slot recorded as fired once', async () => (await cluster.sql(db, 'SELECT 1 FROM pipe_schedule_firings')).length === 1)
    const firings = await cluster.sql<{schedule: string; slot: Date; run_id: string}>(db, 'SELECT schedule, slot, run_id FROM pipe_schedule_firings')
    expect(firings, workers.map((w) => w.stderr()).join('\n')).to.have.length(1)
    expect(firings[0]!.slot.toISOString()).to.equal('2026-11-28T01:00:00.000Z')
    const queued = await cluster.sql<{run_id: string; queue: string}>(db, 'SELECT run_id, queue FROM pipe_queue')
    expect(queued).to.deep.equal([{run_id: firings[0]!.run_id, queue: 'nightly'}])
    expect(workers.filter((w) => /queued R-/.test(w.stderr()))).to.have.length(1)
  })

  it("a schedule whose pipeline was deleted after the worker loaded it is said once, and the other pipeline's slot still fires", async () => {
    await copyFile(path.join(repoRoot, 'test', 'fixtures', 'postgres', 'policy.yaml'), path.join(dir, 'policy.yaml'))
    const pipeline = (name: string): string => `version: 1
name: ${name}
schedules:
  - {cron: "0 2 * * *", queue: nightly}
steps:
  - {id: done, kind: end, status: succeeded, reason: ran}
`
    await writeFile(path.join(dir, 'gone.yaml'), pipeline('gone'))
    await writeFile(path.join(dir, 'kept.yaml'), pipeline('kept'))
    const gate = path.join(dir, 'gate')
    await mkdir(gate)
    const worker = team.start(url, ['--queue', 'other', '--schedule', 'gone.yaml', '--schedule', 'kept.yaml'], {
      cwd: dir,
      env: {PIPE_NOW: '2026-11-28T02:00:20Z', PIPE_FAULT_PAUSE_AT: 'schedules-loaded', PIPE_FAULT_PAUSE_DIR: gate},
    })
    await changeIn(gate, async () => (await readdir(gate)).some((n) => n.startsWith('reached.')), 'the worker loading its schedules', worker.exited)
    await rm(path.join(dir, 'gone.yaml'))
    await writeFile(path.join(gate, 'go'), '')
    // Looked at in the order given: the deleted one first, so before the fix it stopped every look there.
    await until('the kept pipeline queued its slot', async () => /kept\.yaml 0 2026-11-28T02:00:00\.000Z: queued R-/.test(worker.stderr()))
    const refused = worker.stderr().match(/gone\.yaml 0 2026-11-28T02:00:00\.000Z: not fired: \[E_CONFIG\][^\n]*/g) ?? []
    expect(refused, worker.stderr()).to.have.length(1)
    expect(refused[0]).to.include('gone.yaml is not a valid pipeline')
    const firings = await cluster.sql<{schedule: string}>(db, 'SELECT schedule FROM pipe_schedule_firings')
    expect(firings.map((f) => f.schedule.replace(/^.*:/, ''))).to.deep.equal(['kept.yaml#0'])
  })
})
