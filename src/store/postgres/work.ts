/**
 * The work of `pipe worker` on the PostgreSQL store: which queued runs a worker may claim (its
 * queue, and only the workspaces it serves), the workers alive now and what they serve, the note a
 * run nobody can serve carries, foreach children as jobs of their own, and cancel requests.
 *
 * A foreach child is created and queued in one transaction that locks its parent's row: the
 * parent's holder (checked by epoch, so a holder frozen past its lease cannot add children) is the
 * one creator, the child's key (parent run, step, seq, item) is unique in the database, and the
 * step's concurrency is the count of its children on the queue — over every worker, whoever holds
 * them. A child leaves the queue when it stops (ends or waits for a person), which frees its slot and
 * wakes its parent (NOTIFY pipe_children, with a poll behind it).
 */
import type {PoolClient} from 'pg'
import {PipeError} from '../../errors.js'
import {faultPoint} from '../../util/faults.js'
import type {RunRecord} from '../../types/run.js'
import type {ChildBirth, Firing, LiveWorker, QueuedBirth, QueueEntry, RunWorkspace, ServedWorkspace, TeamQueue} from '../team.js'
import {childKey} from './rows.js'
import {holderOf, nameHolder} from './holder.js'
import type {PostgresStore} from './store.js'
import {insertRun} from './create-run.js'

export type {LiveWorker, QueueEntry, ServedWorkspace}

/** The channel a child's end is announced on, with its parent's run id as the payload. */
export const CHILDREN_CHANNEL = 'pipe_children'
/** Where a queued run is announced (schema migration 5), with its queue's name. */
export const QUEUE_CHANNEL = 'pipe_queue'
/** Where a cancel request is announced, with the run's id: its holder stops it at once rather than at its next lease renewal. */
export const CANCEL_CHANNEL = 'pipe_cancel'

/** How long a worker counts as alive without renewing its row (PIPE_LEASE_MS, as a run's lease). */
function aliveMs(): number {
  const set = Number(process.env.PIPE_LEASE_MS)
  return Number.isSafeInteger(set) && set >= 200 ? set : 30000
}

export class PostgresWork implements TeamQueue {
  constructor(private readonly store: PostgresStore) {}

  nameHolder(name: string | undefined): void {
    nameHolder(name)
  }

  serving(concurrency: number): void {
    // Its runs', and its own loop's (claims, heartbeats, notes on queued runs).
    this.store.allowStatementsAtOnce(concurrency + 1)
  }

  /** Creates runs not started and puts them on a queue, in one transaction (pipe run --detach): all of them or none. */
  async createQueued(births: readonly QueuedBirth[], queue: string, workspace: RunWorkspace, firing?: Firing): Promise<RunRecord[]> {
    await this.store.assertCanWrite()
    for (const {now} of births) await this.store.daySequence('R', now)
    return this.store.tx('cannot queue a run', async (client) => {
      const records: RunRecord[] = []
      if (firing) {
        // The slot's key is the primary key: a second firing of it (another worker, at the same
        // moment or later) inserts nothing, waiting for the first one's transaction if it is still open.
        const won = await client.query(
          "INSERT INTO pipe_schedule_firings (schedule, slot, run_id) VALUES ($1, $2, '') ON CONFLICT (schedule, slot) DO NOTHING RETURNING schedule",
          [firing.key, firing.slot.toISOString()],
        )
        if (won.rowCount === 0) return records
      }
      for (const {draft, now, event} of births) {
        const record = await insertRun(client, {draft, now, event, workspace})
        if (firing)
          await client.query('UPDATE pipe_schedule_firings SET run_id = $3 WHERE schedule = $1 AND slot = $2', [
            firing.key,
            firing.slot.toISOString(),
            record.run_id,
          ])
        await client.query('INSERT INTO pipe_queue (run_id, queue) VALUES ($1, $2)', [record.run_id, queue])
        // The workers' for its whole life: what a person gives it later puts it back on this queue (records.ts enqueue).
        await client.query('UPDATE pipe_runs SET detached_queue = $2 WHERE run_id = $1', [record.run_id, queue])
        records.push(record)
      }
      return records
    })
  }

  async lastFirings(keys: readonly string[]): Promise<Map<string, Date>> {
    const rows = await this.store.query<{schedule: string; slot: Date}>(
      'cannot read the schedules',
      'SELECT schedule, max(slot) AS slot FROM pipe_schedule_firings WHERE schedule = ANY($1::text[]) GROUP BY schedule',
      [keys],
    )
    return new Map(rows.map((r) => [r.schedule, new Date(r.slot)]))
  }

  enqueue(runId: string, queue: string): Promise<void> {
    return this.store.enqueue(runId, queue)
  }

  /**
   * One statement picks the oldest run of the queue that nobody holds and takes its lease (graphile
   * worker's getJob): FOR UPDATE SKIP LOCKED passes over a run another claimer is taking this very
   * moment (or whose holder's transaction has its row), so two workers never both go for one run,
   * and the outer WHERE checks the lease again on the row as it is once locked. A run made before
   * workspaces were recorded may go to any worker.
   */
  async claim(queue: string, workspaces: readonly string[], skip: readonly string[]): Promise<string | null> {
    await this.store.assertCanWrite()
    const holder = holderOf()
    const rows = await this.store.query<{run_id: string; epoch: string}>(
      'cannot read the queue',
      `UPDATE pipe_runs r SET holder = $4, epoch = r.epoch + 1, lease_until = now() + make_interval(secs => $5::double precision / 1000)
       WHERE r.run_id = (
         SELECT c.run_id FROM pipe_queue q JOIN pipe_runs c USING (run_id)
         WHERE q.queue = $1 AND (c.holder IS NULL OR c.lease_until IS NULL OR c.lease_until < now())
           AND (c.workspace_id IS NULL OR c.workspace_id = ANY($2::text[])) AND NOT (c.run_id = ANY($3::text[]))
         ORDER BY q.enqueued_at, q.run_id
         LIMIT 1 FOR UPDATE OF c SKIP LOCKED)
       AND (r.holder IS NULL OR r.lease_until IS NULL OR r.lease_until < now())
       RETURNING r.run_id, r.epoch`,
      [queue, workspaces, skip, JSON.stringify(holder), aliveMs()],
    )
    const row = rows[0]
    if (!row) return null
    this.store.adoptClaim(row.run_id, Number(row.epoch), holder.token)
    faultPoint('claimed')
    return row.run_id
  }

  unclaim(runId: string): Promise<void> {
    return this.store.unclaim(runId)
  }

  watchCancel(runId: string, stop: (reason: string) => void): () => void {
    return this.store.watchCancel(runId, stop)
  }

  /** Says this worker is alive, on which queue and for which workspaces (again: renews it). */
  async register(id: string, queue: string, host: string, pid: number, workspaces: readonly ServedWorkspace[]): Promise<void> {
    await this.store.query(
      'cannot register the worker',
      `INSERT INTO pipe_workers (id, queue, host, pid, workspaces, alive_until) VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6::double precision / 1000))
       ON CONFLICT (id) DO UPDATE SET alive_until = EXCLUDED.alive_until`,
      [id, queue, host, pid, JSON.stringify(workspaces), aliveMs()],
    )
  }

  async unregister(id: string): Promise<void> {
    await this.store.query('cannot unregister the worker', 'DELETE FROM pipe_workers WHERE id = $1', [id])
  }

  async liveWorkers(queue: string): Promise<LiveWorker[]> {
    return this.store.query<{id: string; host: string; pid: number; workspaces: ServedWorkspace[]}>(
      'cannot read the workers',
      'SELECT id, host, pid, workspaces FROM pipe_workers WHERE queue = $1 AND alive_until > now() ORDER BY id',
      [queue],
    )
  }

  /**
   * Notes on each queued run of `queue` whose workspace no live worker of the queue serves why it
   * waits (once: a note already there is left alone), and clears the note of one a worker serves
   * now. Returns the runs noted this time, for the worker's log.
   */
  async noteUnservable(queue: string): Promise<Array<{run_id: string; note: string}>> {
    const live = await this.liveWorkers(queue)
    const served = new Set(live.flatMap((w) => w.workspaces.map((s) => s.id)))
    const rows = await this.store.query<{run_id: string; note: string | null; workspace_id: string; workspace_root: string; workspace_sub: string}>(
      'cannot read the queue',
      `SELECT q.run_id, q.note, r.workspace_id, r.workspace_root, r.workspace_sub FROM pipe_queue q JOIN pipe_runs r USING (run_id)
       WHERE q.queue = $1 AND r.workspace_id IS NOT NULL`,
      [queue],
    )
    const labels = [...new Map(live.flatMap((w) => w.workspaces.map((s) => [s.id, `${s.label} (${s.id}) on ${w.host}`]))).values()]
    const noted: Array<{run_id: string; note: string}> = []
    for (const row of rows) {
      if (served.has(row.workspace_id)) {
        // Only this kind of note: one a worker left on a run it could not start stays until it starts it.
        if (row.note !== null)
          await this.store.query('cannot update the queue', `UPDATE pipe_queue SET note = NULL WHERE run_id = $1 AND note LIKE 'no live worker %'`, [
            row.run_id,
          ])
        continue
      }
      if (row.note !== null) continue
      const where = row.workspace_sub ? `${row.workspace_root}/${row.workspace_sub}` : row.workspace_root
      const note =
        `no live worker on queue ${queue} serves workspace ${where} (${row.workspace_id}); ` +
        `live workers there serve ${labels.length > 0 ? labels.join(', ') : 'nothing'}. ` +
        `Start one where that repository is checked out: pipe worker --workspace DIR --queue ${queue}`
      await this.store.query('cannot update the queue', 'UPDATE pipe_queue SET note = $2 WHERE run_id = $1 AND note IS NULL', [row.run_id, note])
      noted.push({run_id: row.run_id, note})
    }
    return noted
  }

  /** Says on a queued run's entry what it waits for (a worker that could not start it says why); null clears it. */
  async setNote(runId: string, note: string | null): Promise<void> {
    await this.store.query('cannot update the queue', 'UPDATE pipe_queue SET note = $2 WHERE run_id = $1', [runId, note])
  }

  /** Where a run waits on the queue, or null when it is on none. */
  async entry(runId: string): Promise<QueueEntry | null> {
    const rows = await this.store.query<{
      queue: string
      note: string | null
      workspace_id: string | null
      workspace_root: string | null
      workspace_sub: string | null
    }>(
      'cannot read the queue',
      `SELECT q.queue, q.note, r.workspace_id, r.workspace_root, r.workspace_sub FROM pipe_queue q JOIN pipe_runs r USING (run_id) WHERE q.run_id = $1`,
      [runId],
    )
    const row = rows[0]
    if (!row) return null
    return {
      queue: row.queue,
      note: row.note,
      workspace: row.workspace_id === null ? null : {id: row.workspace_id, root: row.workspace_root ?? '', sub: row.workspace_sub ?? ''},
    }
  }

  /** The workspace a run was recorded to need, or null (a run made before workspaces were recorded). */
  async workspaceOf(runId: string): Promise<RunWorkspace | null> {
    const rows = await this.store.query<{workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null}>(
      `cannot read run ${runId}`,
      'SELECT workspace_id, workspace_root, workspace_sub FROM pipe_runs WHERE run_id = $1',
      [runId],
    )
    const row = rows[0]
    if (!row || row.workspace_id === null) return null
    return {id: row.workspace_id, root: row.workspace_root ?? '', sub: row.workspace_sub ?? ''}
  }

  /**
   * Puts a child of the parent's step on the queue once the step has fewer than `limit` children
   * there, creating it first when `create` is given and no child has its key yet; see the top of
   * this file. Returns the child's id, or null when the step's slots are all taken (try again when a
   * child ends). E_CONFLICT when this process no longer holds the parent.
   */
  async queueChild(options: {
    link: NonNullable<RunRecord['parent']>
    limit: number
    queue: string
    runId?: string
    create?: ChildBirth
    /** Made (when missing) but not queued: the step stopped before a slot freed. */
    createOnly?: boolean
  }): Promise<string | null> {
    const {link, limit, queue} = options
    const step = `${link.run_id}/${link.step}`
    if (options.create) await this.store.daySequence('R', options.create.now)
    return this.store.tx(`cannot queue a child of ${link.run_id}`, async (client) => {
      const parent = await this.lockParent(client, link.run_id)
      let runId = options.runId ?? (await client.query<{run_id: string}>('SELECT run_id FROM pipe_runs WHERE child_key = $1', [childKey(link)])).rows[0]?.run_id
      if (runId !== undefined && options.createOnly) return runId
      if (runId !== undefined) {
        const queued = await client.query('SELECT 1 FROM pipe_queue WHERE run_id = $1', [runId])
        if (queued.rows.length > 0) return runId
      }
      const taken = (await client.query<{n: number}>('SELECT count(*)::int AS n FROM pipe_queue WHERE parent_step = $1', [step])).rows[0]!.n
      if (taken >= limit && !options.createOnly) return null
      if (runId === undefined) {
        if (!options.create) throw new PipeError('E_INTERNAL', `no child of ${link.run_id} step ${link.step} item ${link.index ?? 0} to queue`)
        const {draft, now, event, root} = options.create
        const workspace =
          parent.workspace_id !== null ? {id: parent.workspace_id, root: root ?? parent.workspace_root ?? '', sub: parent.workspace_sub ?? ''} : undefined
        runId = (await insertRun(client, {draft, now, event, ...(workspace ? {workspace} : {})})).run_id
        if (options.createOnly) return runId
      }
      await client.query('INSERT INTO pipe_queue (run_id, queue, parent_step) VALUES ($1, $2, $3) ON CONFLICT (run_id) DO NOTHING', [runId, queue, step])
      await client.query('UPDATE pipe_runs SET detached_queue = $2 WHERE run_id = $1 AND detached_queue IS DISTINCT FROM $2', [runId, queue])
      return runId
    })
  }

  private async lockParent(
    client: PoolClient,
    runId: string,
  ): Promise<{workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null}> {
    const {rows} = await client.query<{epoch: string; workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null}>(
      'SELECT epoch, workspace_id, workspace_root, workspace_sub FROM pipe_runs WHERE run_id = $1 FOR UPDATE',
      [runId],
    )
    const row = rows[0]
    const held = this.store.heldEpoch(runId)
    if (!row || held === null || Number(row.epoch) !== held)
      throw new PipeError('E_CONFLICT', `run ${runId} was taken over by another holder (its lease ran out): this process no longer drives it`, {
        hint: 'Nothing was recorded by this process; pipe runs show RUN says who holds the run now.',
      })
    return row
  }

  /** The runs of `runIds` still on the queue (a child leaves it when it stops). */
  async stillQueued(runIds: readonly string[]): Promise<Set<string>> {
    const rows = await this.store.query<{run_id: string}>('cannot read the queue', 'SELECT run_id FROM pipe_queue WHERE run_id = ANY($1::text[])', [runIds])
    return new Set(rows.map((r) => r.run_id))
  }

  /**
   * Takes a run off the queue once it has stopped, unless it was queued again meanwhile (a person
   * answered between its stop and this call: the row stays, once, for the next claim; see
   * records.ts dequeue), and wakes its parent when it is a child.
   */
  async stopped(runId: string): Promise<void> {
    // Only by the run's holder, or when nobody holds it: a worker that wakes after its run was taken
    // over (its lease ran out while it was frozen) must not take the new holder's run off the queue.
    const epoch = this.store.heldEpoch(runId)
    const mine = epoch === null ? '(r.holder IS NULL OR r.lease_until IS NULL OR r.lease_until < now()) AND $2::bigint IS NULL' : 'r.epoch = $2::bigint'
    await this.store.tx(`cannot take run ${runId} off the queue`, async (client) => {
      const kept = await client.query(
        `UPDATE pipe_queue q SET again = false FROM pipe_runs r WHERE q.run_id = $1 AND r.run_id = q.run_id AND q.again AND ${mine} RETURNING q.run_id`,
        [runId, epoch],
      )
      if (kept.rows.length > 0) return
      const {rows} = await client.query<{parent_run: string | null}>(
        `DELETE FROM pipe_queue q USING pipe_runs r WHERE q.run_id = $1 AND r.run_id = q.run_id AND ${mine} RETURNING r.parent_run`,
        [runId, epoch],
      )
      const parent = rows[0]?.parent_run
      if (parent) await client.query('SELECT pg_notify($1, $2)', [CHILDREN_CHANNEL, parent])
    })
  }

  /** Asks whoever holds the run to stop it as cancelled (seen at once by a listening holder, else at its next heartbeat or commit); the first reason stays. */
  async requestCancel(runId: string, reason: string): Promise<void> {
    await this.store.query(
      `cannot cancel run ${runId}`,
      `WITH asked AS (UPDATE pipe_runs SET cancel_request = $2 WHERE run_id = $1 AND cancel_request IS NULL RETURNING run_id)
       SELECT pg_notify($3, $1)`,
      [runId, reason, CANCEL_CHANNEL],
    )
  }

  async cancelRequest(runId: string): Promise<string | null> {
    const rows = await this.store.query<{cancel_request: string | null}>(`cannot read run ${runId}`, 'SELECT cancel_request FROM pipe_runs WHERE run_id = $1', [
      runId,
    ])
    return rows[0]?.cancel_request ?? null
  }

  /**
   * Calls `wake` with a parent's run id each time one of its children stops, and `queued` each time
   * a run is put on `queue`; returns the stop. One connection of the pool stays taken while it
   * listens. A connection that drops (the server restarted, the backend was terminated) is made
   * again after a jittered backoff, so a team's workers do not all knock at once; once it is back
   * both callbacks are called (with '' for the parent), since a notice sent while it was down is lost.
   */
  async listen(wake: (parentRunId: string) => void, queue?: {name: string; queued: () => void}): Promise<() => Promise<void>> {
    let client: PoolClient | undefined
    let stopped = false
    let failures = 0
    let timer: NodeJS.Timeout | undefined
    const onNotice = (message: {channel: string; payload?: string | undefined}): void => {
      if (message.channel === CHILDREN_CHANNEL && message.payload) wake(message.payload)
      else if (message.channel === QUEUE_CHANNEL && queue && message.payload === queue.name) queue.queued()
      else if (message.channel === CANCEL_CHANNEL && message.payload && this.store.heldEpoch(message.payload) !== null) {
        const runId = message.payload
        // Missed here, it is still seen at the run's next renewal or commit.
        void this.cancelRequest(runId).then(
          (reason) => this.store.cancelSeen(runId, reason),
          () => undefined,
        )
      }
    }
    const again = (): void => {
      if (stopped || timer) return
      failures++
      const ceiling = Math.min(30000, 100 * 2 ** Math.min(failures, 9))
      timer = setTimeout(
        () => {
          timer = undefined
          void connect()
        },
        ceiling / 2 + Math.random() * (ceiling / 2),
      )
      timer.unref()
    }
    const lost = (dropped: PoolClient): void => {
      if (client !== dropped) return
      client = undefined
      dropped.off('notification', onNotice)
      dropped.release(true)
      again()
    }
    const connect = async (): Promise<boolean> => {
      let made: PoolClient | undefined
      try {
        made = await this.store.pool.connect()
        const mine = made
        mine.on('notification', onNotice)
        mine.on('error', () => lost(mine))
        mine.on('end', () => lost(mine))
        client = mine
        await mine.query(`LISTEN ${CHILDREN_CHANNEL}`)
        await mine.query(`LISTEN ${CANCEL_CHANNEL}`)
        if (queue) await mine.query(`LISTEN ${QUEUE_CHANNEL}`)
        if (stopped) return false
        const wasDown = failures > 0
        failures = 0
        if (wasDown) {
          wake('')
          queue?.queued()
        }
        return true
      } catch {
        if (made && client === made) lost(made)
        else again()
        return false
      }
    }
    await connect()
    return async () => {
      stopped = true
      clearTimeout(timer)
      const last = client
      client = undefined
      if (!last) return
      last.off('notification', onNotice)
      await last.query('UNLISTEN *').catch(() => undefined)
      last.release(true)
    }
  }
}
