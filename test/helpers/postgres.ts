/**
 * A real PostgreSQL cluster for tests: Debian's postgresql package, initdb'd in a temp folder and
 * started on 127.0.0.1 with a free port, as the `postgres` user when the tests run as root (initdb
 * refuses root). A template database is migrated once; each test gets its own database made from it
 * (~0.2 s). No mock database anywhere.
 *
 * The test files of one mocha process (a parallel worker runs many, one after the other) share one
 * cluster: initdb, start and migration cost more CPU than most tests that use them, and every test
 * has a database of its own anyway. A test that restarts or crashes the server asks for a cluster
 * of its own (`durable`, or `own`).
 */
import {execFileSync, spawn, type ChildProcess} from 'node:child_process'
import {appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync} from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import {PostgresStore} from '../../src/store/postgres/store.js'
import {needs} from './tools.js'

/** The bin folder of the newest installed PostgreSQL (Debian puts initdb and pg_ctl there, not on PATH). */
export function postgresBin(): string {
  const base = '/usr/lib/postgresql'
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : []
  if (versions.length === 0) throw new Error('PostgreSQL is not installed (Debian: apt-get install postgresql); the PostgreSQL store tests need a real server')
  return path.join(base, versions[0]!, 'bin')
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

export interface Cluster {
  port: number
  dir: string
  /** postgres://postgres@127.0.0.1:PORT/NAME */
  url(database: string): string
  /** A fresh database made from the migrated template. */
  createDatabase(): Promise<string>
  /** Runs SQL as the superuser in a database. */
  sql<R extends Record<string, unknown> = Record<string, unknown>>(database: string, text: string, values?: unknown[]): Promise<R[]>
  /** pg_ctl with the cluster's folder (restart, stop). */
  ctl(...args: string[]): void
  stop(): Promise<void>
}

const asPostgres = (command: string, args: string[]): string[] =>
  process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--', command, ...args] : [command, ...args]

function run(command: string, args: string[]): void {
  const [file, ...rest] = asPostgres(command, args)
  execFileSync(file!, rest, {stdio: ['ignore', 'pipe', 'pipe']})
}

let counter = 0

let shared: Promise<Cluster> | undefined

/**
 * `durable`: commits are on disk when they return (synchronous_commit on), for a test that crashes
 * the server (pg_ctl restart -m immediate) and counts on what was committed before. `own`: a
 * cluster of this caller's alone, for a test that stops, restarts or reconfigures the server.
 * Otherwise the process's shared cluster, whose stop() leaves it running for the next file.
 */
export async function startCluster(context?: Mocha.Context, options: {durable?: boolean; own?: boolean} = {}): Promise<Cluster> {
  // Without PostgreSQL installed, a suite whose hook passes its context is skipped (failed under CI).
  if (context) needs(context, 'postgresql')
  if (options.durable || options.own) return newCluster(options)
  shared ??= newCluster({}).then((cluster) => {
    stopWhenGone(cluster)
    return cluster
  })
  shared.catch(() => (shared = undefined))
  return {...(await shared), stop: async () => {}}
}

/** The watchdogs of this process's shared clusters: each holds the write end of its watchdog's input open. */
const watchdogs: ChildProcess[] = []

/**
 * Stops the server and removes its folder once this process is gone, however it ends: mocha's
 * worker pool may kill a worker without its 'exit' handlers running, which left the shared cluster
 * running (a server and a folder in the temp dir after every run). A detached shell waits for the
 * end of its input, which comes when the kernel closes this process's end of the pipe at its death:
 * no polling, no timer.
 */
function stopWhenGone(cluster: Cluster): void {
  const [file, ...args] = asPostgres(path.join(postgresBin(), 'pg_ctl'), ['-D', path.join(cluster.dir, 'data'), '-m', 'immediate', '-w', 'stop'])
  const quote = (a: string): string => `'${a.replace(/'/g, `'\\''`)}'`
  const script = `cat >/dev/null; ${[file!, ...args].map(quote).join(' ')} >/dev/null 2>&1; rm -rf ${quote(cluster.dir)}`
  const watchdog = spawn('sh', ['-c', script], {detached: true, stdio: ['pipe', 'ignore', 'ignore']})
  // Neither the shell nor the pipe keeps this process alive.
  watchdog.unref()
  ;(watchdog.stdin as unknown as {unref(): void}).unref()
  watchdogs.push(watchdog)
}

/**
 * PIPE_TEST_SPAWNS counts clusters too, beside the processes test/helpers/count-spawns.cjs records:
 * initdb and pg_ctl run synchronously, which it does not see, and a cluster costs more CPU than most
 * tests (the server's own CPU is not the test process's, so /usr/bin/time does not show it either).
 */
function countCluster(): void {
  const out = process.env.PIPE_TEST_SPAWNS
  if (!out) return
  const file = /(test\/(?:unit|cli|e2e)\/[^:)\s]+\.test\.ts)/.exec(new Error().stack ?? '')?.[1] ?? 'unknown'
  appendFileSync(out, JSON.stringify({file, pipe: false, cluster: true, command: 'initdb'}) + '\n')
}

async function newCluster(options: {durable?: boolean}): Promise<Cluster> {
  countCluster()
  const bin = postgresBin()
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pipe-pg-'))
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
    chownSync(dir, uid, gid)
  }
  const data = path.join(dir, 'data')
  const port = await freePort()
  run(path.join(bin, 'initdb'), ['-D', data, '--no-sync', '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C'])
  const ctl = (...args: string[]): void => run(path.join(bin, 'pg_ctl'), ['-D', data, '-l', path.join(dir, 'log'), '-w', '-t', '60', ...args])
  // Durability costs nothing to test for: fsync off keeps a throwaway cluster fast.
  ctl(
    '-o',
    `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c synchronous_commit=${options.durable ? 'on' : 'off'} -c full_page_writes=off -c max_connections=200`,
    'start',
  )
  const url = (database: string): string => `postgres://postgres@127.0.0.1:${port}/${database}`
  // One connection per database, kept for the test's next statement: a connection costs the
  // server a backend (~50 ms of its CPU here, against ~1 ms for a statement on one kept open), and
  // the waits checked the store with a new one 20 times a second. A connection the server dropped
  // (a restart, a terminated backend) is replaced at the next statement.
  const sessions = new Map<string, Promise<pg.Client>>()
  const session = (database: string): Promise<pg.Client> => {
    const kept = sessions.get(database)
    if (kept) return kept
    const made = (async () => {
      const client = new pg.Client({connectionString: url(database)})
      const forget = (): void => {
        if (sessions.get(database) === made) sessions.delete(database)
      }
      client.on('error', forget).on('end', forget)
      await client.connect()
      // Kept idle between statements, it must not keep the test's process from ending.
      ;(client as unknown as {connection: {stream: {unref(): void}}}).connection.stream.unref()
      return client
    })()
    sessions.set(database, made)
    made.catch(() => sessions.get(database) === made && sessions.delete(database))
    return made
  }
  const sql = async <R extends Record<string, unknown>>(database: string, text: string, values: unknown[] = []): Promise<R[]> => {
    // A statement that changes its session (SET ...) gets a connection of its own, ended after it,
    // so that its setting (session_replication_role, which turns the append-only triggers off)
    // never reaches a later statement.
    if (/^\s*SET\s|;\s*SET\s/i.test(text)) {
      const client = new pg.Client({connectionString: url(database)})
      await client.connect()
      try {
        return (await client.query<R>(text, values)).rows
      } finally {
        await client.end()
      }
    }
    const kept = sessions.has(database)
    const client = await session(database)
    try {
      return (await client.query<R>(text, values)).rows
    } catch (error) {
      // A kept connection the server dropped before this statement (a restart: its notice may not
      // have arrived yet) fails without a SQLSTATE; the statement never ran, so it goes on a new one.
      if (!kept || (error as {code?: unknown}).code !== undefined) throw error
      if (sessions.get(database) !== undefined && (await sessions.get(database)!.catch(() => undefined)) === client) sessions.delete(database)
      return (await (await session(database)).query<R>(text, values)).rows
    }
  }
  const endSessions = async (): Promise<void> => {
    const open = [...sessions.values()]
    sessions.clear()
    for (const made of open) await (await made.catch(() => undefined))?.end().catch(() => undefined)
  }
  await sql('postgres', 'CREATE DATABASE pipe_template')
  // Copied as files, not through the WAL (15's default, WAL_LOG, writes every page of the template to
  // the log): half the server's CPU a database, ~0.2 -> ~0.1 s, in a suite that makes ~120. Before 15
  // FILE_COPY was the only way, and the word is unknown.
  const [server] = await sql<{version: string}>('postgres', "SELECT current_setting('server_version_num') AS version")
  const strategy = Number(server?.version) >= 150000 ? ' STRATEGY = FILE_COPY' : ''
  await (await PostgresStore.connect(url('pipe_template'))).close()
  return {
    port,
    dir,
    url,
    sql,
    ctl,
    async createDatabase() {
      const name = `t_${process.pid}_${++counter}`
      await sql('postgres', `CREATE DATABASE ${name} TEMPLATE pipe_template${strategy}`)
      return name
    },
    async stop() {
      await endSessions()
      try {
        ctl('-m', 'immediate', 'stop')
      } finally {
        rmSync(dir, {recursive: true, force: true})
      }
    },
  }
}
