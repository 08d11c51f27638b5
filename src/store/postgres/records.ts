/**
 * The PostgreSQL store's connection and its records by kind — spec versions, evidence, features,
 * a step's working state, the queue of detached runs — each a row holding the text the file store
 * writes to a file. PostgresStore (store.ts) adds the runs, their leases and the step commit.
 */
import type {Pool, PoolClient} from 'pg'
import {PipeError} from '../../errors.js'
import {faultPoint} from '../../util/faults.js'
import type {Evidence} from '../../types/evidence.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {assertValid} from '../trail/checks.js'
import {compareIds, formatId, latestDay, todayKey, type DatedPrefix} from '../trail/ids.js'
import {verifySpec} from '../trail/integrity.js'
import {featureText} from '../trail/records.js'
import {safeUrl} from '../location.js'
import {checkedSpec, parseRow} from './rows.js'
import {sealedStepState, stepStateProblem} from '../step-state.js'
import type {Holding} from '../types.js'

type Plain = Record<string, unknown>

const LOGIN_HINT = 'Check the role and its password (in the URL, in ~/.pgpass or in PGPASSWORD) and the host and port of the URL.'

/** PostgreSQL's codes (SQLSTATE) for a store that is set up wrong, and what to do about each. */
const SET_UP_HINTS: Record<string, string> = {
  '28P01': LOGIN_HINT,
  '28000': LOGIN_HINT,
  '3D000': 'Create the database (createdb -O ROLE NAME) or correct its name in the URL.',
  '42501':
    "The URL's role lacks a privilege pipe needs here: a role that may only read (SELECT on pipe's tables) can run the commands that read (runs, snapshot, spec, audit verify, view); runs, answers, reviews, workers and pipe store copy need the role that owns the database.",
  '3F000':
    "The URL's search_path (options=-c search_path=NAME) names a schema that does not exist: CREATE SCHEMA NAME in the database first, or correct the name in the URL.",
  '42P07':
    "The database holds a table of that name that pipe did not make (another application's): give pipe a database of its own, or a schema of its own (add ?options=-c%20search_path%3Dpipe to the URL after CREATE SCHEMA pipe).",
}

/**
 * What a run writes, table by privilege: an append-only table takes INSERT only; an ON CONFLICT DO
 * UPDATE needs UPDATE too, even when it never conflicts. The owner that migrated has all of these.
 */
const RUN_WRITES: Array<[string, string]> = [
  ...['pipe_counters', 'pipe_runs', 'pipe_step_state', 'pipe_ledger', 'pipe_queue'].flatMap((t) => [
    [t, 'INSERT'],
    [t, 'UPDATE'],
  ]),
  ...['pipe_run_index', 'pipe_events', 'pipe_snapshots', 'pipe_specs', 'pipe_evidence', 'pipe_features', 'pipe_ledger_log'].map((t) => [t, 'INSERT']),
  ['pipe_queue', 'DELETE'],
  ...['INSERT', 'UPDATE', 'DELETE'].map((p) => ['pipe_budget_holds', p]),
] as Array<[string, string]>

/** A database error as pipe says it: one whose connection failed is E_IO (retry), the rest say what the database said. */
export function databaseError(error: unknown, what: string): Error {
  if (error instanceof PipeError) return error
  const e = error as {code?: string; message?: string; severity?: string}
  const connection =
    e.code === 'ECONNREFUSED' ||
    e.code === 'ENOTFOUND' ||
    e.code === 'ECONNRESET' ||
    e.code === '57P01' ||
    e.code === '57P03' ||
    e.code === '08006' ||
    e.code === '08003' ||
    // A socket or host that is not there (connect ENOENT /run/postgresql/.s.PGSQL.5432, EHOSTUNREACH…).
    /Connection terminated|^connect E[A-Z]+/i.test(e.message ?? '')
  // pg says this one without a code: the URL asks for SSL (sslmode=...) and the server offers none.
  if (/server does not support SSL/i.test(e.message ?? ''))
    return new PipeError('E_CONFIG', `${what}: the server does not accept SSL connections`, {
      hint: "Remove sslmode (or set sslmode=disable) in the URL when the server is one you reach without SSL, or turn on ssl in the server's postgresql.conf.",
    })
  if (e.code === '55P03')
    return new PipeError('E_IO', `${what}: a row it needs stayed locked by another session past lock_timeout`, {
      hint: 'Nothing partial was recorded. Another process held the row (a stalled holder is ended by the server within the lease); run the command again (pipe resume RUN goes on from the last step).',
    })
  // Anything else (a hook's, a step's) is not the database's to explain.
  if (!connection && e.severity === undefined) return error as Error
  // A refusal of who is asking or of where (a wrong password, no such database, a role without a
  // privilege, another application's table in pipe's way) is the URL's or the role's to fix, not damage.
  const setUp = e.code === undefined ? undefined : SET_UP_HINTS[e.code]
  if (setUp) return new PipeError('E_CONFIG', `${what}: ${e.message ?? String(error)}`, {hint: setUp})
  return new PipeError(connection ? 'E_IO' : 'E_INTEGRITY', `${what}: ${e.message ?? String(error)}`, {
    hint: connection
      ? 'The database could not be reached or the connection was lost; nothing partial was recorded. Check the URL and the server, then run the command again (pipe resume RUN goes on from the last step).'
      : 'The database refused the change; pipe audit verify names damaged records.',
  })
}

/**
 * `work` with a connection of the pool, released after. A connection lost while it is out (the
 * server restarted, the backend was terminated) is an 'error' event on the client that would end
 * the process unheard: the failing query says it instead, and the connection is thrown away, as it
 * is when `work` calls `lose` (a ROLLBACK that failed).
 */
export async function withClient<T>(pool: Pool, what: string, work: (client: PoolClient, lose: () => void) => Promise<T>): Promise<T> {
  let client: PoolClient
  try {
    client = await pool.connect()
  } catch (error) {
    throw databaseError(error, what)
  }
  let broken = false
  const lose = (): void => {
    broken = true
  }
  client.on('error', lose)
  try {
    return await work(client, lose)
  } finally {
    client.off('error', lose)
    client.release(broken)
  }
}

/** How long a plain statement waits behind another before it goes on a connection of its own (PostgresRecords.query). */
const STATEMENT_TURN_MS = 100

export class PostgresRecords {
  constructor(
    readonly url: string,
    readonly pool: Pool,
  ) {}

  private canWrite: Promise<void> | undefined

  /**
   * Refuses, before anything is written, a role that could start a run but not finish it (one that
   * may INSERT but not UPDATE would leave the run `running` with no way to record its end). Asked
   * once per process, at the first write.
   */
  assertCanWrite(): Promise<void> {
    this.canWrite ??= (async () => {
      const rows = await this.query<{role: string; missing: string[]}>(
        "cannot check the privileges of the URL's role",
        `SELECT current_user AS role, ARRAY(SELECT w.privilege || ' on ' || w.tbl FROM unnest($1::text[], $2::text[]) AS w(tbl, privilege)
           WHERE NOT has_table_privilege(w.tbl, w.privilege)) AS missing`,
        [RUN_WRITES.map(([t]) => t), RUN_WRITES.map(([, p]) => p)],
      )
      const {role, missing} = rows[0]!
      if (missing.length === 0) return
      const grants = missing.map((m) => {
        const [privilege, , table] = m.split(' ')
        return `GRANT ${privilege} ON ${table} TO "${role}";`
      })
      throw new PipeError('E_CONFIG', `the URL's role ${role} lacks ${missing.join(', ')}, which a run needs; nothing was recorded`, {
        hint: `As the database's owner: ${grants.join(' ')} Or use the owner's role in the URL. A role that may only read (SELECT) can run the commands that read (runs, snapshot, spec, audit verify, view).`,
      })
    })().catch((error: unknown) => {
      // Only the answer is kept: a lost connection is asked again at the next write (a worker lives long).
      if ((error as {code?: string}).code !== 'E_CONFIG') this.canWrite = undefined
      throw error
    })
    return this.canWrite
  }

  /** Runs `work` in one transaction, retried on a serialisation failure or a deadlock. */
  async tx<T>(what: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const done = await withClient(this.pool, what, async (client, lose) => {
        try {
          await client.query('BEGIN')
          const out = await work(client)
          await client.query('COMMIT')
          return {out}
        } catch (error) {
          await client.query('ROLLBACK').catch(lose)
          const code = (error as {code?: string}).code
          // 55P03: a row another holder kept locked past lock_timeout (see store.ts connect).
          if ((code === '40001' || code === '40P01' || code === '55P03') && attempt < 5) return undefined
          throw databaseError(error, what)
        }
      })
      if (done) return done.out
    }
  }

  /**
   * How many plain statements (query: one statement each, autocommit) go to the server at once.
   * Reads a command takes together (Promise.all) would each take a connection of the pool, and a
   * connection costs the server far more than a statement: a backend started and its caches filled,
   * ~50 ms of the server's CPU on the test machine against ~1 ms for a read, and over a network more
   * round trips than the reads themselves. Queued one behind another they share the pool's idle
   * connection: `pipe runs show` made 3 connections, now 1. A statement waits its turn for
   * STATEMENT_TURN_MS at most, then goes on a connection of its own as before: one stuck behind a
   * row lock (another session stalled inside a transaction, up to lock_timeout) holds the others
   * up that long, not for the lock's time. A worker allows as many at once as it drives runs, and
   * one more for its loop (TeamQueue.serving). Not counted: transactions (tx, withClient), a held
   * run's writes and lease renewals, and the ledger's key, which each take a connection as before.
   */
  private statementsAtOnce = 1
  private statementsRunning = 0
  private readonly statementTurns: Array<() => void> = []

  /** Lets `n` plain statements go to the server at once (pipe worker --concurrency N, and its loop). */
  allowStatementsAtOnce(n: number): void {
    this.statementsAtOnce = Math.max(1, Math.floor(n))
    while (this.statementTurns.length > 0 && this.statementsRunning < this.statementsAtOnce) {
      this.statementsRunning++
      this.statementTurns.shift()!()
    }
  }

  /** Waits for a turn: true when this statement took a slot, false when it waited long enough to go without one. */
  private statementTurn(): Promise<boolean> {
    if (this.statementsRunning < this.statementsAtOnce) {
      this.statementsRunning++
      return Promise.resolve(true)
    }
    return new Promise<boolean>((resolve) => {
      const turn = (): void => {
        clearTimeout(timer)
        resolve(true)
      }
      const timer = setTimeout(() => {
        const at = this.statementTurns.indexOf(turn)
        if (at !== -1) this.statementTurns.splice(at, 1)
        resolve(false)
      }, STATEMENT_TURN_MS)
      this.statementTurns.push(turn)
    })
  }

  async query<R extends Plain>(what: string, text: string, values: unknown[] = []): Promise<R[]> {
    const slot = await this.statementTurn()
    try {
      return (await this.pool.query<R>(text, values)).rows
    } catch (error) {
      throw databaseError(error, what)
    } finally {
      if (slot) {
        // The slot passes to the next statement waiting, or is freed.
        const next = this.statementTurns.shift()
        if (next) next()
        else this.statementsRunning--
      }
    }
  }

  /**
   * The key (day, or year) a dated id is numbered in: never one before the latest already counted,
   * so that ids keep their order when the clock goes back (allocationDay in ../ids.ts).
   */
  static async allocationKey(client: Pool | PoolClient, prefix: DatedPrefix, now: Date): Promise<string> {
    const today = todayKey(prefix, now)
    const {rows} = await client.query<{series: string | null}>('SELECT max(series) AS series FROM pipe_counters WHERE series ~ $1', [
      `^${prefix}-[0-9]{${today.length}}$`,
    ])
    return latestDay(rows[0]?.series ? [rows[0].series] : [], prefix, today)
  }

  /**
   * `count` numbers of a series, taken by one statement of their own (autocommit) before the
   * transaction that uses them; returns the first. The counter's row is locked for that statement
   * only, never across a round trip to a client: a holder stalled inside its transaction (SIGSTOP, a
   * paused VM) holds up nobody else's ids. A transaction that fails leaves its numbers unused, so
   * ids may have a gap then, never a repeat.
   */
  async reserveNumbers(series: string, count: number): Promise<number> {
    const rows = await this.query<{n: string}>(
      'cannot allocate an id',
      'INSERT INTO pipe_counters (series, n) VALUES ($1, $2) ON CONFLICT (series) DO UPDATE SET n = pipe_counters.n + EXCLUDED.n RETURNING n',
      [series, count],
    )
    return Number(rows[0]!.n) - count + 1
  }

  /** The next dated id of a series (S-, F-), reserved as reserveNumbers does. */
  async reserveDatedId(prefix: 'S' | 'F', now: Date): Promise<string> {
    let key: string
    try {
      key = await PostgresRecords.allocationKey(this.pool, prefix, now)
    } catch (error) {
      throw databaseError(error, 'cannot allocate an id')
    }
    return formatId(prefix, key, await this.reserveNumbers(`${prefix}-${key}`, 1))
  }

  /** The next number of a series, taken inside the caller's transaction (given back if it rolls back). */
  static async nextNumber(client: PoolClient, series: string): Promise<number> {
    const {rows} = await client.query<{n: string}>(
      'INSERT INTO pipe_counters (series, n) VALUES ($1, 1) ON CONFLICT (series) DO UPDATE SET n = pipe_counters.n + 1 RETURNING n',
      [series],
    )
    return Number(rows[0]!.n)
  }

  async readSpec(version: string): Promise<CanonicalSpec> {
    const rows = await this.query<{body: string}>(`cannot read spec version ${version}`, 'SELECT body FROM pipe_specs WHERE version = $1', [version])
    if (!rows[0]) throw new PipeError('E_NOT_FOUND', `spec version ${version} not found (${safeUrl(this.url)})`)
    return checkedSpec(version, rows[0].body)
  }

  async putSpec(spec: CanonicalSpec): Promise<void> {
    if (verifySpec(spec).length > 0) throw new PipeError('E_INTEGRITY', `spec version ${spec.meta.spec_version} does not match its content hash`)
    assertValid('spec', spec, `spec version ${spec.meta.spec_version}`)
    const rows = await this.query(
      'cannot store a spec version',
      'INSERT INTO pipe_specs (version, body) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING version',
      [spec.meta.spec_version, `${JSON.stringify(spec, null, 2)}\n`],
    )
    if (rows.length === 0)
      throw new PipeError('E_CONFLICT', `spec version ${spec.meta.spec_version} already exists and is immutable`, {
        hint: 'A change to the spec is a new version; run a step that writes one.',
      })
  }

  async listSpecVersions(): Promise<string[]> {
    const rows = await this.query<{version: string}>('cannot list spec versions', 'SELECT version FROM pipe_specs')
    return rows.map((r) => r.version).sort(compareIds)
  }

  async *newestSpecVersions(): AsyncGenerator<string> {
    yield* (await this.listSpecVersions()).reverse()
  }

  async readEvidence(id: string): Promise<Evidence> {
    const rows = await this.query<{body: string}>(`cannot read evidence ${id}`, 'SELECT body FROM pipe_evidence WHERE id = $1', [id])
    if (!rows[0]) throw new PipeError('E_NOT_FOUND', `evidence ${id} not found (${safeUrl(this.url)})`)
    const evidence = parseRow<Evidence>('evidence', rows[0].body, `evidence ${id}`, `pipe_evidence(${id})`)
    if (evidence.evidence_id !== id)
      throw new PipeError('E_INTEGRITY', `evidence ${id} names ${evidence.evidence_id}`, {
        hint: 'It was changed outside pipe; run pipe audit verify to see all damage.',
      })
    return evidence
  }

  async listEvidenceIds(): Promise<string[]> {
    const rows = await this.query<{id: string}>('cannot list evidence', 'SELECT id FROM pipe_evidence')
    return rows.map((r) => r.id).sort(compareIds)
  }

  async createFeature(now: Date, title: string): Promise<string> {
    await this.assertCanWrite()
    const id = await this.reserveDatedId('F', now)
    return this.tx('cannot register a feature', async (client) => {
      await client.query('INSERT INTO pipe_features (id, body) VALUES ($1, $2)', [id, featureText(id, now, title)])
      return id
    }).then((id) => {
      faultPoint('feature-recorded')
      return id
    })
  }

  async ensureFeature(id: string, now: Date): Promise<void> {
    await this.assertCanWrite()
    await this.query('cannot register a feature', 'INSERT INTO pipe_features (id, body) VALUES ($1, $2) ON CONFLICT DO NOTHING', [id, featureText(id, now)])
  }

  // Step state

  async readStepState(runId: string, step: string, seq: number): Promise<unknown> {
    const rows = await this.query<{body: string}>(
      `cannot read the state of step ${step}`,
      'SELECT body FROM pipe_step_state WHERE run_id = $1 AND step = $2 AND seq = $3',
      [runId, step, seq],
    )
    if (!rows[0]) return undefined
    let parsed: unknown
    try {
      parsed = JSON.parse(rows[0].body)
    } catch {
      parsed = null
    }
    const problem = stepStateProblem(parsed, runId, step, seq)
    if (problem)
      throw new PipeError('E_INTEGRITY', `the state of step ${step} (seq ${seq}) of ${runId} ${problem}`, {
        hint: `It was changed outside pipe, and a resumed step acts on it, so it is not used. pipe audit verify ${runId} names what else changed.`,
      })
    return (parsed as {state: unknown}).state
  }

  async writeStepState(runId: string, step: string, seq: number, state: unknown): Promise<void> {
    await this.query(
      `cannot write the state of step ${step}`,
      'INSERT INTO pipe_step_state (run_id, step, seq, body) VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, step, seq) DO UPDATE SET body = EXCLUDED.body',
      [runId, step, seq, `${JSON.stringify(sealedStepState(runId, step, seq, state))}\n`],
    )
  }

  async latestStepStateSeq(runId: string, step: string): Promise<number | null> {
    const rows = await this.query<{seq: number | null}>(
      `cannot read the state of step ${step}`,
      'SELECT max(seq) AS seq FROM pipe_step_state WHERE run_id = $1 AND step = $2',
      [runId, step],
    )
    return rows[0]?.seq ?? null
  }

  stepStateLocation(runId: string, step: string, seq: number | null): string {
    return seq === null ? `pipe_step_state(${runId}) in ${safeUrl(this.url)}` : `pipe_step_state(${runId}, ${step}, ${seq}) in ${safeUrl(this.url)}`
  }

  // The queue of runs for workers (pipe run --detach, pipe worker)

  /**
   * Puts a run on a queue, and marks it as a run the workers drive (its detached queue, kept for its
   * life). A run already queued keeps its place; the row is marked `again` so that a worker that is
   * taking it off (the run had just stopped) leaves it for the next claim.
   */
  async enqueue(runId: string, queue: string): Promise<void> {
    await this.tx(`cannot queue run ${runId}`, async (client) => {
      await client.query('INSERT INTO pipe_queue (run_id, queue) VALUES ($1, $2) ON CONFLICT (run_id) DO UPDATE SET again = true', [runId, queue])
      await client.query('UPDATE pipe_runs SET detached_queue = $2 WHERE run_id = $1 AND detached_queue IS DISTINCT FROM $2', [runId, queue])
    })
  }

  /** Runs of a queue that nobody drives now (no holder, or a lease that ran out), oldest first. */
  async claimable(queue: string, limit: number): Promise<string[]> {
    const rows = await this.query<{run_id: string}>(
      'cannot read the queue',
      `SELECT q.run_id FROM pipe_queue q JOIN pipe_runs r USING (run_id)
       WHERE q.queue = $1 AND (r.holder IS NULL OR r.lease_until IS NULL OR r.lease_until < now())
       ORDER BY q.enqueued_at, q.run_id LIMIT $2`,
      [queue, limit],
    )
    return rows.map((r) => r.run_id)
  }

  /**
   * Takes a run off the queue once it has stopped (ended, or waiting for a person) — unless it was
   * queued again meanwhile (a person answered between its stop and this call): then the row stays,
   * once, for the next claim.
   */
  async dequeue(runId: string): Promise<void> {
    await this.query(
      `cannot take run ${runId} off the queue`,
      `WITH kept AS (UPDATE pipe_queue SET again = false WHERE run_id = $1 AND again RETURNING run_id)
       DELETE FROM pipe_queue WHERE run_id = $1 AND NOT again`,
      [runId],
    )
  }

  /** The queue a run waits in, or null. */
  async queued(runId: string): Promise<string | null> {
    const rows = await this.query<{queue: string}>(`cannot read the queue`, 'SELECT queue FROM pipe_queue WHERE run_id = $1', [runId])
    return rows[0]?.queue ?? null
  }

  /** The queue a run was put on by pipe run --detach (the workers drive it), or null (driven by whoever runs pipe). */
  async detachedQueue(runId: string): Promise<string | null> {
    const rows = await this.query<{queue: string | null}>(`cannot read run ${runId}`, 'SELECT detached_queue AS queue FROM pipe_runs WHERE run_id = $1', [
      runId,
    ])
    return rows[0]?.queue ?? null
  }

  /** Who holds a run now and under which lease, and where it stands in the queue (pipe runs show). */
  async holding(runId: string): Promise<Holding | null> {
    return (await this.holdings([runId])).get(runId) ?? null
  }

  /** Several runs' holdings in one query: a page listing 500 runs asks once, not 500 times. */
  async holdings(runIds: readonly string[]): Promise<Map<string, Holding>> {
    const found = new Map<string, Holding>()
    if (runIds.length === 0) return found
    const rows = await this.query<{
      run_id: string
      holder: string | null
      lease_until: Date | null
      alive: boolean
      epoch: string
      queue: string | null
      detached: string | null
    }>(
      runIds.length === 1 ? `cannot read run ${runIds[0]}` : `cannot read ${runIds.length} runs`,
      `SELECT r.run_id, r.holder, r.lease_until, (r.lease_until IS NOT NULL AND r.lease_until > now()) AS alive, r.epoch, q.queue, r.detached_queue AS detached
       FROM pipe_runs r LEFT JOIN pipe_queue q USING (run_id) WHERE r.run_id = ANY($1::text[])`,
      [[...runIds]],
    )
    for (const row of rows) {
      const holder = row.holder ? (JSON.parse(row.holder) as {pid: number; host: string; name?: string}) : null
      found.set(row.run_id, {
        worker: holder && row.alive ? {host: holder.host, pid: holder.pid, ...(holder.name ? {name: holder.name} : {})} : null,
        lease_until: holder && row.alive && row.lease_until ? row.lease_until.toISOString() : null,
        ...(holder && !row.alive && row.lease_until
          ? {expired: {worker: {host: holder.host, pid: holder.pid, ...(holder.name ? {name: holder.name} : {})}, lease_until: row.lease_until.toISOString()}}
          : {}),
        epoch: Number(row.epoch),
        queue: row.queue,
        detached_queue: row.detached,
      })
    }
    return found
  }

  // The ledger and the audit
}
