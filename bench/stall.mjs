// Bench section `stall` (issue 36): a worker stopped (SIGSTOP) inside a step's transaction for 3× the
// lease. Three workers on one PostgreSQL, PIPE_LEASE_MS=3000:
// - C, on queue `default`, drives filler runs the whole time: each a chain of `compile` steps, every
//   one of which allocates spec and evidence ids in its commit, as the default pipeline's do;
// - A, on queue `stall`, takes run T (ingest, then compile steps) and is held inside the commit of
//   T's second compile step, its transaction open, by the fault point
//   PIPE_FAULT_PAUSE_AT=before-commit:c1 (docs/development.md); the moment it is there, it is
//   SIGSTOPped, for 3× the lease, then SIGCONTed;
// - B, on queue `stall`, started once A is stopped, takes T over when A's lease runs out.
// Measured from the database's commit timestamps (track_commit_timestamp): the time from A's stop to
// the commit of T's `succeeded` line, and the longest gap between the snapshot commits of the other
// workers (B and C) while A is stopped, its ends included; C's commits per second before the stop
// are the reference. Each of the TRIALS is a database of its own, with workers of its own.
import {copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {loadavg, pipeProcesses, pool, startCluster, until, wait} from './cluster.mjs'

const LEASE_MS = 3000
const FILLERS = 4
const FILLER_STEPS = 100
// The stall did not show in every trial the issue made (3 of 7): each trial is a database of its own.
const TRIALS = 3
const PAUSE_AT = 'before-commit:c1'

const compileChain = (name, n) =>
  `version: 1\nname: ${name}\nsteps:\n  - {id: ingest, kind: ingest, next: c0}\n${Array.from({length: n}, (_, i) => `  - {id: c${i}, kind: compile, prompt: prompts/compile.md${i + 1 < n ? `, next: c${i + 1}` : ''}}`).join('\n')}\n`

/** One trial in a database of its own: the figures of one stop. */
async function trial({cluster, procs, work, root, index}) {
  const pauseDir = path.join(work, `pause-${index}`)
  mkdirSync(pauseDir)
  const input = ['--input', path.join(root, 'examples/full-prd.md')]
  const db = await cluster.database()
  const client = await cluster.client(db.name)
  const workers = []
  try {
    const target = await procs.detach(db.url, [path.join(work, 'target.yaml'), ...input, '--queue', 'stall'])
    await pool(FILLERS, 2, () => procs.detach(db.url, [path.join(work, 'filler.yaml'), ...input]))
    const snapshots = async () => Number((await client.query('SELECT count(*) AS n FROM pipe_snapshots')).rows[0].n)

    const c = procs.worker(db.url, ['--concurrency', '2', '--name', 'C'])
    workers.push(c)
    await until('worker C to commit', async () => (await snapshots()) >= 20, {everyMs: 20, timeoutMs: 120000})
    const trace = path.join(work, `trace-${index}`)
    const a = procs.worker(db.url, ['--queue', 'stall', '--name', 'A'], {
      PIPE_FAULT_PAUSE_AT: PAUSE_AT,
      PIPE_FAULT_PAUSE_DIR: pauseDir,
      PIPE_FAULT_TRACE: trace,
    })
    workers.push(a)
    const reached = await until('worker A to be inside the commit of c1', () => readdirSync(pauseDir).some((f) => f.startsWith('reached.')), {
      everyMs: 5,
      timeoutMs: 60000,
    }).catch(() => false)
    // A build whose commit no longer passes that point is not measured, and says which points it passed.
    if (!reached) {
      const passed = existsSync(trace)
        ? [
            ...new Set(
              readFileSync(trace, 'utf8')
                .split('\n')
                .filter(Boolean)
                .map((l) => l.replace(/#\d+$/, '')),
            ),
          ]
        : []
      return {missed: `worker A never reached ${PAUSE_AT} in a minute; the points it passed: ${passed.join(', ') || 'none'}`}
    }
    a.child.kill('SIGSTOP')
    const stopped = Date.now()
    // Let go of the fault point now: A goes on from it as soon as it is woken.
    writeFileSync(path.join(pauseDir, 'go'), '')
    const b = procs.worker(db.url, ['--queue', 'stall', '--name', 'B'])
    workers.push(b)
    await wait(3 * LEASE_MS)
    a.child.kill('SIGCONT')
    const woken = Date.now()
    const status = async () => (await client.query(`SELECT body::json->>'status' AS s FROM pipe_runs WHERE run_id = $1`, [target])).rows[0].s
    await until(`run ${target} to end`, async () => ['succeeded', 'failed', 'cancelled', 'blocked'].includes(await status()), {everyMs: 50, timeoutMs: 120000})
    const ended = await status()
    const endAt = Number(
      (
        await client.query(
          `SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000 AS at FROM pipe_events WHERE run_id = $1 AND line::json->>'event' = $2`,
          [target, ended],
        )
      ).rows[0]?.at,
    )
    const commits = (await client.query('SELECT extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000 AS at FROM pipe_snapshots ORDER BY 1')).rows.map(
      (r) => Number(r.at),
    )
    const during = commits.filter((t) => t > stopped && t < woken)
    const edges = [stopped, ...during, woken]
    const longestGap = Math.max(...edges.slice(1).map((t, i) => t - edges[i]))
    // C's rate before the stop: its commits over the two seconds before A was stopped.
    const before = commits.filter((t) => t > stopped - 2000 && t <= stopped).length / 2
    const running = Number(
      (await client.query(`SELECT count(*) AS n FROM pipe_runs WHERE body::json->>'status' NOT IN ('succeeded', 'failed', 'cancelled', 'blocked')`)).rows[0].n,
    )
    const finishedBy = b.stderr().includes(`${target} ${ended}`) ? 'B' : a.stderr().includes(`${target} ${ended}`) ? 'A (the stopped one)' : 'unknown'
    return {ended, finishedBy, toEnd: endAt - stopped, longestGap, during: during.length, before, fillersLeft: running}
  } finally {
    await client.end()
    for (const w of workers) w.child.kill('SIGTERM')
    await Promise.all(workers.map((w) => w.exited))
  }
}

export async function stallScenario({bin, env, record, table, root, label = ''}) {
  const cluster = await startCluster({root, section: 'stall'})
  if (!cluster) return
  const work = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-stall-'))
  const procs = pipeProcesses({bin, env: {...env, PIPE_LEASE_MS: String(LEASE_MS)}, cwd: work})
  const load = loadavg()
  try {
    mkdirSync(path.join(work, 'prompts'))
    copyFileSync(path.join(root, 'pipelines', 'prompts', 'compile.md'), path.join(work, 'prompts', 'compile.md'))
    writeFileSync(path.join(work, 'filler.yaml'), compileChain('filler', FILLER_STEPS))
    writeFileSync(path.join(work, 'target.yaml'), compileChain('target', 4))
    const rows = []
    const results = []
    for (let index = 1; index <= TRIALS; index++) {
      const t = await trial({cluster, procs, work, root, index})
      if (t.missed) {
        console.error(`  stall: not measured: ${t.missed}`)
        record({name: `${label}stall: not measured`, value: 'not measured', unit: '', note: t.missed})
        rows.push([index, 'not measured', '', t.missed, ''])
        break
      }
      results.push(t)
      const note = `${t.during} snapshot commits by the other workers while A was stopped (C did ${t.before.toFixed(0)}/s before); fillers still running at the end: ${t.fillersLeft} of ${FILLERS}`
      console.error(
        `  stall, trial ${index}: T ${t.ended} by ${t.finishedBy} ${(t.toEnd / 1000).toFixed(2)} s after A's stop; longest commit gap of the others ${(t.longestGap / 1000).toFixed(2)} s; ${note}`,
      )
      record({
        name: `${label}stall, trial ${index}: A stopped in a commit for 3× the lease (${LEASE_MS} ms): its run ${t.ended} elsewhere after`,
        value: t.toEnd / 1000,
        unit: 's',
        target: `≤ lease + 5 s (${(LEASE_MS / 1000 + 5).toFixed(0)} s)`,
        note: `by ${t.finishedBy}`,
      })
      record({
        name: `${label}stall, trial ${index}: longest gap between the other workers' commits while A was stopped`,
        value: t.longestGap / 1000,
        unit: 's',
        target: `≤ the lease (${(LEASE_MS / 1000).toFixed(0)} s)`,
        note,
      })
      rows.push([
        index,
        `${(t.toEnd / 1000).toFixed(2)} s (${t.ended}, by ${t.finishedBy})`,
        `${(t.longestGap / 1000).toFixed(2)} s`,
        `${t.during} (C: ${t.before.toFixed(0)}/s before the stop)`,
        `${t.fillersLeft} of ${FILLERS}`,
      ])
    }
    const worst = (key) => Math.max(...results.map((t) => t[key])) / 1000
    if (results.length) rows.push(['worst', `${worst('toEnd').toFixed(2)} s`, `${worst('longestGap').toFixed(2)} s`, '', ''])
    table(
      `${label}stall: worker A SIGSTOPped inside the commit of a compile step for ${(3 * LEASE_MS) / 1000} s, PIPE_LEASE_MS=${LEASE_MS}, ${TRIALS} trials, PostgreSQL ${cluster.version} fsync on; load ${load} at start, ${loadavg()} at end`,
      [
        'trial',
        `A's run finished elsewhere, after A's stop (target ≤ ${(LEASE_MS / 1000 + 5).toFixed(0)} s)`,
        `longest gap between the other workers' snapshot commits while A was stopped (target ≤ ${(LEASE_MS / 1000).toFixed(0)} s)`,
        'snapshot commits by the others while A was stopped',
        'filler runs still running at the end',
      ],
      rows,
    )
  } finally {
    procs.killAll()
    await cluster.stop()
    rmSync(work, {recursive: true, force: true})
  }
}
