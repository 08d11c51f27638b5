// A throwaway PostgreSQL cluster for the bench's team-store sections, and the pipe processes they
// start against it. Debian's postgresql package, initdb'd in a temp folder and started on 127.0.0.1
// with a free port, with its default durability (fsync and synchronous_commit on, as a team would
// run it); as root, initdb runs as the `postgres` user. track_commit_timestamp is on so that figures
// can be read from the time each row's transaction committed (pg_xact_commit_timestamp(xmin)), not
// from a poll of the bench's: it adds a few bytes of WAL per commit, to pipe and to the reference
// job loop alike.
import {execFileSync, spawn, spawnSync} from 'node:child_process'
import {chownSync, existsSync, mkdtempSync, readdirSync, rmSync} from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'

export function postgresBin() {
  const base = '/usr/lib/postgresql'
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : []
  return versions.length ? path.join(base, versions[0], 'bin') : null
}

const freePort = () =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address()
      server.close(() => resolve(port))
    })
  })

const asPostgres = (command, args) => (process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args])
const runAsPostgres = (command, args) => execFileSync(...asPostgres(command, args), {stdio: ['ignore', 'pipe', 'pipe']})
export const wait = (ms) => new Promise((r) => setTimeout(r, ms))

/** Checks `check` every `everyMs` until it gives a truthy value; `what` names it in the timeout's error. */
export async function until(what, check, {timeoutMs = 300000, everyMs = 5} = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`bench: timed out waiting for ${what}`)
    await wait(everyMs)
  }
}

export const pgModule = async (root) => (await import(path.join(root, 'node_modules', 'pg', 'lib', 'index.js'))).default

/** Starts a cluster, or returns null (and says why) when PostgreSQL is not installed. */
export async function startCluster({root, section, commitTimestamps = true}) {
  const pgBin = postgresBin()
  if (!pgBin) {
    console.error(`${section}: skipped, PostgreSQL is not installed (Debian: apt-get install postgresql)`)
    return null
  }
  const pg = await pgModule(root)
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-bench-pg-'))
  if (process.getuid?.() === 0) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres'])), Number(execFileSync('id', ['-g', 'postgres'])))
  const data = path.join(dir, 'data')
  const port = await freePort()
  runAsPostgres(path.join(pgBin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C'])
  const ctl = (...args) => runAsPostgres(path.join(pgBin, 'pg_ctl'), ['-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '60', ...args])
  ctl('-o', `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c max_connections=200${commitTimestamps ? ' -c track_commit_timestamp=on' : ''}`, 'start')
  const url = (name) => `postgres://postgres@127.0.0.1:${port}/${name}`
  const admin = new pg.Client({connectionString: url('postgres')})
  await admin.connect()
  const version = (await admin.query('SHOW server_version')).rows[0].server_version
  let made = 0
  return {
    pg,
    port,
    version,
    admin,
    url,
    /** A new database (empty, or a copy of `template`): its name and URL. */
    async database(template) {
      const name = `bench_${++made}`
      await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`)
      return {name, url: url(name)}
    },
    async client(name) {
      const client = new pg.Client({connectionString: url(name)})
      await client.connect()
      return client
    },
    /**
     * Transactions committed and rolled back in a database so far, read once every session that
     * used it has ended (a backend adds its counts to the statistics when it exits).
     */
    async transactions(name) {
      await until(
        `the sessions of ${name} to end`,
        async () => Number((await admin.query('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1', [name])).rows[0].n) === 0,
        {everyMs: 20},
      )
      // The statistics of a backend that just exited can land a moment after its session is gone.
      let last
      for (;;) {
        await admin.query('SELECT pg_stat_clear_snapshot()')
        const row = (await admin.query('SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1', [name])).rows[0]
        const now = {commits: Number(row.xact_commit), rollbacks: Number(row.xact_rollback)}
        if (last && last.commits === now.commits && last.rollbacks === now.rollbacks) return now
        last = now
        await wait(200)
      }
    },
    async stop() {
      await admin.end().catch(() => undefined)
      try {
        ctl('-m', 'immediate', 'stop')
      } finally {
        rmSync(dir, {recursive: true, force: true})
      }
    },
  }
}

/** pipe's processes against a store: workers, detached runs. `children` are killed by `killAll`. */
export function pipeProcesses({bin, env, cwd}) {
  const children = new Set()
  const track = (child) => {
    children.add(child)
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)))
    exited.then(() => children.delete(child))
    return exited
  }
  return {
    /** A `pipe worker`: its stderr is kept (E_CONFLICT lines are counted from it). */
    worker(url, args = [], extra = {}) {
      const child = spawn(process.execPath, [bin, 'worker', '--store', url, ...args], {cwd, env: {...env, ...extra}, stdio: ['ignore', 'ignore', 'pipe']})
      let said = ''
      child.stderr.setEncoding('utf8').on('data', (d) => (said += d))
      const exited = track(child)
      return {child, exited, stderr: () => said}
    },
    /** `pipe run ARGS --detach --store URL --json`, as a process of its own: its run id. */
    detach(url, args, extra = {}) {
      return new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [bin, 'run', ...args, '--detach', '--store', url, '--json'], {
          cwd: extra.cwd ?? cwd,
          env,
          stdio: ['ignore', 'pipe', 'pipe'],
        })
        let out = ''
        let err = ''
        child.stdout.setEncoding('utf8').on('data', (d) => (out += d))
        child.stderr.setEncoding('utf8').on('data', (d) => (err += d))
        track(child).then((code) => (code === 0 ? resolve(JSON.parse(out).run_id) : reject(new Error(`pipe run --detach exited ${code}: ${err}`))))
      })
    },
    /** `pipe ARGS` to its end, synchronously: {status, stdout, stderr}. */
    run(args, options = {}) {
      return spawnSync(process.execPath, [bin, ...args], {cwd: options.cwd ?? cwd, env: {...env, ...options.env}, encoding: 'utf8', maxBuffer: 1e8})
    },
    killAll() {
      for (const child of children) child.kill('SIGKILL')
    },
  }
}

/** Runs `count` jobs with at most `parallel` at once; `job(i)` returns a promise. */
export async function pool(count, parallel, job) {
  let next = 0
  const results = new Array(count)
  await Promise.all(
    Array.from({length: Math.min(parallel, count)}, async () => {
      while (next < count) {
        const i = next++
        results[i] = await job(i)
      }
    }),
  )
  return results
}

export function percentile(values, p) {
  const s = [...values].sort((a, b) => a - b)
  if (s.length === 0) return NaN
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]
}

export const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')
