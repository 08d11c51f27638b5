/**
 * pipe worker --schedule on a real PostgreSQL store: two workers with the clock (PIPE_NOW) past a
 * slot queue exactly one run for it. The workers take runs from another queue than the schedule's,
 * so the run stays queued to be counted; the wait is for each worker's log line, never a sleep.
 */
import {expect} from 'chai'
import {copyFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {repoRoot} from '../helpers/cli.js'
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
})
