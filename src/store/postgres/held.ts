/**
 * A run this process holds, changed without a locking read first. The store keeps the run's row body
 * as this process last wrote it or read it (and checked its seal) under the row's lock; a change made
 * from it is one statement that writes only while the row still has that holding's epoch and that
 * very body. A takeover (the epoch moved on) or a change by anyone else since (another body) writes
 * nothing, and the caller goes the locked way, which refuses, or reads the row afresh and checks it.
 * One round trip and one commit where BEGIN, the locked read, each write and COMMIT were one each.
 */
import type {Pool, PoolClient} from 'pg'
import type {RunEvent, RunRecord} from '../../types/run.js'
import {lineText, recordText} from '../trail/records.js'
import {changedRun} from '../trail/runs.js'
import type {Committed, StepCommit} from '../types.js'
import {boundHashIn, prepareStepCommit, takeCommitIds, writeHeldCommit} from './commit.js'
import {databaseError, withClient} from './records.js'

/** A held run's row as this process knows it: the epoch of its holding and the body it last wrote or checked. */
export interface HeldRow {
  epoch: number
  body: string
}

/** What a held write did: the row's body now, and the run's cancel request as it read it. */
interface Written {
  body: string
  cancel: string | null
}

/**
 * A write of a held run, or undefined when the server refused it: a statement is its own
 * transaction, so nothing of it is kept, and the locked way decides. A connection lost meanwhile
 * may have committed it: that is said (E_IO), never made again.
 */
async function attempt<T>(what: string, write: () => Promise<T>): Promise<T | undefined> {
  try {
    return await write()
  } catch (error) {
    const code = (error as {code?: unknown}).code
    if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && !code.startsWith('08')) return undefined
    throw databaseError(error, what)
  }
}

/**
 * updateRun of a held run: the record changed, its timeline line and the run's row in one statement.
 * Not `durable`, its transaction commits without waiting for the WAL to reach the disk
 * (synchronous_commit off for it alone: PostgreSQL reads the setting at commit, and the statement's
 * own transaction is what set_config's `true` scopes it to). A server crash may then lose it, and
 * only it: the run's next durable commit, later in the WAL, flushes it too.
 */
export async function updateHeld(
  pool: Pool,
  what: string,
  runId: string,
  held: HeldRow,
  change: (record: RunRecord) => void,
  event: RunEvent,
  durable: boolean,
): Promise<(Written & {record: RunRecord}) | undefined> {
  const {record, line, n} = changedRun(JSON.parse(held.body) as RunRecord, change, event)
  const body = recordText(record)
  // A SELECT in WITH runs only when referenced: the final SELECT reads it.
  const flush = durable ? '' : `, unflushed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting)`
  const row = await attempt(
    what,
    async () =>
      (
        await pool.query<{cancel_request: string | null}>(
          `WITH up AS (UPDATE pipe_runs SET body = $3 WHERE run_id = $1 AND epoch = $2 AND body = $4 RETURNING cancel_request),
             ev AS (INSERT INTO pipe_events (run_id, n, line) SELECT $1, $5, $6 FROM up)${flush}
           SELECT cancel_request FROM up${durable ? '' : ', unflushed'}`,
          [runId, held.epoch, body, held.body, n, lineText(line)],
        )
      ).rows[0],
  )
  return row ? {record, body, cancel: row.cancel_request} : undefined
}

/**
 * commitStep of a held run without a test hook: its records and the run's head in one statement
 * (commit.ts writeHeldCommit). A commit whose records take ids takes them in the same transaction
 * first (their texts name them), so a step is still one commit: BEGIN, the ids, the write, COMMIT.
 */
export async function commitHeld(
  pool: Pool,
  what: string,
  commit: StepCommit,
  held: HeldRow,
  bound: ReadonlyMap<string, string>,
): Promise<(Written & {committed: Committed; binds: Record<string, string>}) | undefined> {
  const write = async (client: Pick<PoolClient, 'query'>): Promise<(Written & {committed: Committed; binds: Record<string, string>}) | undefined> => {
    const ids = await takeCommitIds(client, commit)
    const prepared = await prepareStepCommit(JSON.parse(held.body) as RunRecord, commit, ids, boundHashIn(client, bound))
    const written = await writeHeldCommit(client, commit, prepared, held)
    return written && {...written, committed: {snapshot: prepared.stored, spec: prepared.spec?.record ?? null}, binds: prepared.binds}
  }
  if (commit.evidence.length === 0 && !commit.spec) return attempt(what, () => write(pool))
  return withClient(pool, what, (client, lose) =>
    attempt(what, async () => {
      await client.query('BEGIN')
      const done = await write(client).catch(async (error: unknown) => {
        await client.query('ROLLBACK').catch(lose)
        throw error
      })
      // Nothing written (a takeover, a row changed since): the locked way decides.
      await client.query(done ? 'COMMIT' : 'ROLLBACK')
      return done
    }),
  )
}
