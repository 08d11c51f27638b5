// The team store's figures (bench section `workers`): steps/s of cheap steps driven by 1 and by 3
// `pipe worker` processes on one PostgreSQL, dispatch latency (a detached run's creation to its first
// step), and failover after SIGKILL (the holder killed to another worker holding the run). A
// throwaway cluster (bench/cluster.mjs) with its default durability (fsync and synchronous_commit on,
// as a team would run it), on 127.0.0.1 with a free port. Every figure is read from the database's own records.
import {spawn, spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {startCluster, wait} from './cluster.mjs'

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const chain = (name, n) =>
  `version: 1\nname: ${name}\nsteps:\n${Array.from({length: n}, (_, i) => `  - {id: s${i}, kind: noop${i + 1 < n ? `, next: s${i + 1}` : ''}}`).join('\n')}\n`

export async function teamBench({bin, env, record, root}) {
  // Without commit timestamps, as this section has always measured.
  const cluster = await startCluster({root, section: 'workers', commitTimestamps: false})
  if (!cluster) return
  const work = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-team-'))
  const children = new Set()
  try {
    writeFileSync(path.join(work, 'chain20.yaml'), chain('chain20', 20))
    writeFileSync(path.join(work, 'chain1.yaml'), chain('chain1', 1))
    writeFileSync(path.join(work, 'sleepy.yaml'), `version: 1\nname: sleepy\nsteps:\n  - {id: wait, kind: command, run: [sleep, "5"], timeout_ms: 60000}\n`)
    writeFileSync(path.join(work, 'policy.yaml'), 'version: 1\nallowed_commands:\n  - [sleep, "{arg}"]\nsandbox: off\nmax_retries_default: 0\n')
    const database = async () => {
      const {name, url} = await cluster.database()
      return {url, client: await cluster.client(name)}
    }
    const detach = (url, file, extra = []) => {
      const result = spawnSync(process.execPath, [bin, 'run', file, '--text', 'x', '--detach', '--store', url, '--json', ...extra], {cwd: work, env, encoding: 'utf8'})
      if (result.status !== 0) throw new Error(`detach failed: ${result.stderr}`)
      return JSON.parse(result.stdout).run_id
    }
    const worker = (url, args, extra = {}) => {
      const child = spawn(process.execPath, [bin, 'worker', '--store', url, ...args], {cwd: work, env: {...env, ...extra}, stdio: ['ignore', 'ignore', 'pipe']})
      let said = ''
      child.stderr.setEncoding('utf8').on('data', (d) => (said += d))
      const exited = new Promise((resolve) => child.on('exit', resolve))
      children.add(child)
      exited.then(() => children.delete(child))
      // Its first line comes once it has connected and looks at the queue.
      return {child, exited, ready: () => said.includes(`(pid ${child.pid})`)}
    }
    const until = async (check, timeoutMs = 300000) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const value = await check()
        if (value) return value
        if (Date.now() > deadline) throw new Error('team bench: timed out')
        await wait(5)
      }
    }
    const count = async (client) => Number((await client.query('SELECT count(*) AS n FROM pipe_snapshots')).rows[0].n)

    // Throughput: 30 runs × 20 noop steps queued first; the clock runs from the first snapshot to the last.
    for (const workers of [1, 3]) {
      const {url, client} = await database()
      await client.query('SELECT 1')
      const runs = 30
      // Created in parallel (each detach is its own process), before any worker starts.
      await Promise.all(
        Array.from({length: 6}, async () => {
          for (let i = 0; i < runs / 6; i++)
            await new Promise((resolve, reject) => {
              const child = spawn(process.execPath, [bin, 'run', path.join(work, 'chain20.yaml'), '--text', 'x', '--detach', '--store', url, '--json'], {cwd: work, env, stdio: 'ignore'})
              child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`detach exited ${code}`))))
            })
        }),
      )
      const total = runs * 20
      const team = Array.from({length: workers}, () => worker(url, ['--concurrency', '4'], {PIPE_WORKER_POLL_MS: '50'}))
      await until(async () => (await count(client)) > 0)
      const first = Date.now()
      await until(async () => (await count(client)) >= total)
      const seconds = (Date.now() - first) / 1000
      for (const w of team) w.child.kill('SIGTERM')
      await Promise.all(team.map((w) => w.exited))
      record({
        name: `team store: steps/s, ${workers} worker(s) × concurrency 4 (30 runs × 20 noop steps)`,
        value: total / seconds,
        unit: 'steps/s',
        target: workers === 3 ? '≥ 300 steps/s' : undefined,
        note: `${total} steps in ${seconds.toFixed(2)} s, first snapshot to last`,
      })
      await client.end()
    }

    // Dispatch: one idle worker; a one-step run created, then its first step's start, from the records.
    for (const poll of ['500', '50']) {
      const {url, client} = await database()
      const idle = worker(url, [], {PIPE_WORKER_POLL_MS: poll})
      const samples = []
      for (let i = 0; i < 11; i++) {
        const runId = detach(url, path.join(work, 'chain1.yaml'))
        const row = await until(async () => (await client.query('SELECT body FROM pipe_snapshots WHERE run_id = $1 AND seq = 1', [runId])).rows[0])
        const created = JSON.parse((await client.query('SELECT line FROM pipe_events WHERE run_id = $1 AND n = 1', [runId])).rows[0].line).at
        samples.push(Date.parse(JSON.parse(row.body).step.started_at) - Date.parse(created))
      }
      idle.child.kill('SIGTERM')
      await idle.exited
      record({
        name: `team store: dispatch latency, run created to its first step (PIPE_WORKER_POLL_MS=${poll})`,
        value: median(samples),
        unit: 'ms (median of 11)',
        note: `min ${Math.min(...samples)}, max ${Math.max(...samples)}; an idle worker looks at the queue every ${poll} ms`,
      })
      await client.end()
    }

    // Failover: the holder of a run SIGKILLed; another worker, started and polling, holds it next.
    for (const lease of ['3000']) {
      const samples = []
      for (let i = 0; i < 3; i++) {
        // A database of its own each time: a run left by the last round's workers would be claimed first.
        const {url, client} = await database()
        const runId = detach(url, path.join(work, 'sleepy.yaml'), ['--policy', path.join(work, 'policy.yaml')])
        const a = worker(url, [], {PIPE_WORKER_POLL_MS: '100', PIPE_LEASE_MS: lease})
        const holderOf = async () => (await client.query('SELECT holder, epoch FROM pipe_runs WHERE run_id = $1', [runId])).rows[0]
        await until(async () => (await holderOf()).holder?.includes(`"pid":${a.child.pid}`))
        const b = worker(url, [], {PIPE_WORKER_POLL_MS: '100', PIPE_LEASE_MS: lease})
        await until(async () => b.ready())
        const epoch = Number((await holderOf()).epoch)
        const killed = Date.now()
        a.child.kill('SIGKILL')
        await until(async () => {
          const h = await holderOf()
          return Number(h.epoch) > epoch && h.holder?.includes(`"pid":${b.child.pid}`)
        })
        samples.push(Date.now() - killed)
        b.child.kill('SIGKILL')
        await Promise.all([a.exited, b.exited])
        await client.end()
      }
      record({
        name: `team store: failover after SIGKILL of the holder (PIPE_LEASE_MS=${lease}, poll 100 ms)`,
        value: median(samples),
        unit: 'ms (median of 3)',
        note: `min ${Math.min(...samples)}, max ${Math.max(...samples)}; at most the lease left plus one poll`,
      })
    }
  } finally {
    for (const child of children) child.kill('SIGKILL')
    try {
      await cluster.stop()
    } finally {
      rmSync(work, {recursive: true, force: true})
    }
  }
}
