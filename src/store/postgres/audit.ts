/**
 * pipe audit verify on PostgreSQL: the trail's one walk over rows (../trail/audit.ts), reading the
 * store's tables. Only how the rows are read is here.
 *
 * The walk asks run by run and record by record; a query each was ~24,000 round trips for 1,000
 * runs (~10 ms a run). So a run's record, timeline and snapshots are read for RUN_BATCH runs at a
 * time, in the walk's order, and the spec versions and evidence a snapshot binds are hashed in
 * windows of RECORD_WINDOW rows from the id asked for (ids are numbered in the order runs make
 * them). What a batch did not hold is read alone, as before; nothing is inferred from a batch's
 * absence but a missing row.
 */
import type {AuditKinds, AuditReport} from '../types.js'
import {auditRows, type TrailRows} from '../trail/audit.js'
import {tableLocate} from '../trail/audit-walk.js'
import {compareIds} from '../trail/ids.js'
import {fileHash} from '../trail/integrity.js'
import type {PostgresRecords} from './records.js'

type Plain = Record<string, unknown>
type RunRow = {body: string; workspace: {id: string | null; root: string | null; sub: string | null}}
type Line = {pos: number; line: string}
type SnapshotRow = {seq: number; body: string}

const RUN_BATCH = 100
const RECORD_WINDOW = 512

function tableRows(store: PostgresRecords): TrailRows {
  const q = <R extends Plain>(text: string, values: unknown[] = []): Promise<R[]> => store.query<R>('cannot audit the store', text, values)
  /** The runs in the walk's order (once runIds() was asked), and each one's place in it. */
  let order: string[] = []
  const place = new Map<string, number>()
  /** The current batch of runs: taken out as the walk reads them. */
  const batch = {runs: new Map<string, RunRow | null>(), events: new Map<string, Line[]>(), snapshots: new Map<string, SnapshotRow[]>()}
  const loadBatch = async (id: string): Promise<void> => {
    const at = place.get(id)
    const ids = at === undefined ? [id] : order.slice(at, at + RUN_BATCH)
    batch.runs = new Map(ids.map((r) => [r, null]))
    batch.events = new Map(ids.map((r) => [r, []]))
    batch.snapshots = new Map(ids.map((r) => [r, []]))
    for (const row of await q<{run_id: string; body: string; workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null}>(
      'SELECT run_id, body, workspace_id, workspace_root, workspace_sub FROM pipe_runs WHERE run_id = ANY($1)',
      [ids],
    ))
      batch.runs.set(row.run_id, {body: row.body, workspace: {id: row.workspace_id, root: row.workspace_root, sub: row.workspace_sub}})
    for (const row of await q<{run_id: string; pos: number; line: string}>(
      'SELECT run_id, n AS pos, line FROM pipe_events WHERE run_id = ANY($1) ORDER BY run_id, n',
      [ids],
    ))
      batch.events.get(row.run_id)?.push({pos: row.pos, line: row.line})
    for (const row of await q<{run_id: string; seq: number; body: string}>(
      'SELECT run_id, seq, body FROM pipe_snapshots WHERE run_id = ANY($1) ORDER BY run_id, seq',
      [ids],
    ))
      batch.snapshots.get(row.run_id)?.push({seq: row.seq, body: row.body})
  }
  /** A batched part of a run: taken out once (a second ask, or a run outside the batch, reads it alone). */
  const take = <T>(map: Map<string, T>, id: string): T | undefined => {
    const found = map.get(id)
    map.delete(id)
    return found
  }
  /** Hashes of spec versions and evidence read ahead, taken out as the walk asks for them. */
  const hashes = new Map<string, string>()
  const recordHash = async (id: string): Promise<string | null> => {
    const ahead = hashes.get(id)
    if (ahead !== undefined) {
      hashes.delete(id)
      return ahead
    }
    const [table, key] = id.startsWith('S-') ? ['pipe_specs', 'version'] : ['pipe_evidence', 'id']
    const rows = await q<{id: string; body: string}>(`SELECT ${key} AS id, body FROM ${table} WHERE ${key} >= $1 ORDER BY ${key} LIMIT ${RECORD_WINDOW}`, [id])
    let found: string | null = null
    for (const row of rows) {
      if (row.id === id) found = fileHash(row.body)
      else hashes.set(row.id, fileHash(row.body))
    }
    return found
  }
  return {
    runIndex: async () =>
      (await q<{pos: string; line: string}>('SELECT pos, line FROM pipe_run_index ORDER BY pos')).map((r) => ({line: r.line, pos: Number(r.pos)})),
    run: async (id) => {
      if (!batch.runs.has(id)) await loadBatch(id)
      const batched = take(batch.runs, id)
      if (batched !== undefined) return batched
      const row = (
        await q<{body: string; workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null}>(
          'SELECT body, workspace_id, workspace_root, workspace_sub FROM pipe_runs WHERE run_id = $1',
          [id],
        )
      )[0]
      return row ? {body: row.body, workspace: {id: row.workspace_id, root: row.workspace_root, sub: row.workspace_sub}} : null
    },
    runIds: async () => {
      const ids = (await q<{run_id: string}>('SELECT run_id FROM pipe_runs')).map((r) => r.run_id)
      order = [...ids].sort(compareIds)
      order.forEach((r, i) => place.set(r, i))
      return ids
    },
    children: async (id) => (await q<{run_id: string}>('SELECT run_id FROM pipe_runs WHERE parent_run = $1', [id])).map((r) => r.run_id),
    events: async (id) => take(batch.events, id) ?? q<Line>('SELECT n AS pos, line FROM pipe_events WHERE run_id = $1 ORDER BY n', [id]),
    snapshots: async (id) => take(batch.snapshots, id) ?? q<SnapshotRow>('SELECT seq, body FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq', [id]),
    snapshot: async (id, seq) => (await q<{body: string}>('SELECT body FROM pipe_snapshots WHERE run_id = $1 AND seq = $2', [id, seq]))[0]?.body ?? null,
    record: async (id) =>
      (
        await q<{body: string}>(id.startsWith('S-') ? 'SELECT body FROM pipe_specs WHERE version = $1' : 'SELECT body FROM pipe_evidence WHERE id = $1', [id])
      )[0]?.body ?? null,
    recordHash,
    specIds: async () => (await q<{version: string}>('SELECT version FROM pipe_specs')).map((r) => r.version),
    evidenceIds: async () => (await q<{id: string}>('SELECT id FROM pipe_evidence')).map((r) => r.id),
    features: () => q<{id: string; body: string}>('SELECT id, body FROM pipe_features ORDER BY id'),
    ledgerLog: async () =>
      (await q<{pos: string; line: string}>('SELECT pos, line FROM pipe_ledger_log ORDER BY pos')).map((r) => ({line: r.line, pos: Number(r.pos)})),
    ledger: () => q<{key: string; body: string}>('SELECT key, body FROM pipe_ledger ORDER BY key'),
    locate: tableLocate,
  }
}

export function auditPostgres(store: PostgresRecords, runId?: string, kinds?: AuditKinds): Promise<AuditReport> {
  return auditRows(tableRows(store), runId, kinds)
}
