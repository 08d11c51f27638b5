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
import type {RunEvent, RunRecord} from '../../types/run.js'
import type {RunDraft} from '../types.js'
import {childKey, type PostgresStore, type RunWorkspace} from './store.js'

/** The channel a child's end is announced on, with its parent's run id as the payload. */
export const CHILDREN_CHANNEL = 'pipe_children'
/** Where a queued run is announced (schema migration 5), with its queue's name. */
export const QUEUE_CHANNEL = 'pipe_queue'

/** A workspace a worker serves: its stable id and, for people, where it is on that worker's machine. */
export interface ServedWorkspace {
  id: string
  label: string
}

export interface LiveWorker {
  id: string
  host: string
  pid: number
  workspaces: ServedWorkspace[]
}

/** Where a queued run stands for people: its queue, and why no worker has taken it when none can. */
export interface QueueEntry {
  queue: string
  /** Set when no live worker of the queue serves the run's workspace (see noteUnservable). */
  note: string | null
  workspace: RunWorkspace | null
}

/** How long a worker counts as alive without renewing its row (PIPE_LEASE_MS, as a run's lease). */
function aliveMs(): number {
  const set = Number(process.env.PIPE_LEASE_MS)
  return Number.isSafeInteger(set) && set >= 200 ? set : 30000
}

export class PostgresWork {
  constructor(private readonly store: PostgresStore) {}

  /** Creates a run not started and puts it on a queue, in one transaction (pipe run --detach). */
  async createQueued(draft: RunDraft, now: Date, event: RunEvent, queue: string, workspace: RunWorkspace): Promise<RunRecord> {
    return this.store.tx('cannot queue a run', async (client) => {
      const record = await this.store.insertRun(client, {draft, now, event, workspace})
      await client.query('INSERT INTO pipe_queue (run_id, queue) VALUES ($1, $2)', [record.run_id, queue])
      // The workers' for its whole life: what a person gives it later puts it back on this queue (records.ts enqueue).
      await client.query('UPDATE pipe_runs SET detached_queue = $2 WHERE run_id = $1', [record.run_id, queue])
      return record
    })
  }

  /** Runs of a queue that nobody drives now and whose workspace is one of `workspaces` (a run made before workspaces were recorded: any), oldest first. */
  async claimable(queue: string, limit: number, workspaces: readonly string[]): Promise<string[]> {
    const rows = await this.store.query<{run_id: string}>(
      'cannot read the queue',
      `SELECT q.run_id FROM pipe_queue q JOIN pipe_runs r USING (run_id)
       WHERE q.queue = $1 AND (r.holder IS NULL OR r.lease_until IS NULL OR r.lease_until < now())
         AND (r.workspace_id IS NULL OR r.workspace_id = ANY($3::text[]))
       ORDER BY q.enqueued_at, q.run_id LIMIT $2`,
      [queue, limit, workspaces],
    )
    return rows.map((r) => r.run_id)
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
    create?: {draft: RunDraft; now: Date; event: RunEvent; root: string | null}
    /** Made (when missing) but not queued: the step stopped before a slot freed. */
    createOnly?: boolean
  }): Promise<string | null> {
    const {link, limit, queue} = options
    const step = `${link.run_id}/${link.step}`
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
        runId = (await this.store.insertRun(client, {draft, now, event, ...(workspace ? {workspace} : {})})).run_id
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
    await this.store.tx(`cannot take run ${runId} off the queue`, async (client) => {
      const kept = await client.query('UPDATE pipe_queue SET again = false WHERE run_id = $1 AND again RETURNING run_id', [runId])
      if (kept.rows.length > 0) return
      const {rows} = await client.query<{parent_run: string | null}>(
        'DELETE FROM pipe_queue q USING pipe_runs r WHERE q.run_id = $1 AND r.run_id = q.run_id RETURNING r.parent_run',
        [runId],
      )
      const parent = rows[0]?.parent_run
      if (parent) await client.query('SELECT pg_notify($1, $2)', [CHILDREN_CHANNEL, parent])
    })
  }

  /** Asks whoever holds the run to stop it as cancelled (seen at its next heartbeat or commit); the first reason stays. */
  async requestCancel(runId: string, reason: string): Promise<void> {
    await this.store.query(`cannot cancel run ${runId}`, 'UPDATE pipe_runs SET cancel_request = $2 WHERE run_id = $1 AND cancel_request IS NULL', [
      runId,
      reason,
    ])
  }

  async cancelRequest(runId: string): Promise<string | null> {
    const rows = await this.store.query<{cancel_request: string | null}>(`cannot read run ${runId}`, 'SELECT cancel_request FROM pipe_runs WHERE run_id = $1', [
      runId,
    ])
    return rows[0]?.cancel_request ?? null
  }

  /**
   * Calls `wake` with a parent's run id each time one of its children stops, and `queued` each time
   * a run is put on `queue`; returns the stop. One connection of the pool stays taken while it listens.
   */
  async listen(wake: (parentRunId: string) => void, queue?: {name: string; queued: () => void}): Promise<() => Promise<void>> {
    const client = await this.store.pool.connect()
    const onNotice = (message: {channel: string; payload?: string | undefined}): void => {
      if (message.channel === CHILDREN_CHANNEL && message.payload) wake(message.payload)
      else if (message.channel === QUEUE_CHANNEL && queue && message.payload === queue.name) queue.queued()
    }
    client.on('notification', onNotice)
    // A connection the server dropped: the poll behind the wake goes on without it.
    client.on('error', () => undefined)
    await client.query(`LISTEN ${CHILDREN_CHANNEL}`)
    if (queue) await client.query(`LISTEN ${QUEUE_CHANNEL}`)
    return async () => {
      client.off('notification', onNotice)
      await client.query('UNLISTEN *').catch(() => undefined)
      client.release(true)
    }
  }
}
