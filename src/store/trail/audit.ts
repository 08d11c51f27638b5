/**
 * pipe audit verify over a store's records as rows (TrailRows: the PostgreSQL store's tables, the
 * in-memory store's maps): the same seals and links the file store's audit checks (see ../audit.ts).
 * Each finding names its table and row:
 * - a row changed after it was sealed (an UPDATE with the trigger disabled): its seal, and the field;
 * - a row re-sealed without PIPE_AUDIT_KEY while the key is in use: "sealed without the audit key";
 * - a line removed from a chain (a run's timeline, the run index, the ledger log): the gap, and the
 *   next line's link to a line that is not there;
 * - a record a snapshot binds that differs from what was bound.
 */
import type {Evidence} from '../../types/evidence.js'
import type {RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {ORPHAN_FEATURE, runIndexOrder, timeBackwards} from './audit-notes.js'
import {compareIds} from './ids.js'
import {
  auditKey,
  checkLine,
  checkRecord,
  fileHash,
  creationFindings,
  runCreationHash,
  runStateHash,
  sealMessage,
  verifyEvidence,
  verifySnapshot,
  verifySpec,
  type SealCheck,
} from './integrity.js'
import type {AuditFinding, AuditKinds, AuditReport} from '../types.js'
import {hashJson} from '../../util/hash.js'

type Plain = Record<string, unknown>

/**
 * A store's records as the audit reads them: each the text the store keeps, by table and row. Every
 * list is in its chain's or its key's order.
 */
export interface TrailRows {
  runIndex(): Promise<Array<{pos: number; run_id: string; line: string}>>
  /** A run's row: its record and the workspace its row sends a worker to (null columns: none). */
  run(id: string): Promise<{body: string; workspace_id: string | null; workspace_root: string | null; workspace_sub: string | null} | null>
  runIds(): Promise<string[]>
  children(id: string): Promise<string[]>
  events(id: string): Promise<Array<{n: number; line: string}>>
  snapshots(id: string): Promise<Array<{seq: number; body: string}>>
  /** A spec version's (S-) or evidence record's (E-) text, or null. */
  record(id: string): Promise<string | null>
  specIds(): Promise<string[]>
  evidenceIds(): Promise<string[]>
  features(): Promise<Array<{id: string; body: string}>>
  ledgerLog(): Promise<Array<{pos: number; key: string; line: string}>>
  ledger(): Promise<Array<{key: string; body: string}>>
}

class Findings {
  problems: AuditFinding[] = []
  notes: AuditFinding[] = []
  unverifiable = 0

  problem(record: string, file: string, field: string, message: string): void {
    this.problems.push({record, file, field, message})
  }

  /** A seal's check: a keyed seal without the key is counted as unverifiable, never as a pass. */
  seal(check: SealCheck, record: string, file: string, field: string): void {
    if (check === 'ok') return
    if (check === 'no-key') {
      this.unverifiable++
      return
    }
    this.problem(record, file, field, sealMessage(check))
  }
}

function parse(text: string): Plain | null {
  try {
    const value = JSON.parse(text) as unknown
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Plain) : null
  } catch {
    return null
  }
}

/** Checks a chain of lines ordered by position: each sealed, each linked to the one before, none missing. */
function checkChain(lines: Array<{pos: number; line: string}>, name: string, record: (pos: number, line: Plain | null) => string, out: Findings): Plain[] {
  const parsed: Plain[] = []
  let prev: string | null = null
  let expected = 1
  for (const {pos, line} of lines) {
    const where = `${name}(${pos})`
    const value = parse(line)
    if (pos !== expected)
      out.problem(
        record(pos, value),
        where,
        'pos',
        `line${pos - expected > 1 ? `s ${expected}-${pos - 1}` : ` ${expected}`} of the chain ${pos - expected > 1 ? 'are' : 'is'} missing (deleted from ${name})`,
      )
    expected = pos + 1
    if (!value) {
      out.problem(record(pos, null), where, 'line', 'is not a line pipe wrote (not JSON)')
      prev = null
      continue
    }
    out.seal(checkLine(value), record(pos, value), where, 'hash')
    if ((value.prev ?? null) !== prev)
      out.problem(record(pos, value), where, 'prev', 'does not link to the line before it (a line was removed, reordered or replaced)')
    prev = typeof value.hash === 'string' ? value.hash : null
    parsed.push(value)
  }
  return parsed
}

export async function auditRows(rows: TrailRows, runId?: string, kinds: AuditKinds = {deliveredKeys: () => []}): Promise<AuditReport> {
  const out = new Findings()
  const counts = {runs: 0, snapshots: 0, specs: 0, evidence: 0, events: 0, features: 0, ledger: 0}
  // The head digest's parts, in the shape the file store's audit gives them (see ../audit.ts), so a
  // store and its copies (pipe store copy, either way) have one digest.
  const seals = new Map<string, string | null>()
  const featureSeals = new Map<string, string | null>()
  const ledgerSeals: Array<[string, string | null]> = []
  const checkedSpecs = new Map<string, string | null>()
  const checkedEvidence = new Map<string, string | null>()
  const delivered = new Map<string, string>()
  /** run id -> when its record says it was created, for time running backwards in the run index. */
  const created = new Map<string, unknown>()

  /** A spec version's or evidence record's body: checked once, its hash returned (null when missing). */
  async function record(id: string): Promise<string | null> {
    const spec = id.startsWith('S-')
    const known = spec ? checkedSpecs : checkedEvidence
    if (known.has(id)) return known.get(id)!
    const table = spec ? 'pipe_specs' : 'pipe_evidence'
    const body = await rows.record(id)
    const hash = body === null ? null : fileHash(body)
    known.set(id, hash)
    if (body === null) return null
    if (spec) counts.specs++
    else counts.evidence++
    const value = parse(body)
    const where = `${table}(${id})`
    if (!value) out.problem(id, where, 'body', 'is not valid JSON')
    else
      for (const p of spec ? verifySpec(value as unknown as CanonicalSpec) : verifyEvidence(value as unknown as Evidence))
        out.problem(id, where, p.field, p.message)
    return hash
  }

  async function auditRun(id: string, indexed: Plain | undefined): Promise<void> {
    counts.runs++
    const row = await rows.run(id)
    const where = `pipe_runs(${id})`
    if (!row) {
      out.problem(id, where, 'row', 'the run index names this run but its row is missing')
      return
    }
    const run = parse(row.body) as (RunRecord & Plain) | null
    if (!run) {
      out.problem(id, where, 'body', 'is not valid JSON')
      return
    }
    out.seal(checkRecord(run), id, where, 'seal')
    seals.set(id, typeof run.seal === 'string' ? run.seal : null)
    if (indexed && indexed.created_hash !== runCreationHash(run))
      out.problem(id, where, 'created', 'the facts fixed at its creation differ from what the run index bound')
    if (indexed) for (const f of creationFindings(indexed, run)) (f.note ? out.notes : out.problems).push({record: id, file: where, ...f.finding})
    // The workspace a worker is sent to: the row's columns pick the workers, the run index binds it.
    const bound: Plain = typeof indexed?.workspace === 'object' && indexed.workspace !== null ? (indexed.workspace as Plain) : {}
    if (indexed && (row.workspace_id !== (bound.id ?? null) || row.workspace_root !== (bound.root ?? null) || row.workspace_sub !== (bound.sub ?? null)))
      out.problem(id, where, 'workspace_id', 'the workspace its row sends a worker to is not the one the run index bound')
    // The timeline.
    const events = await rows.events(id)
    counts.events += events.length
    const lines = checkChain(
      events.map((e) => ({pos: e.n, line: e.line})),
      'pipe_events',
      (n) => `${id} timeline line ${n}`,
      out,
    )
    const stamped = events.map((e) => ({record: `${id} ${String(parse(e.line)?.event)} (line ${e.n})`, field: `line ${e.n}`, at: parse(e.line)?.at}))
    out.notes.push(...timeBackwards(stamped, `pipe_events(${id})`, `the timeline of ${id}`))
    created.set(id, run.created_at)
    const last = lines.at(-1)
    const head = run.head
    if (!head || head.events !== (events.at(-1)?.n ?? 0) || head.event_hash !== (last?.hash ?? null))
      out.problem(
        id,
        where,
        'head.events',
        `the run's sealed head names ${head?.events ?? 0} timeline lines ending ${String(head?.event_hash ?? null)}, the timeline holds ${events.at(-1)?.n ?? 0} (a line was deleted or added)`,
      )
    if (last && last.run_state !== runStateHash(run))
      out.problem(id, where, 'body', 'the run record is not the state its last timeline line bound (the row was changed)')
    // The snapshots.
    const snaps = await rows.snapshots(id)
    counts.snapshots += snaps.length
    let prev: string | null = null
    let expected = 1
    for (const row of snaps) {
      const at = `pipe_snapshots(${id}, ${row.seq})`
      const label = `${id}#${row.seq}`
      if (row.seq !== expected) out.problem(label, at, 'seq', `snapshot ${expected} is missing (deleted)`)
      expected = row.seq + 1
      const snapshot = parse(row.body) as (Snapshot & Plain) | null
      if (!snapshot) {
        out.problem(label, at, 'body', 'is not valid JSON')
        continue
      }
      for (const p of verifySnapshot(snapshot)) {
        if (p.check === 'no-key') out.unverifiable++
        else out.problem(label, at, p.field, p.message)
      }
      if ((snapshot.meta?.prev_hash ?? null) !== prev) out.problem(label, at, 'meta.prev_hash', 'does not link to the snapshot before it')
      prev = snapshot.meta?.record_hash ?? null
      for (const [bound, hash] of Object.entries(snapshot.meta?.binds ?? {})) {
        const actual = await record(bound)
        if (actual === null) out.problem(label, at, `meta.binds.${bound}`, `${bound} is bound but not in the store (deleted)`)
        else if (actual !== hash) out.problem(label, at, `meta.binds.${bound}`, `${bound} is not the record this snapshot bound (changed after the fact)`)
      }
      for (const key of kinds.deliveredKeys(snapshot)) if (!delivered.has(key)) delivered.set(key, label)
    }
    const tip = snaps.at(-1)
    const tipHash = tip ? ((parse(tip.body)?.meta as Plain | undefined)?.record_hash ?? null) : null
    if (head && (head.seq > (tip?.seq ?? 0) || (head.seq === (tip?.seq ?? 0) && head.seq > 0 && head.snapshot_hash !== tipHash)))
      out.problem(
        id,
        where,
        'head.seq',
        `the run's sealed head names snapshot ${head.seq}, the store's last is ${tip?.seq ?? 0} (a snapshot was deleted or replaced)`,
      )
  }

  const index = await rows.runIndex()
  const indexed = new Map(index.map((r) => [r.run_id, parse(r.line) ?? undefined]))
  let ledgerHead: string | null = null
  let indexHead: string | null = null
  if (runId) {
    const ids = [runId]
    // Its children (pipeline and foreach steps) and theirs.
    for (let i = 0; i < ids.length; i++) for (const child of await rows.children(ids[i]!)) ids.push(child)
    for (const id of ids) await auditRun(id, indexed.get(id))
  } else {
    const lines = checkChain(
      index.map((r) => ({pos: Number(r.pos), line: r.line})),
      'pipe_run_index',
      (pos, line) => (typeof line?.run_id === 'string' ? line.run_id : `run index line ${pos}`),
      out,
    )
    indexHead = (lines.at(-1)?.hash as string | undefined) ?? null
    const features = await rows.features()
    const featureHash = new Map<string, string>()
    for (const f of features) {
      counts.features++
      featureHash.set(f.id, fileHash(f.body))
      const value = parse(f.body)
      featureSeals.set(f.id, typeof value?.seal === 'string' ? value.seal : null)
      if (!value) out.problem(f.id, `pipe_features(${f.id})`, 'body', 'is not valid JSON')
      else out.seal(checkRecord(value), f.id, `pipe_features(${f.id})`, 'seal')
    }
    const named = new Set(lines.map((line) => line.feature_id))
    for (const f of features) if (!named.has(f.id)) out.notes.push({record: f.id, file: `pipe_features(${f.id})`, field: 'row', message: ORPHAN_FEATURE})
    for (const line of lines) {
      const fid = line.feature_id as string
      if (line.feature_hash !== null && line.feature_hash !== undefined && featureHash.get(fid) !== line.feature_hash)
        out.problem(fid, `pipe_features(${fid})`, 'body', `the feature is not the one the run index bound for ${String(line.run_id)} (changed or deleted)`)
    }
    const runs = (await rows.runIds()).sort(compareIds)
    for (const id of runs) {
      if (!indexed.has(id))
        out.problem(id, `pipe_runs(${id})`, 'row', 'the run is not in the run index (a line was deleted, or the row was added outside pipe)')
      await auditRun(id, indexed.get(id))
    }
    out.notes.push(
      ...runIndexOrder(
        index.map((r) => ({runId: r.run_id, field: `pos ${r.pos}`, created: created.get(r.run_id)})),
        'pipe_run_index',
      ),
    )
    for (const id of indexed.keys()) if (!runs.includes(id)) out.problem(id, `pipe_runs(${id})`, 'row', 'the run index names this run but its row is missing')
    for (const version of await rows.specIds()) await record(version)
    for (const id of await rows.evidenceIds()) await record(id)
  }
  // The ledger: its log chain, and each entry as the log's last line for its key sealed it.
  const log = await rows.ledgerLog()
  const logLines = runId
    ? log.map((l) => parse(l.line)).filter((l): l is Plain => l !== null)
    : checkChain(
        log.map((l) => ({pos: Number(l.pos), line: l.line})),
        'pipe_ledger_log',
        (pos, line) => (typeof line?.key === 'string' ? line.key : `ledger log line ${pos}`),
        out,
      )
  ledgerHead = (logLines.at(-1)?.hash as string | undefined) ?? null
  const lastSeal = new Map(logLines.map((l) => [l.key as string, l.entry_seal]))
  const entries = await rows.ledger()
  const published = new Set(entries.map((e) => e.key))
  for (const e of entries) {
    if (runId && !delivered.has(e.key)) continue
    counts.ledger++
    const at = `pipe_ledger(${e.key})`
    const value = parse(e.body)
    ledgerSeals.push([e.key, typeof value?.seal === 'string' ? value.seal : null])
    if (!value) {
      out.problem(e.key, at, 'body', 'is not valid JSON')
      continue
    }
    out.seal(checkRecord(value), e.key, at, 'seal')
    if (lastSeal.get(e.key) !== value.seal)
      out.problem(e.key, at, 'seal', 'is not the entry the ledger log last recorded for this key (rolled back or replaced)')
  }
  for (const [key, where] of delivered)
    if (!published.has(key))
      out.problem(where, `pipe_ledger(${key})`, 'row', `the snapshot records ${key} as delivered, but the ledger has no entry for it (deleted)`)
  const byId = ([a]: [string, unknown], [b]: [string, unknown]): number => (a < b ? -1 : a > b ? 1 : 0)
  // The file store lists ledger entries by file name (KEY.json); the database's collation may sort otherwise.
  const byFile = ([a]: [string, unknown], [b]: [string, unknown]): number => byId([`${a}.json`, a], [`${b}.json`, b])
  const head = runId
    ? null
    : hashJson({
        index: indexHead,
        runs: [...seals].sort(byId),
        ledger: ledgerHead,
        ledger_entries: ledgerSeals.sort(byFile),
        features: [...featureSeals].sort(byId),
      })
  return {
    ok: out.problems.length === 0,
    keyed: auditKey() !== undefined,
    ...counts,
    unverifiable: out.unverifiable,
    problems: out.problems,
    notes: out.notes,
    cleaned: [],
    head,
  }
}
