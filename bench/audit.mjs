// Bench section `audit` (issue 38): what `pipe audit verify` of a whole store costs per run, at
// 1,000 finished default runs, on the file store (the default), the in-memory store and PostgreSQL.
//
// The store is made once (bench/populate.mjs: real default runs through the engine, fsync off while
// filling; with --stores DIR it is kept in DIR/audit-1000 and reused) and must pass its audit.
// - Whole process: `pipe audit verify --store S` paired with `node -e 0` (alternating which goes
//   first), CPU = user+sys (wait4); per run = (pipe − node) / runs. Both without NODE_EXTRA_CA_CERTS
//   (a CA bundle it names is parsed at every start, by both: noise, not the audit).
// - In-process (bench/audit-inprocess.mjs): the audit timed inside one process after an untimed
//   first one, CPU per run; steadier than whole processes on a loaded machine. The in-memory store
//   has no process of its own (its records are loaded from the file store), so it is only this.
//   And the floor: the same process only listing, reading and hashing the file store's files.
// - PostgreSQL (when installed and PIPE_BENCH_AUDIT_PG is not 0): the file store copied into a
//   database by `pipe store copy`, then both of the above against it.
import {existsSync, mkdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {spawnSync} from 'node:child_process'
import {startCluster} from './cluster.mjs'

const RUNS = 1000

function stats(values) {
  const s = [...values].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return {median: s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2, min: s[0], max: s.at(-1), n: s.length}
}

function storeOf({root, env, stores}) {
  const dir = stores ? path.join(path.resolve(stores), `audit-${RUNS}`) : path.join(os.tmpdir(), `pipe-bench-audit-${process.pid}`)
  const done = path.join(dir, 'populated.json')
  if (existsSync(done)) return {dir, ...JSON.parse(readFileSync(done, 'utf8')), reused: true}
  rmSync(dir, {recursive: true, force: true})
  mkdirSync(dir, {recursive: true})
  console.error(`  populating ${RUNS} default runs through the engine (fsync off while populating)...`)
  const fill = spawnSync(process.execPath, [path.join(root, 'bench/populate.mjs'), '--store', path.join(dir, '.pipe'), '--runs', String(RUNS)], {
    env,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  if (fill.status !== 0) throw new Error('populate failed')
  const info = JSON.parse(fill.stdout.trim().split('\n').pop())
  writeFileSync(done, JSON.stringify(info))
  return {dir, ...info, reused: false}
}

export async function auditScenario({bin, label = '', env: benchEnv, record, root, pairs, stores}) {
  const env = {...benchEnv}
  delete env.NODE_EXTRA_CA_CERTS
  const measure = (argv, cwd) => {
    const result = spawnSync('python3', [path.join(root, 'bench', 'rusage.py'), cwd, ...argv], {env, encoding: 'utf8', maxBuffer: 1e8})
    if (result.status !== 0) throw new Error(`rusage.py failed: ${result.stderr}`)
    const usage = JSON.parse(result.stdout.trim().split('\n').pop())
    if (usage.status !== 0) throw new Error(`${argv.join(' ')} exited ${usage.status}`)
    return usage
  }
  const s = storeOf({root, env, stores})
  record({name: `${label}audit: populate ${RUNS} runs`, value: s.seconds, unit: 's', note: s.reused ? 'reused from --stores' : 'fsync off'})
  const n = Math.min(pairs, 11)

  const wholeProcess = (what, location) => {
    const argv = [process.execPath, bin, 'audit', 'verify', '--store', location]
    const node = [process.execPath, '-e', '0']
    measure(argv, s.dir)
    const sub = []
    const ref = []
    for (let i = 0; i < n; i++) {
      if (i % 2 === 0) {
        ref.push(measure(node, s.dir))
        sub.push(measure(argv, s.dir))
      } else {
        sub.push(measure(argv, s.dir))
        ref.push(measure(node, s.dir))
      }
    }
    const perRun = stats(sub.map((x, i) => (x.cpu_ms - ref[i].cpu_ms) / s.runs))
    record({
      name: `${label}audit verify, ${what}, ${s.runs} runs, whole process`,
      cpu_ms: stats(sub.map((x) => x.cpu_ms)),
      wall_ms: stats(sub.map((x) => x.wall_ms)),
      maxrss_mib: stats(sub.map((x) => x.maxrss_mib)),
      node_cpu_ms: stats(ref.map((x) => x.cpu_ms)),
      value: perRun.median,
      unit: 'ms CPU per run ((pipe − node) / runs)',
      per_run: perRun,
      target: '≤ 0.5 ms per run',
      note: `spread ${perRun.min.toFixed(2)}–${perRun.max.toFixed(2)}; load ${os.loadavg()[0].toFixed(2)}`,
    })
  }
  const heads = []
  const inProcess = (what, args) => {
    // Sources through tsx: the checkout of `bin` (its bench/ and src/), so that --versus compares code with code.
    const checkout = path.resolve(path.dirname(bin), '..')
    const script = path.join(checkout, 'bench', 'audit-inprocess.mjs')
    if (!existsSync(script)) return console.error(`  ${what}: no ${script} in that checkout, skipped`)
    const result = spawnSync(process.execPath, ['--import', 'tsx', script, ...args, '--rounds', '5'], {cwd: checkout, env, encoding: 'utf8', maxBuffer: 1e8})
    if (result.status !== 0) throw new Error(`in-process audit of ${what} failed: ${result.stderr}`)
    const out = JSON.parse(result.stdout.trim().split('\n').pop())
    // The same records give the same head digest in every store (issue 36's oracle).
    if (out.head !== null) heads.push(out.head)
    if (out.head !== null && heads[0] !== out.head) throw new Error(`${what}: head digest ${out.head}, not the file store's ${heads[0]}`)
    const perRun = stats(out.per_run_ms)
    record({
      name: `${label}audit verify, ${what}, ${out.runs} runs, in-process`,
      value: perRun.median,
      unit: 'ms CPU per run',
      per_run: perRun,
      head: out.head,
      target: '≤ 0.5 ms per run',
      note: `spread ${perRun.min.toFixed(2)}–${perRun.max.toFixed(2)} over ${perRun.n} audits after a first; load ${os.loadavg()[0].toFixed(2)}`,
    })
  }

  const folder = path.join(s.dir, '.pipe')
  try {
    await measureAll(folder)
  } finally {
    if (!stores) rmSync(s.dir, {recursive: true, force: true})
  }

  async function measureAll() {
    wholeProcess('file store', folder)
    inProcess('file store', ['--store', folder])
    inProcess('in-memory store', ['--store', folder, '--memory'])
    inProcess("floor: list, read and hash the file store's files, no audit", ['--store', folder, '--floor'])
    if (process.env.PIPE_BENCH_AUDIT_PG === '0') return
    const cluster = await startCluster({root, section: 'audit on PostgreSQL', commitTimestamps: false})
    if (!cluster) return
    try {
      const db = await cluster.database()
      const copy = spawnSync(process.execPath, [bin, 'store', 'copy', folder, db.url], {cwd: s.dir, env, encoding: 'utf8'})
      if (copy.status !== 0) throw new Error(`pipe store copy into PostgreSQL failed: ${copy.stderr}`)
      wholeProcess(`PostgreSQL ${cluster.version}`, db.url)
      inProcess(`PostgreSQL ${cluster.version}`, ['--store', db.url])
    } finally {
      await cluster.stop()
    }
  }
}
