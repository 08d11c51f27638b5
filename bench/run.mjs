#!/usr/bin/env node
// pipe's benchmark: whole processes, timed as paired, interleaved runs against `node -e 0`.
//   npm run bench                                    every section, history at 10 / 1,000 / 10,000 runs
//   npm run bench -- --only startup,run              some sections (startup run steps foreach workers team stall enqueue children audit fsyncs peer history)
//   npm run bench -- --only workers                  the PostgreSQL team store: workers' steps/s, dispatch, failover (bench/postgres.mjs)
//   npm run bench -- --only team,stall,enqueue,children   issue 36's figures (bench/team.mjs, stall.mjs, enqueue.mjs, children.mjs)
//   npm run bench -- --only peer                     pipe against LangGraph.js (bench/peer/, installed on demand)
//   npm run bench -- --only audit                    issue 38's audit verify per run at 1,000 runs: file, in-memory, PostgreSQL (bench/audit.mjs)
//   npm run bench -- --only instructions --versus OLD/bin/run.js   issue 38's start-up figures in instructions, under valgrind (bench/instructions.mjs)
//   npm run bench -- --sizes 10,1000 --pairs 11      smaller history, fewer pairs
//   npm run bench -- --stores /tmp/pipe-bench-stores reuse populated stores across invocations
// CPU is user+sys of the child as the kernel accounts it (bench/rusage.py, wait4); wall time and peak
// RSS come from the same call. Results: bench/results/latest.json and latest.md. See bench/README.md.
import {spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const {values: opts} = parseArgs({
  options: {
    bin: {type: 'string'},
    versus: {type: 'string'},
    only: {type: 'string'},
    sizes: {type: 'string', default: '10,1000,10000'},
    pairs: {type: 'string', default: '21'},
    stores: {type: 'string'},
    out: {type: 'string', default: path.join(root, 'bench', 'results')},
  },
})
// --bin times another build of pipe (say, a checkout of an older commit) with this harness.
const bin = opts.bin ? path.resolve(opts.bin) : path.join(root, 'bin', 'run.js')
const sections = opts.only ? opts.only.split(',') : ['startup', 'instructions', 'run', 'steps', 'foreach', 'workers', 'team', 'stall', 'enqueue', 'children', 'audit', 'fsyncs', 'peer', 'history']
const want = (name) => sections.includes(name)
const PAIRS = Number(opts.pairs)
const env = {...process.env, NO_COLOR: '1', PIPE_HOME: mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-home-'))}
delete env.OPENAI_API_KEY
delete env.OPENAI_BASE_URL
// Node parses the CA bundle NODE_EXTRA_CA_CERTS names at every start (this machine's, 220 KB: `node -e 0`
// 0.11 s CPU with it, 0.03 s without), which would swamp what pipe itself costs: every command timed,
// `node -e 0` included, runs without it. No timed command talks TLS.
delete env.NODE_EXTRA_CA_CERTS
const results = {bin, machine: {cores: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, loadavg_at_start: os.loadavg()}, started_at: new Date().toISOString(), pairs: PAIRS, rows: [], tables: []}

function tmp(prefix) {
  return mkdtempSync(path.join(os.tmpdir(), prefix))
}

// Folders of timed runs are removed once, at the very end: ext4 here passes over recently deleted
// inodes when it allocates new ones, so a deletion just before a timed run inflates its sys time.
const leftovers = []
function removeLater(dir) {
  leftovers.push(dir)
}

/** A maker of fresh, empty folders (one per timed run) under one temporary folder, removed at the end. */
function freshDirs(prefix) {
  const base = tmp(prefix)
  removeLater(base)
  let i = 0
  return () => {
    const dir = path.join(base, String(i++))
    mkdirSync(dir)
    return dir
  }
}

/** One whole process: its CPU (user+sys), wall time and peak RSS, as wait4 reports them. */
function measure(argv, {cwd = root, expect = 0} = {}) {
  const result = spawnSync('python3', [path.join(root, 'bench', 'rusage.py'), cwd, ...argv], {env, encoding: 'utf8', maxBuffer: 1e8})
  if (result.status !== 0) throw new Error(`rusage.py failed: ${result.stderr}`)
  const usage = JSON.parse(result.stdout.trim().split('\n').pop())
  if (expect !== null && usage.status !== expect) throw new Error(`${argv.join(' ')} exited ${usage.status}:\n${result.stderr}`)
  return usage
}

const NODE_FLOOR = [process.execPath, '-e', '0']

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
  return {median, min: sorted[0], max: sorted.at(-1), n: sorted.length}
}

/**
 * Paired, interleaved: each pair runs the reference and the subject back to back, alternating which
 * goes first, so both see the same machine load. `prepare` gives each subject run fresh arguments.
 */
function paired(subject, {pairs = PAIRS, reference: referenceArgs = () => NODE_FLOOR, prepare = () => ({})} = {}) {
  // A reference gives argv, or [argv, options] like a subject.
  const reference = () => {
    const r = referenceArgs()
    return Array.isArray(r[0]) ? r : [r]
  }
  const ref = []
  const sub = []
  // One unrecorded round warms the file cache.
  measure(...reference())
  measure(...subject(prepare()))
  for (let i = 0; i < pairs; i++) {
    const args = subject(prepare())
    if (i % 2 === 0) {
      ref.push(measure(...reference()))
      sub.push(measure(...args))
    } else {
      sub.push(measure(...args))
      ref.push(measure(...reference()))
    }
  }
  return {ref, sub}
}

function summary(samples) {
  return {
    cpu_ms: stats(samples.map((s) => s.cpu_ms)),
    wall_ms: stats(samples.map((s) => s.wall_ms)),
    maxrss_mib: stats(samples.map((s) => s.maxrss_mib)),
  }
}

function record(row) {
  results.rows.push(row)
  const fmt = (s) => `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})`
  const parts = [`  ${row.name}:`]
  if (row.cpu_ms) parts.push(`cpu ${fmt(row.cpu_ms)} ms`)
  if (row.wall_ms) parts.push(`wall ${fmt(row.wall_ms)} ms`)
  if (row.ratio) parts.push(`${row.ratio.median.toFixed(2)}x node (${row.ratio.min.toFixed(2)}–${row.ratio.max.toFixed(2)})`)
  if (row.value !== undefined) parts.push(`${typeof row.value === 'number' ? row.value.toFixed(2) : row.value} ${row.unit ?? ''}`)
  if (row.note) parts.push(`— ${row.note}`)
  console.error(parts.join(' '))
}

/** A subject against `node -e 0`: CPU and wall of both, and the per-pair CPU ratio. */
function versusNode(name, subject, options = {}) {
  const {ref, sub} = paired(subject, options)
  const s = summary(sub)
  const r = summary(ref)
  const row = {name, ...s, node_cpu_ms: r.cpu_ms, node_wall_ms: r.wall_ms, ratio: stats(sub.map((x, i) => x.cpu_ms / ref[i].cpu_ms)), wall_ratio: stats(sub.map((x, i) => x.wall_ms / ref[i].wall_ms)), ...(options.target ? {target: options.target} : {})}
  record(row)
  return row
}

const defaultRun = (cwd) => [[process.execPath, bin, 'run', path.join(root, 'pipelines/default.yaml'), '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go', '--store', path.join(cwd, '.pipe')], {cwd}]

if (want('startup')) {
  console.error('start-up')
  versusNode('pipe --version', () => [[process.execPath, bin, '--version']], {target: '≤ 1.25× node'})
  versusNode('pipe validate pipelines/default.yaml', () => [[process.execPath, bin, 'validate', path.join(root, 'pipelines/default.yaml')]], {target: '≤ 1.6× node'})
}

if (want('instructions')) {
  console.error('start-up in instructions, under valgrind (a minute or more a command)')
  await (await import('./instructions.mjs')).instructionsScenario({bin, versus: opts.versus && path.resolve(opts.versus), env, record, table, root})
}

if (want('run')) {
  console.error('default pipeline, full PRD, fresh store per run')
  const fresh = freshDirs('pipe-bench-run-')
  versusNode('default run (full PRD, fresh store)', ({cwd}) => defaultRun(cwd), {target: '≤ 2.3× node; peak RSS ≤ 48 MiB', prepare: () => ({cwd: fresh()})})
}

// Issue 36's sections compare builds on their own (below); asked for alone, they skip these pairs.
const ownVersus = ['team', 'stall', 'enqueue', 'children', 'audit', 'instructions']
if (opts.versus && !sections.every((name) => ownVersus.includes(name))) {
  // Before/after on a noisy machine: the other build (--versus OLD/bin/run.js) is the reference of each pair.
  const old = path.resolve(opts.versus)
  const fresh = freshDirs('pipe-bench-ab-')
  const runArgs = (b) => [b, 'run', path.join(root, 'pipelines/default.yaml'), '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go']
  for (const [name, args, cwd] of [['--version', (b) => [b, '--version'], () => root], ['validate', (b) => [b, 'validate', path.join(root, 'pipelines/default.yaml')], () => root], ['default run (full PRD, fresh store)', runArgs, fresh]]) {
    const {ref, sub} = paired(() => [[process.execPath, ...args(bin)], {cwd: cwd()}], {reference: () => [[process.execPath, ...args(old)], {cwd: cwd()}]})
    record({name: `this build vs ${old}: ${name}`, ...summary(sub), old_cpu_ms: summary(ref).cpu_ms, old_maxrss_mib: summary(ref).maxrss_mib, value: stats(sub.map((x, k) => x.cpu_ms / ref[k].cpu_ms)).median, unit: '× the old build\'s CPU (median of per-pair ratios)', note: `old CPU ${summary(ref).cpu_ms.median.toFixed(1)} ms, old peak RSS ${summary(ref).maxrss_mib.median.toFixed(1)} MiB`})
  }
}

function chain(n) {
  const steps = Array.from({length: n}, (_, i) => `  - {id: s${i}, kind: noop${i + 1 < n ? `, next: s${i + 1}` : ''}}`)
  return `version: 1\nname: chain${n}\nsteps:\n${steps.join('\n')}\n`
}

/** CPU per step: a long pipeline and a one-step pipeline, paired; (long − short) / extra steps. */
function perStep(name, longFile, shortFile, extraSteps, target, pairs) {
  const cwd = path.dirname(longFile)
  let i = 0
  const store = () => path.join(cwd, `store-${i++}`)
  const {ref, sub} = paired(() => [[process.execPath, bin, 'run', longFile, '--text', 'x', '--store', store()], {cwd}], {
    pairs,
    reference: () => [process.execPath, bin, 'run', shortFile, '--text', 'x', '--store', store()],
  })
  const per = stats(sub.map((x, k) => (x.cpu_ms - ref[k].cpu_ms) / extraSteps))
  const wall = stats(sub.map((x, k) => (x.wall_ms - ref[k].wall_ms) / extraSteps))
  record({name, value: per.median, unit: 'ms CPU per step', per_step_cpu_ms: per, per_step_wall_ms: wall, long_cpu_ms: stats(sub.map((x) => x.cpu_ms)), short_cpu_ms: stats(ref.map((x) => x.cpu_ms)), target, note: `spread ${per.min.toFixed(2)}–${per.max.toFixed(2)}; wall ${wall.median.toFixed(2)} ms per step`})
}

if (want('steps')) {
  console.error('engine cost per step: 500 no-op steps vs 1, paired')
  const cwd = tmp('pipe-bench-steps-')
  writeFileSync(path.join(cwd, 'chain500.yaml'), chain(500))
  writeFileSync(path.join(cwd, 'chain1.yaml'), chain(1))
  perStep('engine cost per step (500-step chain of noop)', path.join(cwd, 'chain500.yaml'), path.join(cwd, 'chain1.yaml'), 499, '≤ 0.5 ms', Math.min(PAIRS, 7))
  removeLater(cwd)
}

if (want('foreach')) {
  console.error('foreach of 100 items × 3 noop steps, concurrency 4, paired with a one-step run')
  const cwd = tmp('pipe-bench-foreach-')
  const items = Array.from({length: 100}, (_, i) => i).join(', ')
  writeFileSync(path.join(cwd, 'foreach.yaml'), `version: 1\nname: fan\nsteps:\n  - id: each\n    kind: foreach\n    items: "\${{ [${items}] }}"\n    concurrency: 4\n    steps:\n      - {id: a, kind: noop, next: b}\n      - {id: b, kind: noop, next: c}\n      - {id: c, kind: noop}\n`)
  writeFileSync(path.join(cwd, 'chain1.yaml'), chain(1))
  perStep('foreach 100 × 3 noop, concurrency 4, per child step', path.join(cwd, 'foreach.yaml'), path.join(cwd, 'chain1.yaml'), 300, '≤ 1 ms', Math.min(PAIRS, 7))
  removeLater(cwd)
}

/** A scenario's own table (Markdown), printed now and again at the end with the whole results. */
function table(title, headers, rows) {
  const text = [`${title}`, '', `| ${headers.join(' | ')} |`, `|${headers.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n')
  results.tables.push(text)
  console.error(`\n${text}\n`)
}

if (want('workers')) {
  console.error('team store on PostgreSQL: steps/s with 1 and 3 workers, dispatch latency, failover after SIGKILL')
  await (await import('./postgres.mjs')).teamBench({bin, env, record, root})
}

// Issue 36's scenarios, each on a cluster of its own. With --versus OLD/bin/run.js each runs for the
// other build too, right after this one's, so both see about the same machine.
const builds = [{bin, label: ''}, ...(opts.versus ? [{bin: path.resolve(opts.versus), label: 'versus build: '}] : [])]
for (const [section, file, fn] of [
  ['team', './team.mjs', 'teamScenario'],
  ['stall', './stall.mjs', 'stallScenario'],
  ['enqueue', './enqueue.mjs', 'enqueueScenario'],
  ['children', './children.mjs', 'childrenScenario'],
  ['audit', './audit.mjs', 'auditScenario'],
]) {
  if (!want(section)) continue
  const scenario = (await import(file))[fn]
  for (const build of builds) {
    console.error(`${section}: ${build.bin} (load ${os.loadavg().map((x) => x.toFixed(2)).join(' ')})`)
    // A section that fails is a row that says so (and a non-zero exit), and the others still run.
    try {
      await scenario({...build, env, record, table, root, pairs: PAIRS, versusNode, measure, stores: opts.stores})
    } catch (error) {
      console.error(`${section} failed: ${error.stack ?? error}`)
      record({name: `${build.label}${section}`, value: 'failed', unit: '', note: String(error.message ?? error).replace(/\s+/g, ' ').slice(0, 300)})
      process.exitCode = 1
    }
  }
}

if (want('fsyncs') && opts.bin) console.error('fsyncs: counted in this checkout only (not with --bin)')
if (want('fsyncs') && !opts.bin) {
  // Counted in-process (the store counts its own fsync/fdatasync calls), on real runs with sync on.
  console.error('fsyncs per step')
  const cwd = tmp('pipe-bench-fsync-')
  writeFileSync(path.join(cwd, 'chain50.yaml'), chain(50))
  const script = `
    const {durability} = await import(${JSON.stringify(path.join(root, 'dist/util/fs.js'))})
    const {startSession} = await import(${JSON.stringify(path.join(root, 'dist/app/sessions/start.js'))})
    const out = {}
    for (const [name, extra] of [['default', {pipeline: ${JSON.stringify(path.join(root, 'pipelines/default.yaml'))}, input: ${JSON.stringify(path.join(root, 'examples/full-prd.md'))}, decision: 'go'}], ['chain50', {pipeline: 'chain50.yaml', text: 'x'}]]) {
      durability.count = 0
      const o = await startSession({cwd: process.cwd(), store: '.pipe-' + name, provider: 'offline', env: {}, ...extra})
      const {readdirSync} = await import('node:fs')
      const snapshots = readdirSync('.pipe-' + name + '/runs/' + o.run_id + '/snapshots').filter((n) => n.endsWith('.json')).length
      out[name] = {fsyncs: durability.count, steps: snapshots, status: o.status}
    }
    console.log(JSON.stringify(out))
  `
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], {cwd, env, encoding: 'utf8'})
  if (result.status !== 0) throw new Error(result.stderr)
  const counts = JSON.parse(result.stdout.trim().split('\n').pop())
  for (const [name, c] of Object.entries(counts)) {
    record({name: `fsyncs per step, ${name === 'default' ? 'default run (full PRD)' : '50-step noop chain'}`, value: c.fsyncs / c.steps, unit: 'fsyncs per step', fsyncs: c.fsyncs, steps: c.steps, target: '≤ 2', note: `${c.fsyncs} fsyncs over ${c.steps} snapshots (whole run, set-up included)`})
  }
  removeLater(cwd)
}

/**
 * Several subjects measured in rounds: each round runs every subject once, back to back, starting at
 * a different one each round (rotation), so all see the same load. `prepare` gives each round fresh
 * arguments (a fresh store, a fresh checkpoint file). One unrecorded round first warms the file cache.
 */
function rounds(subjects, {pairs = PAIRS, prepare = () => ({})} = {}) {
  const samples = subjects.map(() => [])
  const argsOf = (ctx) => subjects.map((subject) => subject(ctx))
  for (const args of argsOf(prepare())) measure(...args)
  for (let i = 0; i < pairs; i++) {
    const args = argsOf(prepare())
    for (let k = 0; k < subjects.length; k++) {
      const j = (i + k) % subjects.length
      samples[j].push(measure(...args[j]))
    }
  }
  return samples
}

const peerDir = path.join(root, 'bench', 'peer')

/** bench/peer's own dependencies, installed when its node_modules is missing: {ok, ...} or {ok: false, reason}. */
function installPeer() {
  const versions = () => {
    const version = (name) => JSON.parse(readFileSync(path.join(peerDir, 'node_modules', name, 'package.json'), 'utf8')).version
    try {
      return {langgraph: version('@langchain/langgraph'), checkpoint_sqlite: version('@langchain/langgraph-checkpoint-sqlite'), better_sqlite3: version('better-sqlite3')}
    } catch (error) {
      return {error: `bench/peer/node_modules is incomplete (${error.message}); remove it to reinstall`}
    }
  }
  const installed = (fields) => {
    const v = versions()
    return v.error ? {ok: false, reason: v.error} : {ok: true, ...fields, versions: v}
  }
  if (existsSync(path.join(peerDir, 'node_modules'))) return installed({installed: 'already'})
  const args = existsSync(path.join(peerDir, 'package-lock.json')) ? ['ci', '--no-audit', '--no-fund'] : ['install', '--no-audit', '--no-fund']
  console.error(`  installing the peer's dependencies: (cd bench/peer && npm ${args.join(' ')}) — builds better-sqlite3 when no prebuilt binary can be fetched`)
  const started = Date.now()
  // npm's own output goes to stderr: stdout carries the results table.
  const result = spawnSync('npm', args, {cwd: peerDir, stdio: ['ignore', 2, 2], shell: process.platform === 'win32'})
  const seconds = (Date.now() - started) / 1000
  if (result.error || result.status !== 0) {
    rmSync(path.join(peerDir, 'node_modules'), {recursive: true, force: true})
    return {ok: false, reason: `npm ${args[0]} in bench/peer ${result.error ? `could not start: ${result.error.message}` : `exited ${result.status}`} after ${seconds.toFixed(0)} s`}
  }
  console.error(`  installed in ${seconds.toFixed(0)} s`)
  return installed({installed: `npm ${args[0]}`, seconds})
}

if (want('peer')) {
  console.error('peer: pipe against LangGraph.js with a SQLite checkpointer (durability "sync"), same requirement, interleaved')
  const install = installPeer()
  results.peer = install
  const skip = (problem) => {
    // One line: the reason ends up in a Markdown table cell.
    const reason = problem.replace(/\s+/g, ' ')
    console.error(`  peer skipped: ${reason}`)
    record({name: 'peer (LangGraph.js)', value: 'skipped', unit: '', note: reason})
  }
  const peerScript = path.join(peerDir, 'graph.mjs')
  const requirement = ['--input', path.join(root, 'examples/one-sentence.txt'), '--answers', path.join(root, 'examples/one-sentence.answers.yaml'), '--decision', 'go']
  const pipeRun = (cwd) => [[process.execPath, bin, 'run', path.join(root, 'pipelines/default.yaml'), ...requirement, '--store', path.join(cwd, '.pipe')], {cwd}]
  const peerRun = (dir) => [[process.execPath, peerScript, ...requirement, '--out', dir]]
  const fresh = freshDirs('pipe-bench-peer-')
  // One checked run of each: both finish, and take the same path (one clarify round).
  const check = () => {
    const cwd = fresh()
    const [pipeArgv] = pipeRun(cwd)
    const pipeCheck = spawnSync(pipeArgv[0], [...pipeArgv.slice(1), '--json'], {cwd, env, encoding: 'utf8'})
    const pipeOut = pipeCheck.status === 0 ? JSON.parse(pipeCheck.stdout) : undefined
    if (!pipeOut || pipeOut.status !== 'succeeded') return `pipe's run did not succeed (exit ${pipeCheck.status}): ${pipeCheck.stderr.slice(0, 500)}`
    const [peerArgv] = peerRun(fresh())
    const peerCheck = spawnSync(peerArgv[0], peerArgv.slice(1), {env, encoding: 'utf8'})
    const peerOut = peerCheck.status === 0 ? JSON.parse(peerCheck.stdout.trim().split('\n').pop()) : undefined
    if (!peerOut || peerOut.status !== 'published') return `the peer did not finish (exit ${peerCheck.status}; remove bench/peer/node_modules to reinstall it): ${peerCheck.stderr.slice(0, 500)}`
    // The peer is a copy of the default pipeline's shape: both must have taken the one clarify round.
    if (pipeOut.steps_run !== 11 || peerOut.rounds !== 1) return `the two sides did not take the same path (pipe ran ${pipeOut.steps_run} steps, expected 11; the peer took ${peerOut.rounds} clarify rounds, expected 1): has pipelines/default.yaml changed shape? Update bench/peer/graph.mjs to match`
    results.peer.check = {pipe: pipeOut, peer: peerOut}
    console.error(`  pipe: ${pipeOut.steps_run} steps, ${pipeOut.spec_version}; peer: ${peerOut.checkpoints} checkpoints, ${peerOut.versions} spec versions, ${peerOut.rounds} clarify round, journal_mode ${peerOut.journal_mode}, synchronous ${peerOut.synchronous}`)
    return undefined
  }
  const problem = install.ok ? check() : install.reason
  if (problem) skip(problem)
  else {
    const [node, pipe, peer] = rounds([() => [NODE_FLOOR], ({cwd}) => pipeRun(cwd), ({dir}) => peerRun(dir)], {prepare: () => ({cwd: fresh(), dir: fresh()})})
    const vsNode = (xs) => stats(xs.map((x, i) => x.cpu_ms / node[i].cpu_ms))
    const nodeCpu = summary(node).cpu_ms
    const v = install.versions
    record({name: 'peer: pipe, default pipeline with one clarify round (fresh store)', ...summary(pipe), ratio: vsNode(pipe), node_cpu_ms: nodeCpu, node_wall_ms: summary(node).wall_ms})
    record({name: `peer: LangGraph.js ${v.langgraph}, same shape, SqliteSaver ${v.checkpoint_sqlite} durability "sync" (fresh file)`, ...summary(peer), ratio: vsNode(peer), node_cpu_ms: nodeCpu, node_wall_ms: summary(node).wall_ms})
    const cpuRatio = stats(pipe.map((x, i) => x.cpu_ms / peer[i].cpu_ms))
    const wallRatio = stats(pipe.map((x, i) => x.wall_ms / peer[i].wall_ms))
    const rssRatio = stats(pipe.map((x, i) => x.maxrss_mib / peer[i].maxrss_mib))
    record({name: 'peer: pipe / LangGraph.js, per pair', value: cpuRatio.median, unit: '× the peer\'s CPU (median of per-pair ratios)', cpu_ratio: cpuRatio, wall_ratio: wallRatio, rss_ratio: rssRatio, note: `CPU spread ${cpuRatio.min.toFixed(2)}–${cpuRatio.max.toFixed(2)}; wall ${wallRatio.median.toFixed(2)}×, peak RSS ${rssRatio.median.toFixed(2)}×`})

    // Per step: pipe's chain of noop steps (the `steps` section's chain) against a chain of cheap
    // LangGraph nodes, each as long − one-step, in the same rounds.
    console.error('peer per step: 500-step chain against a 1-step chain, both sides, interleaved')
    const chainDir = fresh()
    writeFileSync(path.join(chainDir, 'chain500.yaml'), chain(500))
    writeFileSync(path.join(chainDir, 'chain1.yaml'), chain(1))
    const pipeChain = (file, cwd) => [[process.execPath, bin, 'run', path.join(chainDir, file), '--text', 'x', '--store', path.join(cwd, '.pipe')], {cwd}]
    const peerChain = (steps, dir) => [[process.execPath, peerScript, '--chain', String(steps), '--out', dir]]
    const [p500, p1, l500, l1] = rounds([
      ({a}) => pipeChain('chain500.yaml', a),
      ({b}) => pipeChain('chain1.yaml', b),
      ({c}) => peerChain(500, c),
      ({d}) => peerChain(1, d),
    ], {pairs: Math.min(PAIRS, 7), prepare: () => ({a: fresh(), b: fresh(), c: fresh(), d: fresh()})})
    const perStepOf = (long, short) => long.map((x, i) => (x.cpu_ms - short[i].cpu_ms) / 499)
    const pipePer = perStepOf(p500, p1)
    const peerPer = perStepOf(l500, l1)
    const per = (name, xs, long, short) => {
      const s = stats(xs)
      record({name, value: s.median, unit: 'ms CPU per step', per_step_cpu_ms: s, long_cpu_ms: stats(long.map((x) => x.cpu_ms)), short_cpu_ms: stats(short.map((x) => x.cpu_ms)), long_maxrss_mib: stats(long.map((x) => x.maxrss_mib)), note: `spread ${s.min.toFixed(2)}–${s.max.toFixed(2)}; 500 steps ${stats(long.map((x) => x.cpu_ms)).median.toFixed(0)} ms, 1 step ${stats(short.map((x) => x.cpu_ms)).median.toFixed(0)} ms CPU`})
    }
    per('peer per step: pipe, 500-step noop chain', pipePer, p500, p1)
    per('peer per step: LangGraph.js, 500-node chain, durability "sync"', peerPer, l500, l1)
    const stepRatio = stats(pipePer.map((x, i) => x / peerPer[i]))
    record({name: 'peer per step: pipe / LangGraph.js, per round', value: stepRatio.median, unit: '× the peer\'s CPU per step', step_ratio: stepRatio, note: `spread ${stepRatio.min.toFixed(2)}–${stepRatio.max.toFixed(2)}`})
  }
}

/** A populated store of `size` runs: reused from --stores when a finished one is there. */
function storeOf(size) {
  const dir = opts.stores ? path.join(path.resolve(opts.stores), String(size)) : tmp(`pipe-bench-store-${size}-`)
  const done = path.join(dir, 'populated.json')
  if (existsSync(done)) return {dir, ...JSON.parse(readFileSync(done, 'utf8')), reused: true}
  rmSync(dir, {recursive: true, force: true})
  mkdirSync(dir, {recursive: true})
  console.error(`  populating ${size} runs through the engine (fsync off while populating)...`)
  const result = spawnSync(process.execPath, [path.join(root, 'bench/populate.mjs'), '--store', path.join(dir, '.pipe'), '--runs', String(size)], {env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1e8})
  if (result.status !== 0) throw new Error(`populate ${size} failed`)
  const info = JSON.parse(result.stdout.trim().split('\n').pop())
  writeFileSync(done, JSON.stringify(info))
  return {dir, ...info, reused: false}
}

if (want('history')) {
  const sizes = opts.sizes.split(',').map(Number)
  const stores = {}
  for (const size of sizes) {
    stores[size] = storeOf(size)
    record({name: `populate ${size} runs`, value: stores[size].seconds, unit: 's', note: stores[size].reused ? 'reused from --stores' : 'fsync off'})
  }
  const pairs = Math.min(PAIRS, 11)
  const commands = {
    'runs list': () => ['runs', 'list'],
    'spec list': () => ['spec', 'list'],
    'ledger list': () => ['ledger', 'list'],
    'snapshot show RUN': (s) => ['snapshot', 'show', s.sample.run],
  }
  const byCommand = {}
  for (const [label, args] of Object.entries(commands)) {
    console.error(`${label} as history grows`)
    for (const size of sizes) {
      const s = stores[size]
      const row = versusNode(`${label}, ${size} runs`, () => [[process.execPath, bin, ...args(s), '--store', path.join(s.dir, '.pipe')], {cwd: s.dir}], {pairs})
      ;(byCommand[label] ??= {})[size] = row
    }
    const small = byCommand[label][Math.min(...sizes)]
    for (const size of sizes.filter((x) => x !== Math.min(...sizes))) {
      const row = byCommand[label][size]
      row.vs_smallest_cpu = row.cpu_ms.median / small.cpu_ms.median
      row.target = '≤ 1.3× the 10-run figure'
    }
  }
  console.error('audit verify, whole store, whole process')
  // CPU per run is the slope between store sizes, (CPU at N − CPU at the smallest) / (N − smallest runs),
  // so that start-up, paid once per process, is not spread over the runs.
  const audits = {}
  for (const size of sizes) {
    const s = stores[size]
    const {ref, sub} = paired(() => [[process.execPath, bin, 'audit', 'verify', '--store', path.join(s.dir, '.pipe')], {cwd: s.dir}], {pairs: size >= 10000 ? 3 : size >= 1000 ? 5 : pairs})
    audits[size] = {runs: s.runs, ...summary(sub), node_cpu_ms: summary(ref).cpu_ms}
  }
  const smallest = Math.min(...sizes)
  for (const size of sizes) {
    const a = audits[size]
    const slope = size === smallest ? undefined : (a.cpu_ms.median - audits[smallest].cpu_ms.median) / (a.runs - audits[smallest].runs)
    record({name: `audit verify, whole store of ${size} runs`, ...a, ratio: undefined, ...(slope === undefined ? {} : {value: slope, unit: 'ms CPU per run', target: '≤ 1 ms per run', note: `slope from the ${smallest}-run store`})})
  }
  if (!opts.stores) for (const size of sizes) rmSync(stores[size].dir, {recursive: true, force: true})
}

for (const dir of leftovers) rmSync(dir, {recursive: true, force: true})
rmSync(env.PIPE_HOME, {recursive: true, force: true})
results.ended_at = new Date().toISOString()
results.machine.loadavg_at_end = os.loadavg()

function markdown() {
  const f = (s) => (s ? `${s.median.toFixed(1)} (${s.min.toFixed(1)}–${s.max.toFixed(1)})` : '')
  const lines = [
    `pipe benchmark, ${results.started_at} — ${results.machine.cores} cores (${results.machine.cpu}), node ${results.machine.node}, load ${results.machine.loadavg_at_start.map((x) => x.toFixed(2)).join(' ')} at start, ${results.machine.loadavg_at_end.map((x) => x.toFixed(2)).join(' ')} at end; ${PAIRS} pairs unless noted.`,
    'Medians with (min–max). CPU = user+sys of the child process (wait4). "× node" = median of per-pair CPU ratios to `node -e 0` run in the same pair.',
    '',
    '| figure | CPU ms | wall ms | × node (CPU) | peak RSS MiB | other | target |',
    '|---|---|---|---|---|---|---|',
  ]
  for (const r of results.rows) {
    const other = r.value !== undefined ? `${typeof r.value === 'number' ? r.value.toFixed(2) : r.value} ${r.unit ?? ''}${r.note ? ` (${r.note})` : ''}` : r.vs_smallest_cpu ? `${r.vs_smallest_cpu.toFixed(2)}× the smallest store` : ''
    const ratio = r.ratio ? `${r.ratio.median.toFixed(2)} (${r.ratio.min.toFixed(2)}–${r.ratio.max.toFixed(2)})` : ''
    lines.push(`| ${r.name} | ${f(r.cpu_ms)} | ${f(r.wall_ms)} | ${ratio} | ${r.maxrss_mib ? r.maxrss_mib.median.toFixed(1) : ''} | ${other} | ${r.target ?? ''} |`)
  }
  const node = results.rows.find((r) => r.node_cpu_ms)
  if (node) lines.push('', `\`node -e 0\` in the same pairs (first row): CPU ${f(node.node_cpu_ms)} ms, wall ${f(node.node_wall_ms)} ms.`)
  for (const text of results.tables) lines.push('', text)
  return `${lines.join('\n')}\n`
}

mkdirSync(opts.out, {recursive: true})
writeFileSync(path.join(opts.out, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`)
writeFileSync(path.join(opts.out, 'latest.md'), markdown())
process.stdout.write(markdown())
