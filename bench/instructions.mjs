// Bench section `instructions` (issue 38): the start-up figures counted in instructions, not
// seconds. `valgrind --tool=cachegrind --cache-sim=no` counts every instruction a process and its
// threads execute; the count is the same to ~1% from one run to the next whatever else the machine
// is doing, where CPU time on a shared, throttled machine varied tenfold (bench/README.md, "Issue
// 38: instructions counted"). It is a proxy: it leaves out the kernel's time (system calls, page
// faults) and what a cache miss costs, so it is read beside the CPU figures, never instead.
// - Each command runs once under valgrind (~1 min each here), stdout and stderr to pipes as in the
//   paired CPU figures; the ratio is to `node -e 0` counted the same way.
// - valgrind's CPU hides the SHA extensions (the machine's SHA-256 runs ~1.8 GB/s natively), so
//   OpenSSL takes a slower path for the code caches' hashes: the instructions in sha256_block* are
//   also given apart, and the "less SHA-256" column leaves them out.
import {spawnSync} from 'node:child_process'
import {copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'

/** Total instructions and those in SHA-256's block functions, from a cachegrind out-file. */
function counts(file) {
  let total = 0
  let sha = 0
  let inSha = false
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (line.startsWith('fn=')) inSha = /sha256_block/.test(line)
    else if (line.startsWith('summary:')) total = Number(line.slice('summary:'.length).trim())
    else if (inSha && /^\d/.test(line)) sha += Number(line.split(' ')[1] ?? 0)
  }
  return {total, sha}
}

/** One process under cachegrind; its instruction counts. */
function count(argv, {cwd, env}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-cg-'))
  try {
    const out = path.join(dir, 'cachegrind.out')
    const run = spawnSync('valgrind', ['--tool=cachegrind', '--cache-sim=no', `--cachegrind-out-file=${out}`, `--log-file=${path.join(dir, 'log')}`, ...argv], {cwd, env, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1e8})
    if (run.status !== 0) throw new Error(`${argv.join(' ')} under valgrind exited ${run.status}: ${run.stderr}`)
    return counts(out)
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
}

export async function instructionsScenario({bin, versus, env, record, table, root}) {
  if (spawnSync('valgrind', ['--version']).status !== 0) {
    record({name: 'instructions', value: 'not counted: valgrind is not installed (apt-get install valgrind)', unit: ''})
    return
  }
  const work = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-instructions-'))
  try {
    let fresh = 0
    const runDir = () => {
      const dir = path.join(work, String(fresh++))
      mkdirSync(dir)
      return dir
    }
    const pipeline = path.join(root, 'pipelines/default.yaml')
    const withPolicy = (dir) => {
      copyFileSync(path.join(root, 'policy.yaml'), path.join(dir, 'policy.yaml'))
      return dir
    }
    const commands = [
      ['pipe --version', (b) => [b, '--version'], () => root],
      ['pipe validate pipelines/default.yaml', (b) => [b, 'validate', pipeline], () => root],
      ['default run (full PRD, fresh store)', (b) => [b, 'run', pipeline, '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go'], runDir],
      // A policy.yaml beside the run (the checkout's own): its tool_versions run a command.
      ['default run beside policy.yaml', (b) => [b, 'run', pipeline, '--input', path.join(root, 'examples/full-prd.md'), '--decision', 'go'], () => withPolicy(runDir())],
    ]
    const node = count([process.execPath, '-e', '0'], {cwd: root, env})
    const rows = []
    for (const [name, args, cwd] of commands) {
      const mine = count([process.execPath, ...args(bin)], {cwd: cwd(), env})
      const old = versus ? count([process.execPath, ...args(versus)], {cwd: cwd(), env}) : undefined
      const ratio = mine.total / node.total
      const bare = (mine.total - mine.sha) / node.total
      record({name: `instructions: ${name}`, value: mine.total / 1e6, unit: `M instructions, ${ratio.toFixed(2)}× node -e 0 (${bare.toFixed(2)}× less SHA-256)${old ? `, ${(mine.total / old.total).toFixed(3)}× the versus build's ${(old.total / 1e6).toFixed(1)} M` : ''}`, instructions: mine, versus_instructions: old, node_instructions: node})
      rows.push([name, (mine.total / 1e6).toFixed(1), `${ratio.toFixed(2)}×`, `${bare.toFixed(2)}×`, (mine.sha / 1e6).toFixed(1), old ? `${(old.total / 1e6).toFixed(1)} (${(mine.total / old.total).toFixed(3)}×)` : ''])
    }
    table(`Instructions (valgrind cachegrind; \`node -e 0\`: ${(node.total / 1e6).toFixed(1)} M)`, ['command', 'M instructions', '× node -e 0', '× node, less SHA-256', 'of which SHA-256 (M)', 'versus build (M)'], rows)
  } finally {
    rmSync(work, {recursive: true, force: true})
  }
}
