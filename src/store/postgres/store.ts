/**
 * The PostgreSQL store: the RunStore (../types.ts) over one database, for a team that shares one
 * audit trail. It keeps the file store's records byte for byte (each body column holds the text the
 * file store writes to a file), sealed and chained the same way, so `pipe store copy` moves a store
 * either way with every seal and bind intact and one audit reads both.
 *
 * What a database gives that a folder cannot:
 * - A step commits in one transaction: its evidence, its spec version, its snapshot and its run's
 *   sealed head, all or nothing. There is no commit log to finish after a crash: recover() finds
 *   nothing to do.
 * - A step's ids (S-, E-) and a feature's (F-) are reserved from counter rows by one statement
 *   each, before the transaction that uses them, so no row every worker needs is locked while a
 *   holder is inside its transaction; a transaction that fails leaves a gap, never a repeat. A run's
 *   id is taken inside its creation, under the run index's own counter row, which keeps that chain
 *   linear and the ids in its order (run creations are short and never wait on a step).
 * - No session waits for a row lock, or sits idle inside a transaction, as long as a lease
 *   (lock_timeout, idle_in_transaction_session_timeout): a stalled holder holds nobody up past it.
 * - A run is held under a lease with an epoch on its row: a holder that dies loses it when the lease
 *   runs out, and one frozen past it finds the epoch moved on and cannot commit (E_CONFLICT).
 *
 * PIPE_AUDIT_KEY seals in this process and never leaves it: only seals reach the database.
 */
import type {Pool, PoolClient} from 'pg'
import {PipeError} from '../../errors.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import {compareIds} from '../trail/ids.js'
import {checkRecord, sealMessage} from '../trail/integrity.js'
import {lineText, recordText} from '../trail/records.js'
import {changedRun, type RunStart} from '../trail/runs.js'
import {localRoot, safeUrl} from '../location.js'
import type {
  AuditKinds,
  AuditReport,
  CommitHook,
  Committed,
  LedgerRecords,
  Release,
  RunDraft,
  RunHolder,
  RunPage,
  RunQuery,
  RunStore,
  StartedRun,
  StepCommit,
  UpdateOptions,
} from '../types.js'
import {listChildRows, listRunRows} from './listing.js'
import {auditPostgres} from './audit.js'
import {timelineOf, vouchRun} from './vouch-read.js'
import {databaseError, PostgresRecords} from './records.js'
import {childKey, parseRow} from './rows.js'
import type {BudgetHolds} from '../budget-holds.js'
import {PostgresHolds} from './holds.js'
import {holderOf} from './holder.js'
import type {RunWorkspace, TeamQueue} from '../team.js'
import {CancelWatch} from './cancel-watch.js'
import {PostgresWork} from './work.js'
import {PostgresLedger} from './ledger.js'
import {PostgresArchive} from './archive.js'
import {boundHashIn, committedBefore, lockForCommit, prepareStepCommit, writeStepCommit} from './commit.js'
import {commitHeld, updateHeld, type HeldRow} from './held.js'
import {insertRun} from './create-run.js'
import {ensureDaySequence} from './ids.js'
import {sealedStepState} from '../step-state.js'
import {leaseMs, openPool} from './pg.js'

type Start = RunStart

export {safeUrl}
export {nameHolder} from './holder.js'
export {databaseError} from './records.js'

export {childKey}
export type {RunWorkspace}

export class PostgresStore extends PostgresRecords implements RunStore {
  readonly root: string
  /**
   * Runs this process holds: the epoch its lease took, the timer that renews it, and the run's row
   * body as this process last wrote it or checked it under the row's lock (./held.ts).
   */
  private readonly held = new Map<string, {epoch: number; token: string; timer: NodeJS.Timeout; body?: string | undefined}>()

  private constructor(url: string, pool: Pool) {
    super(url, pool)
    // What a run keeps beside its records (artifacts, slots, the reply cache) stays on this machine.
    this.root = localRoot(process.cwd(), url)
    this.archiving = new PostgresArchive(this, this.root)
  }

  /** Connects and migrates (see pg.ts). */
  static async connect(url: string): Promise<PostgresStore> {
    return new PostgresStore(url, await openPool(url))
  }

  private readonly cancels = new CancelWatch()

  /** Calls `stop` once when a cancel request (requestCancel) for the run is seen (./cancel-watch.ts). Returns the unwatch. */
  watchCancel(runId: string, stop: (reason: string) => void): () => void {
    return this.cancels.watch(runId, stop)
  }

  /** A cancel request seen for a run (at a renewal, a commit, or a notice, see PostgresWork.listen). */
  cancelSeen(runId: string, reason: string | null): void {
    this.cancels.seen(runId, reason)
  }

  readonly requestCancel = (runId: string, request: string): Promise<void> => this.team.requestCancel(runId, request)
  readonly cancelRequest = (runId: string): Promise<string | null> => this.team.cancelRequest(runId)
  /** The queue, leases and cancel requests workers share (../team.ts). */
  readonly team: TeamQueue = new PostgresWork(this)
  readonly budgetHolds: BudgetHolds = new PostgresHolds(this)

  /** pipe store archive (./archive.ts). */
  readonly archiving: PostgresArchive

  /**
   * Runs a claim took the lease of (PostgresWork.claim), held until the claimer gives them back
   * (unclaim): acquireRun lends that lease to the engine, whose release only ends the loan, so the
   * claimer takes a stopped run off the queue before anyone else can claim it.
   */
  private readonly claimed = new Map<string, {release: Release; lent: boolean}>()

  adoptClaim(runId: string, epoch: number, token: string): void {
    this.claimed.set(runId, {release: this.hold(runId, epoch, token), lent: false})
  }

  async unclaim(runId: string): Promise<void> {
    const claim = this.claimed.get(runId)
    if (!claim) return
    this.claimed.delete(runId)
    await claim.release()
  }

  /** The epoch under which this process holds a run, or null. */
  heldEpoch(runId: string): number | null {
    return this.held.get(runId)?.epoch ?? null
  }

  /** Ends the connections (and the leases' renewal); a process exits without it too. */
  async close(): Promise<void> {
    for (const {timer} of this.held.values()) clearInterval(timer)
    this.held.clear()
    await this.pool.end()
  }

  // Runs and their timelines

  createRun(draft: RunDraft, now: Date, event: RunEvent): Promise<RunRecord> {
    return this.create(draft, now, event, undefined).then((made) => made.record)
  }

  async createStartedRun(draft: RunDraft, now: Date, created: RunEvent, start: Start): Promise<StartedRun> {
    const made = await this.create(draft, now, created, start)
    return {record: made.record, release: made.release!}
  }

  private async create(draft: RunDraft, now: Date, event: RunEvent, start: Start | undefined): Promise<{record: RunRecord; release?: Release}> {
    await this.assertCanWrite()
    await this.daySequence('R', now)
    const holder = start ? holderOf() : null
    const record = await this.tx('cannot create a run', (client) => insertRun(client, {draft, now, event, start, holder}))
    if (!holder) return {record}
    const release = this.hold(record.run_id, 1, holder.token)
    // As inserted: its first change (the first step's start) is one statement, not a locked read and two writes.
    this.knowBody(record.run_id, 1, recordText(record))
    return {record, release}
  }

  /** Makes today's id sequence of R- or S- before a transaction numbers in it (once per process and day). */
  async daySequence(prefix: 'R' | 'S', now: Date): Promise<void> {
    try {
      await ensureDaySequence(this.pool, prefix, now)
    } catch (error) {
      throw databaseError(error, 'cannot allocate an id')
    }
  }

  /** Keeps a held run's lease alive until released. */
  private hold(runId: string, epoch: number, token: string): Release {
    const timer = setInterval(
      () => {
        this.pool
          .query<{cancel_request: string | null}>(
            'UPDATE pipe_runs SET lease_until = now() + make_interval(secs => $3::double precision / 1000) WHERE run_id = $1 AND epoch = $2 RETURNING cancel_request',
            [runId, epoch, leaseMs()],
          )
          .then(({rows}) => this.cancelSeen(runId, rows[0]?.cancel_request ?? null))
          .catch(() => undefined)
      },
      Math.max(100, Math.floor(leaseMs() / 3)),
    )
    timer.unref()
    this.held.set(runId, {epoch, token, timer})
    return async () => {
      const mine = this.held.get(runId)
      if (mine?.epoch !== epoch) return
      clearInterval(mine.timer)
      this.held.delete(runId)
      const release = (): Promise<unknown> =>
        this.query('cannot release a run', 'UPDATE pipe_runs SET holder = NULL, lease_until = NULL WHERE run_id = $1 AND epoch = $2', [runId, epoch])
      // A pool shared by many runs (pipe worker) may hand out an idle connection the server dropped
      // (a restart): the release is idempotent, so once more on a fresh one rather than let that
      // error hide why the run stopped.
      try {
        await release()
      } catch (error) {
        if ((error as {code?: string}).code !== 'E_IO') throw error
        await release()
      }
    }
  }

  async finishCreations(): Promise<void> {
    // A run is created in one transaction: a crash leaves nothing to finish.
  }

  async readRun(runId: string): Promise<RunRecord> {
    const rows = await this.query<{body: string}>(`cannot read run ${runId}`, 'SELECT body FROM pipe_runs WHERE run_id = $1', [runId])
    if (!rows[0]) throw await this.archiving.runNotFound(runId, safeUrl(this.url))
    return parseRow<RunRecord>('run', rows[0].body, `the run record of ${runId}`, `pipe_runs(${runId})`)
  }

  /**
   * E_INTEGRITY, naming each field, unless the trail vouches for the run as its row stands now
   * (../vouch.ts): called before anything of a run is executed or sealed again.
   */
  async vouch(runId: string): Promise<RunRecord> {
    return vouchRun(this, runId)
  }

  async assertRunExists(runId: string): Promise<void> {
    const rows = await this.query(`cannot read run ${runId}`, 'SELECT 1 FROM pipe_runs WHERE run_id = $1', [runId])
    if (rows.length === 0) throw await this.archiving.runNotFound(runId, safeUrl(this.url))
  }

  async listRunIds(): Promise<string[]> {
    const rows = await this.query<{run_id: string}>('cannot list runs', 'SELECT run_id FROM pipe_runs')
    return rows.map((r) => r.run_id).sort((a, b) => compareIds(b, a))
  }

  readonly listRuns = (query: RunQuery): Promise<RunPage> => listRunRows(this, query)
  readonly listChildren = (runId: string): Promise<RunRecord[]> => listChildRows(this, runId)

  /** The run's row, locked for this transaction; E_CONFLICT when this process held it and another holder has taken it since. */
  private async lockRun(client: PoolClient, runId: string): Promise<RunRecord> {
    const {rows} = await client.query<{body: string; epoch: string; cancel_request: string | null}>(
      'SELECT body, epoch, cancel_request FROM pipe_runs WHERE run_id = $1 FOR UPDATE',
      [runId],
    )
    return this.lockedRecord(runId, rows[0])
  }

  /** The record of a run's row this transaction locked, refused as lockRun says. */
  private lockedRecord(runId: string, row: {body: string; epoch: string; cancel_request: string | null} | undefined): RunRecord {
    const rows = row ? [row] : []
    this.cancelSeen(runId, rows[0]?.cancel_request ?? null)
    if (!rows[0]) throw new PipeError('E_NOT_FOUND', `run ${runId} not found in ${safeUrl(this.url)}`, {hint: 'pipe runs list shows the runs of this store.'})
    const mine = this.held.get(runId)
    if (mine && Number(rows[0].epoch) !== mine.epoch) {
      throw new PipeError('E_CONFLICT', `run ${runId} was taken over by another holder (its lease ran out): this process no longer drives it`, {
        hint: 'Nothing was recorded by this process; pipe runs show RUN says who holds the run now.',
      })
    }
    const record = parseRow<RunRecord>('run', rows[0].body, `the run record of ${runId}`, `pipe_runs(${runId})`)
    // Every change seals the record again: one changed in its row since pipe sealed it (or sealed
    // without the key in use) would come out vouched for. Only a record as pipe wrote it is changed.
    const seal = checkRecord(record)
    if (seal !== 'ok')
      throw new PipeError('E_INTEGRITY', `run ${runId} cannot be changed: its record in pipe_runs is ${sealMessage(seal)}`, {
        hint: `Nothing was recorded. pipe audit verify ${runId} names what was changed; restore the row from a backup${seal === 'no-key' ? ', or set PIPE_AUDIT_KEY as the workers of the team have it' : ''}.`,
      })
    return record
  }

  async updateRun(runId: string, change: (record: RunRecord) => void, event: RunEvent, options: UpdateOptions = {}): Promise<RunRecord> {
    const what = `cannot update run ${runId}`
    const held = this.heldRow(runId)
    // A run not held (or not known as written) goes the locked way, durable: it is seldom a step's start.
    const fast = held && (await updateHeld(this.pool, what, runId, held, change, event, options.durable !== false))
    if (fast) {
      this.knowBody(runId, held.epoch, fast.body)
      this.cancelSeen(runId, fast.cancel)
      return fast.record
    }
    let epoch: number | undefined
    const {record, body} = await this.tx(what, async (client) => {
      const locked = await this.lockRun(client, runId)
      epoch = this.held.get(runId)?.epoch
      const {record, line, n} = changedRun(locked, change, event)
      const body = recordText(record)
      await client.query('INSERT INTO pipe_events (run_id, n, line) VALUES ($1, $2, $3)', [runId, n, lineText(line)])
      await client.query('UPDATE pipe_runs SET body = $2 WHERE run_id = $1', [runId, body])
      return {record, body}
    })
    if (epoch !== undefined) this.knowBody(runId, epoch, body)
    return record
  }

  /** The row of a run this process holds, as it last wrote it or checked it under the row's lock (./held.ts). */
  private heldRow(runId: string): HeldRow | undefined {
    const mine = this.held.get(runId)
    return mine?.body === undefined ? undefined : {epoch: mine.epoch, body: mine.body}
  }

  private knowBody(runId: string, epoch: number, body: string): void {
    const mine = this.held.get(runId)
    if (mine?.epoch === epoch) mine.body = body
  }

  appendEvent(runId: string, event: RunEvent): Promise<RunRecord> {
    return this.updateRun(runId, () => undefined, event)
  }

  async readEvents(runId: string): Promise<RunEvent[]> {
    const rows = await this.query<{line: string; n: number}>(
      `cannot read the timeline of ${runId}`,
      'SELECT n, line FROM pipe_events WHERE run_id = $1 ORDER BY n',
      [runId],
    )
    return timelineOf(runId, rows)
  }

  async acquireRun(runId: string): Promise<Release> {
    // Claimed with its lease (PostgresWork.claim): that lease is this holder's, lent until released.
    const claim = this.claimed.get(runId)
    if (claim && !claim.lent && this.held.has(runId)) {
      claim.lent = true
      return async () => {
        claim.lent = false
      }
    }
    await this.assertCanWrite()
    const holder = holderOf()
    const rows = await this.query<{epoch: string}>(
      `cannot take run ${runId}`,
      `UPDATE pipe_runs SET holder = $2, epoch = epoch + 1, lease_until = now() + make_interval(secs => $3::double precision / 1000)
       WHERE run_id = $1 AND (holder IS NULL OR lease_until IS NULL OR lease_until < now()) RETURNING epoch`,
      [runId, JSON.stringify(holder), leaseMs()],
    )
    if (!rows[0]) {
      await this.assertRunExists(runId)
      const owner = await this.runOwner(runId)
      throw new PipeError('E_CONFLICT', `run ${runId} is being driven by another pipe process (pid ${owner?.pid ?? '?'} on ${owner?.host ?? '?'})`, {
        hint: 'Wait for it to finish, or stop it; its lease frees the run when it stops renewing it. pipe runs show shows its state.',
      })
    }
    return this.hold(runId, Number(rows[0].epoch), holder.token)
  }

  async runOwner(runId: string): Promise<RunHolder | null> {
    const rows = await this.query<{holder: string | null; alive: boolean}>(
      `cannot read run ${runId}`,
      'SELECT holder, (lease_until IS NOT NULL AND lease_until > now()) AS alive FROM pipe_runs WHERE run_id = $1',
      [runId],
    )
    const row = rows[0]
    if (!row?.holder) return null
    const holder = JSON.parse(row.holder) as {pid: number; host: string}
    return {pid: holder.pid, host: holder.host, alive: row.alive}
  }

  /**
   * A step's working state (an agent's conversation) is written between commits: a holder whose
   * lease was taken over (it was frozen past it) must not overwrite what the new holder goes on
   * with, so the write lands only while this process's epoch is the run's (the row locked against
   * a takeover in between), and is E_CONFLICT otherwise, as its commit would be.
   */
  override async writeStepState(runId: string, step: string, seq: number, state: unknown): Promise<void> {
    const mine = this.held.get(runId)
    if (!mine) return super.writeStepState(runId, step, seq, state)
    const rows = await this.query(
      `cannot write the state of step ${step}`,
      `INSERT INTO pipe_step_state (run_id, step, seq, body)
       SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM pipe_runs WHERE run_id = $1 AND epoch = $5 FOR SHARE)
       ON CONFLICT (run_id, step, seq) DO UPDATE SET body = EXCLUDED.body RETURNING 1`,
      [runId, step, seq, `${JSON.stringify(sealedStepState(runId, step, seq, state))}\n`, mine.epoch],
    )
    if (rows.length === 0) {
      throw new PipeError('E_CONFLICT', `run ${runId} was taken over by another holder (its lease ran out): this process no longer drives it`, {
        hint: 'Nothing was recorded by this process; pipe runs show RUN says who holds the run now.',
      })
    }
  }

  // The step commit

  /** Hashes of the spec versions and evidence this process committed (their rows never change). */
  private readonly bound = new Map<string, string>()

  async commitStep(commit: StepCommit, hook?: CommitHook): Promise<Committed> {
    // One transaction a step: its ids come from sequences (./ids.ts), so nothing every holder needs is locked.
    if (commit.spec) await this.daySequence('S', new Date(commit.recorded_at))
    const what = `cannot record step ${commit.step} of ${commit.run_id}`
    // A test hook stops inside the transaction between the writes: only the locked way has them apart.
    const held = hook ? undefined : this.heldRow(commit.run_id)
    const fast = held && (await commitHeld(this.pool, what, commit, held, this.bound))
    let done: {committed: Committed; binds: Record<string, string>}
    if (fast) {
      this.knowBody(commit.run_id, held.epoch, fast.body)
      this.cancelSeen(commit.run_id, fast.cancel)
      done = fast
    } else {
      let epoch: number | undefined
      let body: string | undefined
      done = await this.tx(what, async (client) => {
        const locked = await lockForCommit(client, commit)
        const record = this.lockedRecord(commit.run_id, locked.row)
        epoch = this.held.get(commit.run_id)?.epoch
        if (locked.done) return {committed: await committedBefore(client, commit, locked.done), binds: {}}
        const prepared = await prepareStepCommit(record, commit, locked.ids, boundHashIn(client, this.bound))
        body = await writeStepCommit(client, commit, prepared, locked.row!.body, hook)
        return {committed: {snapshot: prepared.stored, spec: prepared.spec?.record ?? null}, binds: prepared.binds}
      })
      if (epoch !== undefined && body !== undefined) this.knowBody(commit.run_id, epoch, body)
    }
    // Kept once committed: the rows are append-only, so a later step binds them without reading them back.
    if (this.bound.size > 10000) this.bound.clear()
    for (const [id, hash] of Object.entries(done.binds)) this.bound.set(id, hash)
    if (hook) await hook(`committed:${commit.step}`)
    return done.committed
  }

  async recover(): Promise<boolean> {
    // Every commit is one transaction: there is never a half-made one to finish.
    return false
  }

  async repairEndedRun(): Promise<boolean> {
    return false
  }

  async readSnapshots(runId: string): Promise<Snapshot[]> {
    const rows = await this.query<{body: string; seq: number}>(
      `cannot read the snapshots of ${runId}`,
      'SELECT seq, body FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq',
      [runId],
    )
    return rows.map((r) => {
      const snapshot = parseRow<Snapshot>('snapshot', r.body, `snapshot ${runId}#${r.seq}`, `pipe_snapshots(${runId}, ${r.seq})`)
      if (snapshot.run_id !== runId || snapshot.step.seq !== r.seq)
        throw new PipeError('E_INTEGRITY', `snapshot ${runId}#${r.seq} names ${snapshot.run_id}#${snapshot.step.seq}`, {
          hint: 'It was changed outside pipe; run pipe audit verify to see all damage.',
        })
      return snapshot
    })
  }

  // Spec versions, evidence, features

  ledger(): LedgerRecords {
    return new PostgresLedger(this)
  }

  audit(runId?: string, kinds?: AuditKinds): Promise<AuditReport> {
    return auditPostgres(this, runId, kinds)
  }
}
