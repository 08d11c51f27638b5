/**
 * pipe audit verify on PostgreSQL: the trail's one walk over rows (../trail/audit.ts), reading the
 * store's tables. Only how the rows are read is here.
 */
import type {AuditKinds, AuditReport} from '../types.js'
import {auditRows, type TrailRows} from '../trail/audit.js'
import {tableLocate} from '../trail/audit-walk.js'
import type {PostgresRecords} from './records.js'

type Plain = Record<string, unknown>

function tableRows(store: PostgresRecords): TrailRows {
  const q = <R extends Plain>(text: string, values: unknown[] = []): Promise<R[]> => store.query<R>('cannot audit the store', text, values)
  return {
    runIndex: async () =>
      (await q<{pos: string; line: string}>('SELECT pos, line FROM pipe_run_index ORDER BY pos')).map((r) => ({line: r.line, pos: Number(r.pos)})),
    run: async (id) => {
      const row = (
        await q<{body: string; workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null}>(
          'SELECT body, workspace_id, workspace_root, workspace_sub FROM pipe_runs WHERE run_id = $1',
          [id],
        )
      )[0]
      return row ? {body: row.body, workspace: {id: row.workspace_id, root: row.workspace_root, sub: row.workspace_sub}} : null
    },
    runIds: async () => (await q<{run_id: string}>('SELECT run_id FROM pipe_runs')).map((r) => r.run_id),
    children: async (id) => (await q<{run_id: string}>('SELECT run_id FROM pipe_runs WHERE parent_run = $1', [id])).map((r) => r.run_id),
    events: (id) => q<{pos: number; line: string}>('SELECT n AS pos, line FROM pipe_events WHERE run_id = $1 ORDER BY n', [id]),
    snapshots: (id) => q<{seq: number; body: string}>('SELECT seq, body FROM pipe_snapshots WHERE run_id = $1 ORDER BY seq', [id]),
    snapshot: async (id, seq) => (await q<{body: string}>('SELECT body FROM pipe_snapshots WHERE run_id = $1 AND seq = $2', [id, seq]))[0]?.body ?? null,
    record: async (id) =>
      (
        await q<{body: string}>(id.startsWith('S-') ? 'SELECT body FROM pipe_specs WHERE version = $1' : 'SELECT body FROM pipe_evidence WHERE id = $1', [id])
      )[0]?.body ?? null,
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
