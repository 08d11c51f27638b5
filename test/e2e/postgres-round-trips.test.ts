/**
 * What a step costs the database on the PostgreSQL store, counted, never timed: the built CLI runs a
 * chain of noop steps through a TCP proxy on 127.0.0.1 that counts the round trips pipe's client
 * makes (each simple Query and each Sync of an extended query waits for the server's answer), and
 * the per-step figure is the difference between a 21-step and a 1-step chain over 20. A run this
 * process holds and knows as it stands changes in one statement (its step_started line, then its
 * commit), where a locked read, each write, BEGIN and COMMIT were a round trip each. The lease is
 * long, so no renewal falls inside either run. And what that saving must not lose: a row changed by
 * anyone else since this process wrote it is refused, never overwritten.
 */
import {expect} from 'chai'
import {mkdir, readdir, writeFile} from 'node:fs/promises'
import net from 'node:net'
import pg from 'pg'
import path from 'node:path'
import {defaultPipeline, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {openStore} from '../../src/store/open.js'
import type {RunStore} from '../../src/store/types.js'
import {expectAuditPasses} from '../helpers/stores.js'
import {until} from '../helpers/workers.js'

/** A proxy to the cluster that counts the connections made through it and the client's Query ('Q') and Sync ('S') messages, and keeps the SQL of each Query and Parse ('P'). */
async function countingProxy(
  port: number,
): Promise<{port: number; roundTrips: () => number; connections: () => number; statements: string[]; close: () => Promise<void>}> {
  let roundTrips = 0
  let connections = 0
  const statements: string[] = []
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    connections++
    const upstream = net.connect(port, '127.0.0.1')
    sockets.add(client).add(upstream)
    let pending = Buffer.alloc(0)
    let started = false
    client.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk])
      // The startup message has no type byte; every later one is a type byte and a length that counts itself.
      for (;;) {
        const head = started ? 1 : 0
        if (pending.length < head + 4) break
        const length = pending.readInt32BE(head)
        if (pending.length < head + length) break
        if (started && (pending[0] === 0x51 || pending[0] === 0x53)) roundTrips++
        // A Query is its SQL; a Parse is the statement's name, then its SQL: each a NUL-ended string.
        if (started && (pending[0] === 0x51 || pending[0] === 0x50)) {
          const body = pending.subarray(5, 1 + length)
          const sql = pending[0] === 0x51 ? body : body.subarray(body.indexOf(0) + 1)
          statements.push(sql.subarray(0, sql.indexOf(0)).toString('utf8'))
        }
        pending = pending.subarray(head + length)
        started = true
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => client.write(chunk))
    const end = (): void => {
      client.destroy()
      upstream.destroy()
    }
    client.on('close', end).on('error', end)
    upstream.on('close', end).on('error', end)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as net.AddressInfo).port,
    roundTrips: () => roundTrips,
    connections: () => connections,
    statements,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resolve())
      }),
  }
}

const chain = (n: number): string =>
  `version: 1\nname: chain${n}\nsteps:\n${Array.from({length: n}, (_, i) => `  - id: s${i}\n    kind: noop\n${i + 1 < n ? `    next: s${i + 1}\n` : ''}`).join('')}`

describe('the round trips of a step on the PostgreSQL store', function () {
  this.timeout(120000)
  let cluster: Cluster
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())

  it('records a noop step in two round trips, its start and its commit, and the trail still verifies', async () => {
    const {dir, cleanup} = await tempDir('pipe-pg-trips-')
    const proxy = await countingProxy(cluster.port)
    try {
      const db = await cluster.createDatabase()
      const url = `postgres://postgres@127.0.0.1:${proxy.port}/${db}`
      const env = {PIPE_LEASE_MS: '600000'}
      await writeFile(path.join(dir, 'chain1.yaml'), chain(1))
      await writeFile(path.join(dir, 'chain21.yaml'), chain(21))
      const trips = async (file: string): Promise<number> => {
        const before = proxy.roundTrips()
        const run = await pipe(['run', path.join(dir, file), '--text', 'x', '--store', url, '--json'], {cwd: dir, env})
        expect(run.code, run.stderr).to.equal(0)
        expect(json<{status: string}>(run).status).to.equal('succeeded')
        return proxy.roundTrips() - before
      }
      // Once first, so that the one-time work of a new database (today's id sequences) is in neither count.
      await trips('chain1.yaml')
      const one = await trips('chain1.yaml')
      const many = await trips('chain21.yaml')
      expect((many - one) / 20, `${many} round trips for 21 steps, ${one} for 1`).to.be.at.most(2)
      await expectAuditPasses(dir, undefined, cluster.url(db))
    } finally {
      await proxy.close()
      await cleanup()
    }
  })

  it('a command makes one connection to the store however many of its parts open it or read at once (a second only to hold a ledger key while it records a delivery)', async () => {
    const {dir, cleanup} = await tempDir('pipe-pg-connections-')
    const proxy = await countingProxy(cluster.port)
    try {
      const db = await cluster.createDatabase()
      const url = `postgres://postgres@127.0.0.1:${proxy.port}/${db}`
      const connections = async (args: string[], code = 0): Promise<number> => {
        const before = proxy.connections()
        const result = await pipe([...args, '--store', url], {cwd: dir})
        expect(result.code, result.stderr).to.equal(code)
        return proxy.connections() - before
      }
      const prd = path.join(repoRoot, 'examples', 'full-prd.md')
      // Paused at its review: the run, then the review that resumes it (the review, its deadline check, the resume and its redrive check each opened the store).
      expect(await connections(['run', defaultPipeline, '--input', prd], 10), 'pipe run').to.equal(1)
      const runId = (await cluster.sql<{run_id: string}>(db, 'SELECT run_id FROM pipe_runs'))[0]!.run_id
      // runs show reads the timeline, the snapshots and the status at once, and checks a passed deadline first: 3 connections before.
      expect(await connections(['runs', 'show', runId]), 'pipe runs show').to.equal(1)
      // The publication's ledger key is held on a connection of its own while the delivery is recorded on another: 5 before.
      expect(await connections(['review', runId, '--decision', 'go']), 'pipe review').to.equal(2)
      for (const read of [['snapshot', 'show', runId], ['runs', 'list'], ['audit', 'verify'], ['stats']])
        expect(await connections(read), `pipe ${read.join(' ')}`).to.equal(1)
    } finally {
      await proxy.close()
      await cleanup()
    }
  })

  it("a statement stuck behind another session's row lock holds up the command's other reads only for a moment: they go on a connection of their own", async () => {
    const {dir, cleanup} = await tempDir('pipe-pg-stuck-')
    let store: RunStore | undefined
    try {
      const db = await cluster.createDatabase()
      const url = cluster.url(db)
      await writeFile(path.join(dir, 'chain1.yaml'), chain(1))
      expect((await pipe(['run', path.join(dir, 'chain1.yaml'), '--text', 'x', '--store', url], {cwd: dir})).code).to.equal(0)
      const runId = (await cluster.sql<{run_id: string}>(db, 'SELECT run_id FROM pipe_runs'))[0]!.run_id
      // Another session stalled inside a transaction that locked the run's row.
      const holder = new pg.Client({connectionString: url})
      await holder.connect()
      await holder.query('BEGIN')
      await holder.query('SELECT 1 FROM pipe_runs WHERE run_id = $1 FOR UPDATE', [runId])
      try {
        store = await openStore(url, 'existing')
        const order: string[] = []
        const cancel = store.requestCancel!(runId, 'stop').then(
          () => order.push('cancel'),
          () => order.push('cancel failed'),
        )
        await until('the cancel request waits for the row lock', async () => {
          const [row] = await cluster.sql<{n: number}>(db, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock'", [
            db,
          ])
          return row!.n > 0
        })
        // Queued behind the stuck statement, the read would wait for the lock's end (lock_timeout, 15 s), which comes only after it here.
        expect((await store.readRun(runId)).run_id).to.equal(runId)
        order.push('read')
        await holder.query('ROLLBACK')
        await cancel
        expect(order).to.deep.equal(['read', 'cancel'])
      } finally {
        await holder.end()
      }
    } finally {
      await store?.close?.()
      await cleanup()
    }
  })

  it('writes the start of a step safe to run twice without waiting for the disk, and keeps every other start and every commit durable', async () => {
    const {dir, cleanup} = await tempDir('pipe-pg-unflushed-')
    const proxy = await countingProxy(cluster.port)
    try {
      const db = await cluster.createDatabase()
      const url = `postgres://postgres@127.0.0.1:${proxy.port}/${db}`
      // noop and choice are safe to run twice; a write is not, and neither is a noop its pipeline says is not.
      await writeFile(
        path.join(dir, 'mixed.yaml'),
        'version: 1\nname: mixed\nsteps:\n  - {id: a, kind: noop, next: w}\n  - {id: w, kind: write, path: out/x.txt, content: "hi", next: b}\n  - {id: b, kind: noop, retry: {safe: false}, next: c}\n  - {id: c, kind: noop}\n',
      )
      const from = proxy.statements.length
      const run = await pipe(['run', path.join(dir, 'mixed.yaml'), '--text', 'x', '--store', url, '--json'], {cwd: dir, env: {PIPE_LEASE_MS: '600000'}})
      expect(run.code, run.stderr).to.equal(0)
      const sent = proxy.statements.slice(from)
      const unflushed = sent.filter((sql) => /set_config\('synchronous_commit', 'off', true\)/.test(sql))
      // Each step's start is one statement inserting its timeline line; the two safe steps' alone commit unflushed.
      expect(unflushed, sent.join('\n---\n')).to.have.length(2)
      for (const sql of unflushed) expect(sql).to.match(/INSERT INTO pipe_events/)
      const starts = await cluster.sql<{line: string}>(db, `SELECT line FROM pipe_events WHERE line LIKE '%"step_started"%' ORDER BY n`)
      expect(starts.map((r) => (JSON.parse(r.line) as {step: string}).step)).to.deep.equal(['a', 'w', 'b', 'c'])
      await expectAuditPasses(dir, undefined, cluster.url(db))
    } finally {
      await proxy.close()
      await cleanup()
    }
  })

  it('refuses to go on with a run whose row was changed by anyone else since it wrote it, and leaves the change for audit to name', async () => {
    const {dir, cleanup} = await tempDir('pipe-pg-forged-')
    try {
      const db = await cluster.createDatabase()
      const url = cluster.url(db)
      await writeFile(path.join(dir, 'chain3.yaml'), chain(3))
      const pauseDir = path.join(dir, 'pause')
      await mkdir(pauseDir)
      // Held between its first step's commit and its second's start: the row as pipe last wrote it is what it remembers.
      const running = pipe(['run', path.join(dir, 'chain3.yaml'), '--text', 'x', '--store', url, '--json'], {
        cwd: dir,
        env: {PIPE_LEASE_MS: '600000', PIPE_FAULT_PAUSE_AT: 'before-step:s1', PIPE_FAULT_PAUSE_DIR: pauseDir},
      })
      await until('pipe run is before step s1', async () => (await readdir(pauseDir)).some((f) => f.startsWith('reached.')))
      const [row] = await cluster.sql<{run_id: string; body: string}>(db, 'SELECT run_id, body FROM pipe_runs')
      const forged = `${JSON.stringify({...(JSON.parse(row!.body) as object), status_reason: 'forged outside pipe'}, null, 2)}\n`
      await cluster.sql(db, 'UPDATE pipe_runs SET body = $2 WHERE run_id = $1', [row!.run_id, forged])
      await writeFile(path.join(pauseDir, 'go'), '')
      const result = await running
      expect(result.code, result.stdout).to.not.equal(0)
      expect(result.stderr).to.include(`E_INTEGRITY`).and.include(`run ${row!.run_id} cannot be changed`)
      const after = await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_runs WHERE run_id = $1', [row!.run_id])
      expect(after[0]!.body, 'the changed row is left as it was found').to.equal(forged)
      const seqs = await cluster.sql<{seq: number}>(db, 'SELECT seq FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq', [row!.run_id])
      expect(seqs.map((r) => r.seq)).to.deep.equal([1])
    } finally {
      await cleanup()
    }
  })
})
