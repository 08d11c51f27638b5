// Bench section `enqueue` (issue 36): what a detached run costs the machine that queues it, on a
// PostgreSQL store (fsync on) with no worker.
// - `pipe run --detach` as a whole process, paired with `node -e 0` (bench/run.mjs's versusNode: CPU
//   is user+sys as wait4 reports it, median of the pairs, and the median of the per-pair ratios):
//   the default pipeline on examples/full-prd.md, and a one-step pipeline with one typed input.
// - A batch of 100 runs in one call, `pipe run PIPELINE --detach --inputs-file runs.jsonl` (one line a
//   run's inputs), when the build has the flag (its `pipe run --help` names it): runs/s over the
//   call's wall time, its CPU per run, and the runs the database holds after it.
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {loadavg, pipeProcesses, startCluster} from './cluster.mjs'

const BATCH = 100

export async function enqueueScenario({bin, env, record, table, root, versusNode, measure, pairs, label = ''}) {
  const cluster = await startCluster({root, section: 'enqueue'})
  if (!cluster) return
  const work = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-enqueue-'))
  const procs = pipeProcesses({bin, env, cwd: work})
  const load = loadavg()
  const rows = []
  try {
    writeFileSync(path.join(work, 'one.yaml'), 'version: 1\nname: one\ninputs:\n  n: {type: integer, required: true}\nsteps:\n  - {id: s0, kind: noop}\n')
    const db = await cluster.database()
    // The first command on a new database creates pipe's tables: not part of any figure.
    await procs.detach(db.url, [path.join(work, 'one.yaml'), '--text', 'x', '-i', 'n=0'])
    const n = Math.min(pairs, 11)
    const detachOf = (args) => () => [[process.execPath, bin, 'run', ...args, '--detach', '--store', db.url, '--json'], {cwd: work}]
    const defaults = versusNode(
      `${label}enqueue: pipe run --detach, default pipeline (full PRD)`,
      detachOf([path.join(root, 'pipelines/default.yaml'), '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go']),
      {
        pairs: n,
        target: 'well under 100 ms CPU a run',
      },
    )
    const one = versusNode(
      `${label}enqueue: pipe run --detach, one noop step, one typed input`,
      detachOf([path.join(work, 'one.yaml'), '--text', 'x', '-i', 'n=1']),
      {pairs: n, target: 'well under 100 ms CPU a run'},
    )
    for (const [what, r] of [
      ['default pipeline (full PRD)', defaults],
      ['one noop step, one typed input', one],
    ])
      rows.push([
        `pipe run --detach, ${what}: CPU a run`,
        `${r.cpu_ms.median.toFixed(1)} ms (${r.cpu_ms.min.toFixed(1)}–${r.cpu_ms.max.toFixed(1)}), ${r.ratio.median.toFixed(2)}× node -e 0`,
        `wall ${r.wall_ms.median.toFixed(0)} ms: ${(1000 / r.wall_ms.median).toFixed(1)} runs/s one after another`,
      ])

    const help = procs.run(['run', '--help'])
    if (!/--inputs-file/.test(help.stdout)) {
      console.error(`  enqueue: a ${BATCH}-run batch: not supported by this build (its pipe run --help has no --inputs-file)`)
      record({name: `${label}enqueue: ${BATCH}-run batch (--inputs-file)`, value: 'not supported by this build', unit: ''})
      rows.push([`${BATCH}-run batch, pipe run one.yaml --detach --inputs-file runs.jsonl`, 'not supported by this build', ''])
    } else {
      writeFileSync(path.join(work, 'runs.jsonl'), Array.from({length: BATCH}, (_, i) => `${JSON.stringify({n: i + 1})}\n`).join(''))
      const client = await cluster.client(db.name)
      const count = async () => Number((await client.query('SELECT count(*) AS n FROM pipe_runs')).rows[0].n)
      const before = await count()
      const usage = measure(
        [
          process.execPath,
          bin,
          'run',
          path.join(work, 'one.yaml'),
          '--text',
          'x',
          '--detach',
          '--inputs-file',
          path.join(work, 'runs.jsonl'),
          '--store',
          db.url,
          '--json',
        ],
        {cwd: work, expect: null},
      )
      const made = (await count()) - before
      await client.end()
      // A batch that failed is never read as a rate: the row says it failed and how many runs it left.
      const rate = usage.status === 0 && made === BATCH ? made / (usage.wall_ms / 1000) : undefined
      const value = rate === undefined ? `failed (exit ${usage.status}, ${made} of ${BATCH} runs created)` : `${rate.toFixed(1)} runs/s`
      const note = `exit ${usage.status}; ${made} runs created in ${usage.wall_ms.toFixed(0)} ms wall, ${usage.cpu_ms.toFixed(0)} ms CPU (${(usage.cpu_ms / Math.max(made, 1)).toFixed(1)} ms a run)`
      console.error(`  enqueue: ${BATCH}-run batch: ${value}; ${note}`)
      record({name: `${label}enqueue: ${BATCH}-run batch (--inputs-file), one call`, value: rate ?? value, unit: rate === undefined ? '' : 'runs/s', note})
      rows.push([`${BATCH}-run batch, pipe run one.yaml --detach --inputs-file runs.jsonl`, value, note])
    }
    table(
      `${label}enqueue: PostgreSQL ${cluster.version} fsync on, no worker; ${n} pairs with node -e 0; load ${load} at start, ${loadavg()} at end`,
      ['figure', 'value', 'also'],
      rows,
    )
  } finally {
    procs.killAll()
    await cluster.stop()
    rmSync(work, {recursive: true, force: true})
  }
}
