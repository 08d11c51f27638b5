// Bench section `children` (issue 36): what finding a run's children costs as the store grows, on the
// folder store: a foreach step (`pipe run` of a foreach over 5 items, one noop step each) and a
// children listing (`pipe runs show PARENT --json`, which lists the parent's child runs), in a store
// of 10 runs and one of 10,000, paired (the two stores one after the other, alternating which goes
// first), as whole processes (CPU = user+sys, wait4). Reported: each side's median and the median of
// the per-pair ratios 10,000 / 10.
//
// A store of N runs is N − 6 runs of a one-step noop pipeline, made through the engine in one process
// (bench/populate.mjs --pipeline, fsync off while filling, as for the history stores), then one
// foreach run of 5 items by the built CLI (its parent and 5 children: the 6 runs left), whose parent
// the listing shows. With --stores DIR the stores are kept and reused (DIR/children-N). The foreach is
// timed in a fresh copy of the 10-run store each time, and in the 10,000-run store itself (it grows
// by 6 runs a timed run; the row says by how many).
//
// Then the same on the PostgreSQL store, when PostgreSQL is installed and PIPE_BENCH_CHILDREN_PG is
// not 0: each folder store copied into a database of its own by `pipe store copy` (fsync on), the
// 10-run one copied again for each timed foreach run (CREATE DATABASE … TEMPLATE).
import {cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {spawnSync} from 'node:child_process'
import {loadavg, startCluster, until} from './cluster.mjs'

const ONE = 'version: 1\nname: one\nsteps:\n  - {id: s0, kind: noop}\n'
const FOREACH =
  'version: 1\nname: fan5\nsteps:\n  - id: each\n    kind: foreach\n    items: "${{ [1, 2, 3, 4, 5] }}"\n    steps:\n      - {id: a, kind: noop}\n'

function stats(values) {
  const s = [...values].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return {median: s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2, min: s[0], max: s.at(-1), n: s.length}
}

/** A folder store of `size` runs, one of them a foreach parent with 5 children: {dir, parent, runs}. */
function storeOf({size, bin, env, root, stores}) {
  const dir = stores ? path.join(path.resolve(stores), `children-${size}`) : mkdtempSync(path.join(os.tmpdir(), `pipe-bench-children-${size}-`))
  const done = path.join(dir, 'populated.json')
  if (existsSync(done)) return {dir, ...JSON.parse(readFileSync(done, 'utf8')), reused: true}
  rmSync(dir, {recursive: true, force: true})
  mkdirSync(dir, {recursive: true})
  writeFileSync(path.join(dir, 'one.yaml'), ONE)
  writeFileSync(path.join(dir, 'foreach5.yaml'), FOREACH)
  const started = Date.now()
  console.error(`  populating a store of ${size} runs (${size - 6} one-step runs through the engine, fsync off, then a foreach of 5)...`)
  const fill = spawnSync(
    process.execPath,
    [path.join(root, 'bench/populate.mjs'), '--store', path.join(dir, '.pipe'), '--runs', String(size - 6), '--pipeline', path.join(dir, 'one.yaml')],
    {env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit']},
  )
  if (fill.status !== 0) throw new Error(`populate ${size} failed`)
  const fan = spawnSync(process.execPath, [bin, 'run', path.join(dir, 'foreach5.yaml'), '--text', 'x', '--store', path.join(dir, '.pipe'), '--json'], {
    cwd: dir,
    env,
    encoding: 'utf8',
  })
  if (fan.status !== 0) throw new Error(`the foreach run failed: ${fan.stderr}`)
  const info = {parent: JSON.parse(fan.stdout).run_id, runs: size, seconds: (Date.now() - started) / 1000}
  writeFileSync(done, JSON.stringify(info))
  return {dir, ...info, reused: false}
}

const runCount = (dir) => {
  const runs = path.join(dir, '.pipe', 'runs')
  return existsSync(runs) ? readdirSync(runs).length : '?'
}

const FOREACH_LABEL = 'a foreach step (pipe run of a foreach over 5 items, one noop step each)'
const LIST_LABEL = "a children listing (pipe runs show PARENT --json, the parent of the foreach's 5 runs)"
const f = (s) => `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})`

/**
 * Both figures on two sides (small, big), paired and alternated. A side is {runs, parent, dir,
 * list: its --store for reading, fresh(): a --store for one foreach run, size(): runs at the end}.
 */
function compare({bin, measure, n, record, label, kind, sides: [small, big]}) {
  const subjects = {
    [FOREACH_LABEL]: (side) => [[process.execPath, bin, 'run', path.join(side.dir, 'foreach5.yaml'), '--text', 'x', '--store', side.fresh()], {cwd: side.dir}],
    [LIST_LABEL]: (side) => [[process.execPath, bin, 'runs', 'show', side.parent, '--json', '--store', side.list], {cwd: side.dir}],
  }
  const rows = []
  for (const [what, subject] of Object.entries(subjects)) {
    measure(...subject(small))
    measure(...subject(big))
    const a = []
    const b = []
    for (let i = 0; i < n; i++) {
      const argsA = subject(small)
      const argsB = subject(big)
      if (i % 2 === 0) {
        a.push(measure(...argsA))
        b.push(measure(...argsB))
      } else {
        b.push(measure(...argsB))
        a.push(measure(...argsA))
      }
    }
    const ratio = stats(b.map((x, i) => x.cpu_ms / a[i].cpu_ms))
    const wallRatio = stats(b.map((x, i) => x.wall_ms / a[i].wall_ms))
    const cpuA = stats(a.map((x) => x.cpu_ms))
    const cpuB = stats(b.map((x) => x.cpu_ms))
    const note = `CPU ${f(cpuA)} ms at ${small.runs} runs, ${f(cpuB)} ms at ${big.runs} (${big.size()} runs at the end); wall ratio ${wallRatio.median.toFixed(2)}`
    console.error(`  children, ${kind}: ${what}: ${ratio.median.toFixed(2)}× (${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)}); ${note}`)
    record({
      name: `${label}children: ${what}, ${big.runs} runs / ${small.runs} runs, ${kind}`,
      value: ratio.median,
      unit: '× CPU (median of per-pair ratios)',
      target: '≤ 1.1',
      note,
      cpu_small: cpuA,
      cpu_big: cpuB,
      // Not `ratio`: run.mjs prints that field as a ratio to `node -e 0`.
      size_ratio: ratio,
      size_wall_ratio: wallRatio,
    })
    rows.push([
      kind,
      what,
      f(cpuA),
      f(cpuB),
      `${ratio.median.toFixed(2)}× (${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)})`,
      `${wallRatio.median.toFixed(2)}×`,
    ])
  }
  return rows
}

/** The folder stores copied into PostgreSQL databases, and the same figures there. */
async function onPostgres({bin, env, root, made, measure, n, record, label}) {
  const cluster = await startCluster({root, section: 'children on PostgreSQL'})
  if (!cluster) return []
  try {
    const sides = []
    for (const s of made) {
      const db = await cluster.database()
      const started = Date.now()
      const copy = spawnSync(process.execPath, [bin, 'store', 'copy', path.join(s.dir, '.pipe'), db.url], {cwd: s.dir, env, encoding: 'utf8'})
      if (copy.status !== 0) throw new Error(`pipe store copy of ${s.runs} runs failed: ${copy.stderr}`)
      const seconds = (Date.now() - started) / 1000
      console.error(`  children: pipe store copy of ${s.runs} runs into PostgreSQL: ${seconds.toFixed(1)} s`)
      record({name: `${label}children: pipe store copy of ${s.runs} runs into PostgreSQL`, value: seconds, unit: 's'})
      // The big folder store has grown by its timed foreach runs since it was filled: count it.
      sides.push({...s, db, copied: runCount(s.dir)})
    }
    const [small, big] = sides
    // Copies of the small database made beforehand: a timed run must not wait for one.
    const copies = []
    for (let i = 0; i < n + 1; i++)
      copies.push(
        (await until('the 10-run database to be free', () => cluster.database(small.db.name).catch(() => undefined), {everyMs: 100, timeoutMs: 30000})).url,
      )
    // Each foreach run adds its parent and 5 children to the big database.
    let bigForeachRuns = 0
    const rows = compare({
      bin,
      measure,
      n,
      record,
      label,
      kind: `PostgreSQL ${cluster.version}`,
      sides: [
        {runs: small.runs, parent: small.parent, dir: small.dir, list: small.db.url, fresh: () => copies.shift(), size: () => small.runs},
        {
          runs: big.runs,
          parent: big.parent,
          dir: big.dir,
          list: big.db.url,
          fresh: () => (bigForeachRuns++, big.db.url),
          size: () => big.copied + 6 * bigForeachRuns,
        },
      ],
    })
    return rows
  } finally {
    await cluster.stop()
  }
}

export async function childrenScenario({bin, env, record, table, root, measure, pairs, stores, label = '', sizes = [10, 10000]}) {
  const load = loadavg()
  const made = sizes.map((size) => storeOf({size, bin, env, root, stores}))
  for (const s of made)
    record({
      name: `${label}children: store of ${s.runs} runs`,
      value: s.seconds,
      unit: 's to populate',
      note: s.reused ? 'reused from --stores' : 'fsync off while populating',
    })
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-children-copies-'))
  let copies = 0
  const n = Math.min(pairs, 7)
  try {
    const [small, big] = made
    // The small store is copied for each foreach run, so it stays at its size.
    const fresh = () => {
      const copy = path.join(scratch, String(copies++))
      cpSync(path.join(small.dir, '.pipe'), copy, {recursive: true})
      return copy
    }
    const rows = compare({
      bin,
      measure,
      n,
      record,
      label,
      kind: 'folder store',
      sides: [
        {runs: small.runs, parent: small.parent, dir: small.dir, list: path.join(small.dir, '.pipe'), fresh, size: () => small.runs},
        {
          runs: big.runs,
          parent: big.parent,
          dir: big.dir,
          list: path.join(big.dir, '.pipe'),
          fresh: () => path.join(big.dir, '.pipe'),
          size: () => runCount(big.dir),
        },
      ],
    })
    if (process.env.PIPE_BENCH_CHILDREN_PG !== '0') rows.push(...(await onPostgres({bin, env, root, made, measure, n, record, label})))
    table(
      `${label}children: ${sizes[0]} vs ${sizes[1]} runs, ${n} pairs, whole processes; load ${load} at start, ${loadavg()} at end`,
      ['store', 'figure', `CPU ms at ${sizes[0]} runs`, `CPU ms at ${sizes[1]} runs`, 'CPU ratio (target ≤ 1.1)', 'wall ratio'],
      rows,
    )
  } finally {
    rmSync(scratch, {recursive: true, force: true})
    if (!stores) for (const s of made) rmSync(s.dir, {recursive: true, force: true})
  }
}
