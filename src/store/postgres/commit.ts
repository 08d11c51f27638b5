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
import type {PostgresRecords} from './records.js'
import {checkedSpec, parseRow} from './rows.js'

/** The ids a commit's records take, reserved before its transaction (PostgresRecords.reserveNumbers). */
export interface CommitIds {
  evidence: string[]
  spec: string | null
}

export async function reserveCommitIds(records: PostgresRecords, commit: StepCommit): Promise<CommitIds> {
  const count = commit.evidence.length
  const first = count > 0 ? await records.reserveNumbers('E', count) : 0
  return {
    evidence: Array.from({length: count}, (_, i) => formatId('E', '', first + i)),
    spec: commit.spec ? await records.reserveDatedId('S', new Date(commit.recorded_at)) : null,
  }
}

export async function writeStepCommit(client: PoolClient, record: RunRecord, commit: StepCommit, ids: CommitIds, hook?: CommitHook): Promise<Committed> {
  const {run_id: runId, seq, step} = commit
  const at = new Date(commit.recorded_at)
  const hash = commitHash(commit)
  const found = (
    await client.query<{body: string; commit_hash: string}>('SELECT body, commit_hash FROM pipe_snapshots WHERE run_id = $1 AND seq = $2', [runId, seq])
  ).rows[0]
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
  for (const [i, item] of commit.evidence.entries()) {
    const id = ids.evidence[i]!
    const text = evidenceText(item.draft, at, id)
    await client.query('INSERT INTO pipe_evidence (id, body) VALUES ($1, $2)', [id, text])
    binds[id] = fileHash(text)
    links.push({type: item.link, evidence_id: id})
    if (hook) await hook(`evidence-written:${step}`)
  }
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
  for (const id of boundIds(snapshot)) if (binds[id] === undefined) binds[id] = fileHash(await bodyOf(client, id))
  const stored = sealCommitted(snapshot, (id) => binds[id]!)
  if (hook) await hook(`before-snapshot:${step}`)
  await client.query('INSERT INTO pipe_snapshots (run_id, seq, step, commit_hash, body) VALUES ($1, $2, $3, $4, $5)', [
    runId,
    seq,
    step,
    hash,
    recordText(stored),
  ])
  // The run's head moves with its snapshot, sealed in the same transaction.
  const moved = movedHead(record, seq, stored.meta.record_hash ?? null)
  if (moved) await client.query('UPDATE pipe_runs SET body = $2 WHERE run_id = $1', [runId, recordText(moved)])
  if (hook) await hook(`before-commit:${step}`)
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
