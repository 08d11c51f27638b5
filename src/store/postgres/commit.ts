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
  const spec = row && commit.spec ? datedNumber(row.spec, 'S') : null
  return {
    row,
    ids: {
      evidence: (row?.evidence ?? []).map((n) => formatId('E', '', Number(n))),
      spec: spec ? formatId('S', spec.day, spec.n) : null,
    },
    done: row?.done_hash != null && row.done_body !== null ? {body: row.done_body, commit_hash: row.done_hash} : null,
  }
}

export async function writeStepCommit(
  client: PoolClient,
  record: RunRecord,
  commit: StepCommit,
  {ids, done: found}: Pick<CommitLock, 'ids' | 'done'>,
  hook?: CommitHook,
  known?: {hashes: ReadonlyMap<string, string>; written: Record<string, string>},
): Promise<Committed> {
  const {run_id: runId, seq, step} = commit
  const at = new Date(commit.recorded_at)
  const hash = commitHash(commit)
  if (found) {
    // The same commit made again (a redrive that never learnt it had committed): what it recorded.
    if (found.commit_hash !== hash)
      throw new PipeError('E_CONFLICT', `snapshot ${seq} of ${runId} already exists`, {
        hint: 'Snapshots are written once; another process may be driving this run.',
      })
    const snapshot = parseRow<Snapshot>('snapshot', found.body, `snapshot ${runId}#${seq}`, `pipe_snapshots(${runId}, ${seq})`)
    return {snapshot, spec: snapshot.spec_version_out && commit.spec ? await specIn(client, snapshot.spec_version_out) : null}
  }
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
  // One statement for the step's evidence: a round trip per item was most of a big step's commit.
  if (texts.length > 0) await client.query('INSERT INTO pipe_evidence (id, body) SELECT * FROM unnest($1::text[], $2::text[])', [ids.evidence, texts])
  if (hook) for (let i = 0; i < texts.length; i++) await hook(`evidence-written:${step}`)
  let spec: CanonicalSpec | null = null
  if (commit.spec) {
    const id = ids.spec!
    const text = specText(commit.spec.draft, id)
    await client.query('INSERT INTO pipe_specs (version, body) VALUES ($1, $2)', [id, text])
    binds[id] = fileHash(text)
    spec = JSON.parse(text) as CanonicalSpec
    if (hook) await hook(`spec-written:${step}`)
  }
  const snapshot = committedSnapshot(commit.snapshot, spec, links)
  // Records named that this commit did not write are bound as they are stored.
  for (const id of boundIds(snapshot)) if (binds[id] === undefined) binds[id] = known?.hashes.get(id) ?? fileHash(await bodyOf(client, id))
  const stored = sealCommitted(snapshot, (id) => binds[id]!)
  if (hook) await hook(`before-snapshot:${step}`)
  try {
    await client.query('INSERT INTO pipe_snapshots (run_id, seq, step, commit_hash, body) VALUES ($1, $2, $3, $4, $5)', [
      runId,
      seq,
      step,
      hash,
      recordText(stored),
    ])
  } catch (error) {
    // Another commit of this seq committed while this one waited for the run's row: the row lock's
    // statement still saw no snapshot (it reads as of its start). Once more from the top (PostgresRecords.tx
    // retries a serialisation failure), which then finds it: the same commit, or a conflict.
    if ((error as {code?: string; constraint?: string}).code === '23505' && (error as {constraint?: string}).constraint === 'pipe_snapshots_pkey')
      throw Object.assign(new Error(`snapshot ${seq} of ${runId} was committed meanwhile`), {code: '40001'})
    throw error
  }
  // The run's head moves with its snapshot, sealed in the same transaction.
  const moved = movedHead(record, seq, stored.meta.record_hash ?? null)
  if (moved) await client.query('UPDATE pipe_runs SET body = $2 WHERE run_id = $1', [runId, recordText(moved)])
  if (hook) await hook(`before-commit:${step}`)
  if (known) Object.assign(known.written, binds)
  return {snapshot: stored, spec}
}

async function bodyOf(client: PoolClient, id: string): Promise<string> {
  const table = id.startsWith('S-') ? 'SELECT body FROM pipe_specs WHERE version = $1' : 'SELECT body FROM pipe_evidence WHERE id = $1'
  const row = (await client.query<{body: string}>(table, [id])).rows[0]
  if (!row) throw new PipeError('E_NOT_FOUND', `${id} is named by a snapshot but is not in the store`, {hint: 'Run pipe audit verify to see all damage.'})
  return row.body
}

async function specIn(client: PoolClient, version: string): Promise<CanonicalSpec> {
  return checkedSpec(version, await bodyOf(client, version))
}
