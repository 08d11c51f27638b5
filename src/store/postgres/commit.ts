/**
 * A step's commit inside its transaction (PostgresStore.commitStep holds the run's row lock): its
 * evidence, its spec version, its snapshot and the run's sealed head, written together or not at
 * all. The same commit made again (a redrive that never learnt it had committed) returns what the
 * first one recorded; another commit of that seq is a conflict.
 */
import type {PoolClient} from 'pg'
import {PipeError} from '../../errors.js'
import type {RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {formatId} from '../trail/ids.js'
import {fileHash} from '../trail/integrity.js'
import {evidenceText, recordText, specText} from '../trail/records.js'
import {movedHead} from '../trail/runs.js'
import {boundIds, commitHash, committedSnapshot, sealCommitted} from '../trail/snapshots.js'
import type {CommitHook, Committed, StepCommit} from '../types.js'
import {datedNumber, nextDatedSql, nextEvidenceSql} from './ids.js'
import {checkedSpec, parseRow} from './rows.js'

/** The ids a commit's records take, numbered in its transaction (./ids.ts). */
export interface CommitIds {
  evidence: string[]
  spec: string | null
}

/** The run's row as its commit locks it, the ids the commit takes, and the snapshot of that seq if one was committed already. */
export interface CommitLock {
  row: {body: string; epoch: string; cancel_request: string | null} | undefined
  ids: CommitIds
  done: {body: string; commit_hash: string} | null
}

/**
 * One round trip opens a step's commit: the run's row locked, the snapshot of the seq looked up (a
 * redrive), and the evidence and spec ids taken from their sequences (no row every worker locks).
 */
export async function lockForCommit(client: PoolClient, commit: StepCommit): Promise<CommitLock> {
  const {rows} = await client.query<{
    body: string
    epoch: string
    cancel_request: string | null
    done_body: string | null
    done_hash: string | null
    evidence: string[] | null
    spec: string | null
  }>(
    `SELECT r.body, r.epoch, r.cancel_request, s.body AS done_body, s.commit_hash AS done_hash,
       CASE WHEN $3::int > 0 THEN ${nextEvidenceSql('$3::int')} END AS evidence,
       CASE WHEN $4::text IS NOT NULL THEN ${nextDatedSql('$4::text')} END AS spec
     FROM pipe_runs r LEFT JOIN pipe_snapshots s ON s.run_id = r.run_id AND s.seq = $2
     WHERE r.run_id = $1 FOR UPDATE OF r`,
    [commit.run_id, commit.seq, commit.evidence.length, commit.spec ? 's' : null],
  )
  const row = rows[0]
  return {
    row,
    ids: idsOf(commit, row),
    done: row?.done_hash != null && row.done_body !== null ? {body: row.done_body, commit_hash: row.done_hash} : null,
  }
}

function idsOf(commit: StepCommit, row: {evidence: string[] | null; spec: string | null} | undefined): CommitIds {
  const spec = row && commit.spec ? datedNumber(row.spec, 'S') : null
  return {
    evidence: (row?.evidence ?? []).map((n) => formatId('E', '', Number(n))),
    spec: spec ? formatId('S', spec.day, spec.n) : null,
  }
}

/** The ids a commit's records take, from their sequences, outside any transaction (one that fails leaves a gap, never a repeat). */
export async function takeCommitIds(client: Pick<PoolClient, 'query'>, commit: StepCommit): Promise<CommitIds> {
  if (commit.evidence.length === 0 && !commit.spec) return {evidence: [], spec: null}
  const {rows} = await client.query<{evidence: string[] | null; spec: string | null}>(
    `SELECT CASE WHEN $1::int > 0 THEN ${nextEvidenceSql('$1::int')} END AS evidence,
       CASE WHEN $2::text IS NOT NULL THEN ${nextDatedSql('$2::text')} END AS spec`,
    [commit.evidence.length, commit.spec ? 's' : null],
  )
  return idsOf(commit, rows[0])
}

/** A step's commit made ready to write: every text it stores, sealed, built before any of it is written. */
export interface PreparedCommit {
  hash: string
  evidence: {ids: string[]; texts: string[]}
  spec: {id: string; text: string; record: CanonicalSpec} | null
  stored: Snapshot
  /** The run's record with its head moved to this snapshot, or null when its head is past it already. */
  moved: RunRecord | null
  /** The hashes of the records this commit wrote, by id. */
  binds: Record<string, string>
}

/**
 * Builds what a commit writes from the run's record and the ids it took. `boundHash` gives the
 * hash of a record the snapshot names that this commit does not write (rows never change).
 */
export async function prepareStepCommit(
  record: RunRecord,
  commit: StepCommit,
  ids: CommitIds,
  boundHash: (id: string) => Promise<string>,
): Promise<PreparedCommit> {
  const at = new Date(commit.recorded_at)
  const binds: Record<string, string> = {}
  const links: Snapshot['evidence_links'] = []
  const texts: string[] = []
  for (const [i, item] of commit.evidence.entries()) {
    const id = ids.evidence[i]!
    const text = evidenceText(item.draft, at, id)
    texts.push(text)
    binds[id] = fileHash(text)
    links.push({type: item.link, evidence_id: id})
  }
  let spec: PreparedCommit['spec'] = null
  if (commit.spec) {
    const id = ids.spec!
    const text = specText(commit.spec.draft, id)
    binds[id] = fileHash(text)
    spec = {id, text, record: JSON.parse(text) as CanonicalSpec}
  }
  const snapshot = committedSnapshot(commit.snapshot, spec?.record ?? null, links)
  const written = {...binds}
  // Records named that this commit did not write are bound as they are stored.
  for (const id of boundIds(snapshot)) if (binds[id] === undefined) binds[id] = await boundHash(id)
  const stored = sealCommitted(snapshot, (id) => binds[id]!)
  return {
    hash: commitHash(commit),
    evidence: {ids: ids.evidence.slice(0, texts.length), texts},
    spec,
    stored,
    moved: movedHead(record, commit.seq, stored.meta.record_hash ?? null),
    binds: written,
  }
}

/** The hash of a stored record's text, from the hashes this process already holds or read from its row. */
export const boundHashIn =
  (client: Pick<PoolClient, 'query'>, known: ReadonlyMap<string, string> | undefined) =>
  async (id: string): Promise<string> =>
    known?.get(id) ?? fileHash(await bodyOf(client, id))

/** The same commit made again (a redrive that never learnt it had committed): what it recorded, or a conflict. */
export async function committedBefore(client: PoolClient, commit: StepCommit, found: NonNullable<CommitLock['done']>): Promise<Committed> {
  const {run_id: runId, seq} = commit
  if (found.commit_hash !== commitHash(commit))
    throw new PipeError('E_CONFLICT', `snapshot ${seq} of ${runId} already exists`, {
      hint: 'Snapshots are written once; another process may be driving this run.',
    })
  const snapshot = parseRow<Snapshot>('snapshot', found.body, `snapshot ${runId}#${seq}`, `pipe_snapshots(${runId}, ${seq})`)
  return {snapshot, spec: snapshot.spec_version_out && commit.spec ? await specIn(client, snapshot.spec_version_out) : null}
}

/**
 * Writes a prepared commit inside the transaction that locked the run's row (lockForCommit), one
 * statement a kind of record, with the test hooks between them. Returns the run's row body as it
 * now stands.
 */
export async function writeStepCommit(client: PoolClient, commit: StepCommit, prepared: PreparedCommit, body: string, hook?: CommitHook): Promise<string> {
  const {run_id: runId, seq, step} = commit
  const {evidence, spec, stored, moved} = prepared
  // One statement for the step's evidence: a round trip per item was most of a big step's commit.
  if (evidence.texts.length > 0)
    await client.query('INSERT INTO pipe_evidence (id, body) SELECT * FROM unnest($1::text[], $2::text[])', [evidence.ids, evidence.texts])
  if (hook) for (let i = 0; i < evidence.texts.length; i++) await hook(`evidence-written:${step}`)
  if (spec) {
    await client.query('INSERT INTO pipe_specs (version, body) VALUES ($1, $2)', [spec.id, spec.text])
    if (hook) await hook(`spec-written:${step}`)
  }
  if (hook) await hook(`before-snapshot:${step}`)
  try {
    await client.query('INSERT INTO pipe_snapshots (run_id, seq, step, commit_hash, body) VALUES ($1, $2, $3, $4, $5)', [
      runId,
      seq,
      step,
      prepared.hash,
      recordText(stored),
    ])
  } catch (error) {
    // Another commit of this seq committed while this one waited for the run's row: the row lock's
    // statement still saw no snapshot (it reads as of its start). Once more from the top (PostgresRecords.tx
    // retries a serialisation failure), which then finds it: the same commit, or a conflict.
    if (snapshotTaken(error)) throw Object.assign(new Error(`snapshot ${seq} of ${runId} was committed meanwhile`), {code: '40001'})
    throw error
  }
  // The run's head moves with its snapshot, sealed in the same transaction.
  let now = body
  if (moved) {
    now = recordText(moved)
    await client.query('UPDATE pipe_runs SET body = $2 WHERE run_id = $1', [runId, now])
  }
  if (hook) await hook(`before-commit:${step}`)
  return now
}

/** The snapshot of that run and seq is in the table already. */
export const snapshotTaken = (error: unknown): boolean =>
  (error as {code?: string}).code === '23505' && (error as {constraint?: string}).constraint === 'pipe_snapshots_pkey'

/**
 * A step's whole commit as one statement, for a run this process holds and whose row it knows as
 * it stands (`body`, last written or checked by this process under the row's lock): the run's row
 * moved only if its epoch and body are still those, and the evidence, spec version and snapshot
 * written only if it was. One round trip and one commit, with the guarantees of the locked path:
 * a holder taken over (another epoch) or a row changed since (another body) writes nothing, and the
 * caller goes the locked way, which says why or finds the commit made already (a redrive).
 * Returns the run's cancel request, or undefined when nothing was written.
 */
export async function writeHeldCommit(
  pool: Pick<PoolClient, 'query'>,
  commit: StepCommit,
  prepared: PreparedCommit,
  held: {epoch: number; body: string},
): Promise<{cancel: string | null; body: string} | undefined> {
  const body = prepared.moved ? recordText(prepared.moved) : held.body
  const {rows} = await pool.query<{cancel_request: string | null}>(
    `WITH up AS (UPDATE pipe_runs SET body = $3 WHERE run_id = $1 AND epoch = $2 AND body = $4 RETURNING cancel_request),
       ev AS (INSERT INTO pipe_evidence (id, body) SELECT e.id, e.body FROM unnest($5::text[], $6::text[]) AS e(id, body) WHERE EXISTS (SELECT 1 FROM up)),
       sp AS (INSERT INTO pipe_specs (version, body) SELECT $7::text, $8::text FROM up WHERE $7::text IS NOT NULL),
       sn AS (INSERT INTO pipe_snapshots (run_id, seq, step, commit_hash, body) SELECT $1, $9, $10, $11, $12 FROM up)
     SELECT cancel_request FROM up`,
    [
      commit.run_id,
      held.epoch,
      body,
      held.body,
      prepared.evidence.ids,
      prepared.evidence.texts,
      prepared.spec?.id ?? null,
      prepared.spec?.text ?? null,
      commit.seq,
      commit.step,
      prepared.hash,
      recordText(prepared.stored),
    ],
  )
  return rows[0] ? {cancel: rows[0].cancel_request, body} : undefined
}

async function bodyOf(client: Pick<PoolClient, 'query'>, id: string): Promise<string> {
  const table = id.startsWith('S-') ? 'SELECT body FROM pipe_specs WHERE version = $1' : 'SELECT body FROM pipe_evidence WHERE id = $1'
  const row = (await client.query<{body: string}>(table, [id])).rows[0]
  if (!row) throw new PipeError('E_NOT_FOUND', `${id} is named by a snapshot but is not in the store`, {hint: 'Run pipe audit verify to see all damage.'})
  return row.body
}

async function specIn(client: Pick<PoolClient, 'query'>, version: string): Promise<CanonicalSpec> {
  return checkedSpec(version, await bodyOf(client, version))
}
