#!/usr/bin/env node
// pipe's benchmarks. Prints medians (and ratios) as a table; never part of npm test.
//   npm run bench                 all of them
//   npm run bench -- startup run  only some (startup, run, steps, writes, show, audit)
//   BENCH_AUDIT_RUNS=1000 npm run bench -- audit   the audit figure over more real runs (default 200)
import {spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync, mkdirSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const bin = path.join(root, 'bin', 'run.js')
const only = process.argv.slice(2)
const want = (name) => only.length === 0 || only.includes(name)
const rows = []
const env = {...process.env, NO_COLOR: '1', PIPE_HOME: mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-home-'))}
delete env.OPENAI_API_KEY
delete env.OPENAI_BASE_URL

function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

function timeProcess(args, options = {}) {
  const started = process.hrtime.bigint()
  const result = spawnSync(options.node ?? process.execPath, args, {cwd: options.cwd ?? root, env, encoding: 'utf8'})
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  if (options.check !== false && result.status !== (options.expect ?? 0)) {
    throw new Error(`${args.join(' ')} exited ${result.status}:\n${result.stderr}`)
  }
  return ms
}

function sample(n, fn) {
  fn() // warm the file cache
  return median(Array.from({length: n}, fn))
}

function row(name, value, unit, target, note = '') {
  rows.push({name, value, unit, target, note})
  console.error(`  ${name}: ${value.toFixed(unit === 'ms' ? 1 : 2)} ${unit}${note ? ` (${note})` : ''}`)
}

function tmp(prefix) {
  return mkdtempSync(path.join(os.tmpdir(), prefix))
}

if (want('startup')) {
  console.error('startup')
  const node = sample(15, () => timeProcess(['-e', '0']))
  const version = sample(15, () => timeProcess([bin, '--version']))
  row('node -e 0', node, 'ms', '(reference)')
  row('pipe --version', version, 'ms', '< 200 ms', `${(version / node).toFixed(1)}x node -e 0`)
}

if (want('run')) {
  console.error('default pipeline, full PRD, whole process')
  const cwd = tmp('pipe-bench-run-')
  const ms = sample(9, () => timeProcess([bin, 'run', path.join(root, 'pipelines/default.yaml'), '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go'], {cwd}))
  row('(a) default pipeline, full PRD', ms, 'ms', '< 450 ms')
  rmSync(cwd, {recursive: true, force: true})
}

function chain(n) {
  const steps = Array.from({length: n}, (_, i) => `  - {id: s${i}, kind: noop${i + 1 < n ? `, next: s${i + 1}` : ''}}`)
  return `version: 1\nname: chain${n}\nsteps:\n${steps.join('\n')}\n`
}

if (want('steps')) {
  console.error('engine overhead per step (500 no-op steps vs 1, whole process)')
  const cwd = tmp('pipe-bench-steps-')
  writeFileSync(path.join(cwd, 'chain500.yaml'), chain(500))
  writeFileSync(path.join(cwd, 'chain1.yaml'), chain(1))
  const one = sample(5, () => timeProcess([bin, 'run', 'chain1.yaml'], {cwd}))
  const many = sample(5, () => timeProcess([bin, 'run', 'chain500.yaml'], {cwd}))
  row('(b) engine overhead per step', (many - one) / 499, 'ms', '< 2.5 ms', `500 steps ${many.toFixed(0)} ms, 1 step ${one.toFixed(0)} ms`)
  rmSync(cwd, {recursive: true, force: true})
}

/** Fills a store with `count` finished runs through the real Store, in one process. */
function populate(storeDir, count) {
  const script = `
    const {Store} = await import(${JSON.stringify(path.join(root, 'dist/store/store.js'))})
    const {populateRuns} = await import(${JSON.stringify(path.join(root, 'bench/populate.mjs'))})
    await populateRuns(await Store.open(${JSON.stringify(storeDir)}), ${count})
  `
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {env, encoding: 'utf8', maxBuffer: 1e8})
  if (result.status !== 0) throw new Error(result.stderr)
  return JSON.parse(result.stdout.trim().split('\n').pop())
}

if (want('writes') || want('show')) {
  const sizes = [10, 1000, 10000]
  const stores = {}
  for (const size of sizes) {
    const dir = tmp(`pipe-bench-store-${size}-`)
    console.error(`populating a store with ${size} runs...`)
    stores[size] = {dir, ...populate(path.join(dir, '.pipe'), size)}
  }
  if (want('writes')) {
    console.error("one step's writes (snapshot + spec version + evidence) as history grows")
    const figures = {}
    for (const size of sizes) {
      figures[size] = stores[size].step_write_median_ms
      row(`(c) one step's writes, ${size} runs in store`, figures[size], 'ms', size === 10000 ? '<= 2x the 10-run figure' : '', size === 10 ? '' : `${(figures[size] / figures[10]).toFixed(2)}x the 10-run figure`)
    }
  }
  if (want('show')) {
    console.error('pipe snapshot show RUN, whole process, as history grows')
    const figures = {}
    for (const size of [10, 10000]) {
      const {dir, sample_run: run} = stores[size]
      figures[size] = sample(9, () => timeProcess([bin, 'snapshot', 'show', run, '--store', path.join(dir, '.pipe')], {cwd: dir}))
      row(`(d) snapshot show, ${size} runs in store`, figures[size], 'ms', size === 10000 ? '<= 2x the 10-run figure' : '', size === 10 ? '' : `${(figures[size] / figures[10]).toFixed(2)}x the 10-run figure`)
    }
  }
  for (const size of sizes) rmSync(stores[size].dir, {recursive: true, force: true})
}

if (want('audit')) {
  // Real runs of the default pipeline (11 snapshots, 5 spec versions, 9 evidence records, a ledger
  // entry each), then the CPU time of a whole-store audit verify, measured inside the process
  // (process.cpuUsage around the check, start-up excluded) and divided by the number of runs.
  const count = Number(process.env.BENCH_AUDIT_RUNS ?? 200)
  const cwd = tmp('pipe-bench-audit-')
  console.error(`audit verify: running the default pipeline ${count} times...`)
  const args = [bin, 'run', path.join(root, 'pipelines/default.yaml'), '--input', path.join(root, 'examples/one-sentence.txt'), '--answers', path.join(root, 'examples/one-sentence.answers.yaml'), '--decision', 'go']
  for (let i = 0; i < count; i++) timeProcess(args, {cwd})
  const script = `
    const {Store} = await import(${JSON.stringify(path.join(root, 'dist/store/store.js'))})
    const {auditStore} = await import(${JSON.stringify(path.join(root, 'dist/store/audit.js'))})
    const store = await Store.existing(${JSON.stringify(path.join(cwd, '.pipe'))})
    let report = await auditStore(store)
    const cpu = []
    for (let i = 0; i < 5; i++) {
      const before = process.cpuUsage()
      report = await auditStore(store)
      const used = process.cpuUsage(before)
      cpu.push((used.user + used.system) / 1000)
    }
    cpu.sort((a, b) => a - b)
    console.log(JSON.stringify({ok: report.ok, runs: report.runs, cpu_ms: cpu[2]}))
  `
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {env, encoding: 'utf8'})
  if (result.status !== 0) throw new Error(result.stderr)
  const measured = JSON.parse(result.stdout.trim().split('\n').pop())
  if (!measured.ok) throw new Error('the benchmark store does not verify')
  row(`(e) audit verify CPU per run, ${measured.runs} real runs`, measured.cpu_ms / measured.runs, 'ms', '<= 1 ms', `whole store ${measured.cpu_ms.toFixed(0)} ms CPU`)
  const whole = sample(3, () => timeProcess([bin, 'audit', 'verify'], {cwd}))
  row(`(e) audit verify, whole process, ${measured.runs} runs`, whole, 'ms', '', 'wall time, start-up included')
  rmSync(cwd, {recursive: true, force: true})
}

rmSync(env.PIPE_HOME, {recursive: true, force: true})
const width = Math.max(...rows.map((r) => r.name.length))
console.log(`\n${'benchmark'.padEnd(width)}  ${'median'.padStart(10)}  target           note`)
for (const r of rows) console.log(`${r.name.padEnd(width)}  ${`${r.value.toFixed(r.unit === 'ms' ? 1 : 2)} ${r.unit}`.padStart(10)}  ${r.target.padEnd(16)} ${r.note}`)
console.log(`\nmachine: ${os.cpus().length} cores, node ${process.version}; medians of repeated runs, noisy shared host`)
