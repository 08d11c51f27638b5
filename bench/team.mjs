// Bench section `team` (issue 36): 1, 2 and 3 `pipe worker` processes on one PostgreSQL, 60 detached
// default runs (pipelines/default.yaml on examples/full-prd.md, --decision go: 7 steps each), two ways:
// the queue filled first, then the workers started; and the workers started first, the runs enqueued
// meanwhile (3 `pipe run --detach` at a time). For each worker count, in the same cluster and just
// before pipe's trials, the machine's own ceiling: as many processes of a FOR UPDATE SKIP LOCKED job
// loop (bench/skip-locked.mjs) on a table of jobs.
//
// Every time is a commit time read from the database (track_commit_timestamp): steps/s is the number
// of snapshots over the first snapshot's commit to the last's; a run's latency ends at the commit of
// its `succeeded` timeline line and starts at the commit of its `created` line (enqueue while running)
// or at the workers' start (queue filled first: every run was enqueued before). Commits per step is
// the database's xact_commit over the trial (workers' start-up and, when enqueueing meanwhile, the
// detaches included; the bench's own polls subtracted), over the snapshots written. E_CONFLICT lines
// are counted in the workers' stderr.
import {spawn} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {loadavg, percentile, pipeProcesses, pool, startCluster, until, wait} from './cluster.mjs'

const RUNS = 60
const CONCURRENCY = 4
const ENQUEUERS = 3
const CEILING_JOBS = 2000

/** The SKIP LOCKED job loop with `workers` processes: jobs/s from the jobs' commit timestamps. */
async function ceiling(cluster, root, workers) {
  const db = await cluster.database()
  const client = await cluster.client(db.name)
  await client.query('CREATE TABLE bench_jobs (id bigserial PRIMARY KEY, payload text NOT NULL, done_at timestamptz)')
  await client.query('CREATE INDEX bench_jobs_todo ON bench_jobs (id) WHERE done_at IS NULL')
  await client.query(`INSERT INTO bench_jobs (payload) SELECT 'job ' || g FROM generate_series(1, ${CEILING_JOBS}) g`)
  await client.query('VACUUM ANALYZE bench_jobs')
  const script = path.join(root, 'bench', 'skip-locked.mjs')
  const pgPath = path.join(root, 'node_modules', 'pg', 'lib', 'index.js')
  await Promise.all(
    Array.from(
      {length: workers},
      () =>
        new Promise((resolve, reject) => {
          const child = spawn(process.execPath, [script, db.url, pgPath], {stdio: ['ignore', 'ignore', 'inherit']})
          child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`skip-locked.mjs exited ${code}`))))
        }),
    ),
  )
  const row = (
    await client.query(
      'SELECT count(*) AS n, extract(epoch FROM max(pg_xact_commit_timestamp(xmin)) - min(pg_xact_commit_timestamp(xmin))) AS s FROM bench_jobs WHERE done_at IS NOT NULL',
    )
  ).rows[0]
  await client.end()
  return Number(row.n) / Number(row.s)
}

/** Rows of one trial's database, read after its workers are gone. */
async function outcome(client, startedAt) {
  const snaps = (
    await client.query(
      'SELECT count(*) AS n, extract(epoch FROM max(pg_xact_commit_timestamp(xmin)) - min(pg_xact_commit_timestamp(xmin))) AS s FROM pipe_snapshots',
    )
  ).rows[0]
  const runs = (await client.query(`SELECT run_id, body::json->>'status' AS status FROM pipe_runs WHERE parent_run IS NULL`)).rows
  const events = (
    await client.query(
      `SELECT run_id, line::json->>'event' AS event, extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000 AS at FROM pipe_events WHERE line::json->>'event' IN ('created', 'succeeded')`,
    )
  ).rows
  const created = new Map(events.filter((e) => e.event === 'created').map((e) => [e.run_id, Number(e.at)]))
  const latencies = events.filter((e) => e.event === 'succeeded').map((e) => Number(e.at) - (startedAt ?? created.get(e.run_id)))
  return {steps: Number(snaps.n), seconds: Number(snaps.s), succeeded: runs.filter((r) => r.status === 'succeeded').length, runs: runs.length, latencies}
}

export async function teamScenario({bin, env, record, table, root, label = ''}) {
  const cluster = await startCluster({root, section: 'team'})
  if (!cluster) return
  const work = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-team36-'))
  const procs = pipeProcesses({bin, env, cwd: work})
  const runArgs = [path.join(root, 'pipelines/default.yaml'), '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go']
  const load = loadavg()
  console.error(`  team: PostgreSQL ${cluster.version}, fsync on; ${RUNS} default runs, workers × --concurrency ${CONCURRENCY}; load ${load}`)
  const rows = []
  try {
    // The filled queue is made once and copied for each worker count (CREATE DATABASE … TEMPLATE).
    const template = await cluster.database()
    const enqueueStarted = Date.now()
    await pool(RUNS, ENQUEUERS, () => procs.detach(template.url, runArgs))
    const enqueueSeconds = (Date.now() - enqueueStarted) / 1000
    console.error(`  filled a queue of ${RUNS} runs in ${enqueueSeconds.toFixed(1)} s (${ENQUEUERS} detaches at a time)`)
    await cluster.transactions(template.name)

    const trial = async (workers, mode) => {
      const db = await until('the template to be free', () => cluster.database(mode === 'filled' ? template.name : undefined).catch(() => undefined), {
        everyMs: 100,
        timeoutMs: 30000,
      })
      const before = await cluster.transactions(db.name)
      const startedAt = Date.now()
      const team = Array.from({length: workers}, () => procs.worker(db.url, ['--concurrency', String(CONCURRENCY)]))
      if (mode === 'enqueue') {
        // Enqueue once every worker is up (it has said which queue it serves).
        // A build whose worker says nothing when it starts is measured all the same, its start-up overlapping the enqueue.
        await until('the workers to start', () => team.every((w) => w.stderr().length > 0), {timeoutMs: 20000}).catch(() =>
          console.error('  (the workers said nothing at start: enqueueing anyway)'),
        )
        await pool(RUNS, ENQUEUERS, () => procs.detach(db.url, runArgs))
      }
      const poller = await cluster.client(db.name)
      let polls = 0
      await until(
        `${RUNS} runs to succeed (${workers} workers, ${mode})`,
        async () => {
          polls++
          const {n} = (
            await poller.query(
              `SELECT count(*) AS n FROM pipe_runs WHERE parent_run IS NULL AND body::json->>'status' IN ('succeeded', 'failed', 'cancelled', 'blocked')`,
            )
          ).rows[0]
          return Number(n) >= RUNS
        },
        {everyMs: 100, timeoutMs: 240000},
      )
      await poller.end()
      for (const w of team) w.child.kill('SIGTERM')
      await Promise.all(team.map((w) => w.exited))
      const after = await cluster.transactions(db.name)
      const reader = await cluster.client(db.name)
      const o = await outcome(reader, mode === 'filled' ? startedAt : undefined)
      await reader.end()
      const conflicts = team.reduce((n, w) => n + (w.stderr().match(/E_CONFLICT/g) ?? []).length, 0)
      const commits = after.commits - before.commits - polls
      return {...o, stepsPerSecond: o.steps / o.seconds, commitsPerStep: commits / o.steps, rollbacks: after.rollbacks - before.rollbacks, conflicts}
    }

    for (const workers of [1, 2, 3]) {
      const jobs = await ceiling(cluster, root, workers)
      console.error(`  ${workers} worker(s): SKIP LOCKED job loop ${jobs.toFixed(0)} jobs/s`)
      for (const mode of ['filled', 'enqueue']) {
        const t = await trial(workers, mode)
        const modeName = mode === 'filled' ? 'queue filled first' : 'enqueued while running'
        const from = mode === 'filled' ? 'workers started' : 'enqueue'
        const p50 = percentile(t.latencies, 50)
        const p95 = percentile(t.latencies, 95)
        const ratio = t.stepsPerSecond / jobs
        console.error(
          `  ${workers} worker(s), ${modeName}: ${t.stepsPerSecond.toFixed(1)} steps/s, ${from}→succeeded p50 ${p50.toFixed(0)} ms p95 ${p95.toFixed(0)} ms, ${t.commitsPerStep.toFixed(2)} commits/step, ${t.conflicts} E_CONFLICT, ${t.succeeded}/${t.runs} succeeded`,
        )
        rows.push([
          workers,
          modeName,
          t.stepsPerSecond.toFixed(1),
          `${p50.toFixed(0)} / ${p95.toFixed(0)} (from ${from})`,
          t.commitsPerStep.toFixed(2),
          t.rollbacks,
          t.conflicts,
          jobs.toFixed(0),
          `${ratio.toFixed(3)}×`,
          `${t.succeeded}/${t.runs}`,
        ])
        record({
          name: `${label}team: ${workers} worker(s) × concurrency ${CONCURRENCY}, ${RUNS} default runs, ${modeName}`,
          value: t.stepsPerSecond,
          unit: 'steps/s',
          target: 'E_CONFLICT 0; ≥ 0.5× the SKIP LOCKED loop; 3 workers ≥ 1',
          note: `${t.steps} steps in ${t.seconds.toFixed(2)} s; ${from}→succeeded p50 ${p50.toFixed(0)} ms, p95 ${p95.toFixed(0)} ms; ${t.commitsPerStep.toFixed(2)} commits/step; ${t.conflicts} E_CONFLICT lines; SKIP LOCKED ${jobs.toFixed(0)} jobs/s, ratio ${ratio.toFixed(3)}; ${t.succeeded}/${t.runs} succeeded`,
          trial: {workers, mode, ...t, ceiling_jobs_per_s: jobs, ratio, p50, p95},
        })
      }
    }
    table(
      `${label}team: ${RUNS} default runs (7 steps each), workers × --concurrency ${CONCURRENCY}, PostgreSQL ${cluster.version} fsync on; load ${load} at start, ${loadavg()} at end`,
      [
        'workers',
        'mode',
        'steps/s',
        'p50 / p95 ms to succeeded',
        'commits/step',
        'rollbacks',
        'E_CONFLICT lines',
        'SKIP LOCKED jobs/s',
        'pipe / SKIP LOCKED',
        'succeeded',
      ],
      rows,
    )
  } finally {
    procs.killAll()
    await wait(100)
    await cluster.stop()
    rmSync(work, {recursive: true, force: true})
  }
}
