/**
 * A run's archive (pipe store archive, pipe audit verify --archive): one JSON-lines file holding a
 * top-level run and the runs it started, each record as the text the store kept (so every seal and
 * link is checked exactly as in the store), and what they name: spec versions, evidence, features,
 * ledger entries and their ledger log lines, the run index lines that anchor them in the store's
 * chain, and the live artifacts. Pure: no files, no SQL (the app reads and writes them).
 *
 * The format, read by any JSON-lines reader: a header line, one line per member in a fixed order
 * (sorted, no times, no paths of the machine), each with `sha256` of its `body` (or `line`), and a
 * last line whose `digest` is the sha256 of every byte before it. The same records give the same
 * bytes, so archiving a run twice gives the same file.
 */
import {sha256} from '../../util/hash.js'
import {auditRun, RecordChecks} from './audit-run.js'
import {Findings, parseBody, type Body, type Loc, type TrailRows} from './audit-walk.js'
import {compareIds, ID_PATTERNS} from './ids.js'
import {checkLine, checkRecord, fileHash} from './integrity.js'
import {indexLineProblem, isObject, ledgerLineProblem, type Plain} from './shapes.js'
import type {AuditKinds, AuditReport} from '../types.js'

export const ARCHIVE_FORMAT = 'pipe-archive'
export const ARCHIVE_VERSION = 1

/** The records of one run as a store keeps them (store/copy.ts's StoreDump has the same shape). */
export interface ArchivedRunRows {
  run_id: string
  body: string
  events: string[]
  snapshots: Array<{seq: number; body: string}>
  states: Array<{step: string; seq: number; body: string}>
}

/** What an archive is built from: the store's records (all of them or more than needed) and the runs' artifact files. */
export interface ArchiveSource {
  runs: ArchivedRunRows[]
  specs: Array<{id: string; body: string}>
  evidence: Array<{id: string; body: string}>
  features: Array<{id: string; body: string}>
  runIndex: string[]
  ledger: Array<{key: string; body: string}>
  ledgerLog: string[]
  /** Artifact files by path relative to the artifacts folder (RUN/...), as bytes. */
  artifacts: Array<{path: string; bytes: Uint8Array}>
}

/** A member line of an archive. */
export type Member =
  | {member: 'index'; pos: number; line: string}
  | {member: 'run'; run: string; body: string}
  | {member: 'event'; run: string; n: number; line: string}
  | {member: 'snapshot'; run: string; seq: number; body: string}
  | {member: 'state'; run: string; step: string; seq: number; body: string}
  | {member: 'spec' | 'evidence' | 'feature'; id: string; body: string}
  | {member: 'ledger'; key: string; body: string}
  | {member: 'ledger-log'; pos: number; line: string}
  | {member: 'artifact'; path: string; base64: string}

const textOf = (m: Member): string => ('body' in m ? m.body : 'line' in m ? m.line : m.base64)

/** What names a member in a finding: its kind and its id, as a person would look for it. */
export function memberName(m: Partial<Member> & {member?: unknown}): string {
  const o = m as Record<string, unknown>
  switch (o.member) {
    case 'index':
      return `run index line ${String(o.pos)}`
    case 'run':
      return `run record ${String(o.run)}`
    case 'event':
      return `timeline line ${String(o.n)} of ${String(o.run)}`
    case 'snapshot':
      return `snapshot ${String(o.seq)} of ${String(o.run)}`
    case 'state':
      return `step state ${String(o.step)}#${String(o.seq)} of ${String(o.run)}`
    case 'ledger':
      return `ledger entry ${String(o.key)}`
    case 'ledger-log':
      return `ledger log line ${String(o.pos)}`
    case 'artifact':
      return `artifact ${String(o.path)}`
    default:
      return `${String(o.member)} ${String(o.id)}`
  }
}

const parse = (text: string): Plain | null => {
  try {
    const value: unknown = JSON.parse(text)
    return isObject(value) ? value : null
  } catch {
    return null
  }
}

/** The ids a snapshot names (spec versions in and out, evidence), read leniently: a damaged one names none. */
function namedRecords(body: string): string[] {
  const s = parse(body)
  if (!s) return []
  const out: string[] = []
  for (const field of ['spec_version_in', 'spec_version_out']) if (typeof s[field] === 'string') out.push(s[field])
  if (Array.isArray(s.evidence_links)) for (const l of s.evidence_links) if (isObject(l) && typeof l.evidence_id === 'string') out.push(l.evidence_id)
  return out
}

/** The spec versions and evidence (records) and the features the runs' records name. */
export function referencedIds(runs: readonly ArchivedRunRows[]): {records: string[]; features: string[]} {
  const records = new Set<string>()
  const features = new Set<string>()
  for (const r of runs) {
    const record = parse(r.body)
    if (typeof record?.feature_id === 'string') features.add(record.feature_id)
    if (typeof record?.spec_version === 'string') records.add(record.spec_version)
    for (const s of r.snapshots) for (const id of namedRecords(s.body)) records.add(id)
  }
  return {records: [...records].sort(compareIds), features: [...features].sort(compareIds)}
}

/** The archive of `runIds` (a top-level run first, then the runs it started) from `source`: its text. */
export function buildArchive(source: ArchiveSource, runIds: readonly string[]): string {
  const wanted = new Set(runIds)
  const runs = source.runs.filter((r) => wanted.has(r.run_id)).sort((a, b) => compareIds(a.run_id, b.run_id))
  const named = referencedIds(runs)
  const records = new Set(named.records)
  const features = new Set(named.features)
  const members: Member[] = []
  for (const [i, line] of source.runIndex.entries()) {
    const named = parse(line)?.run_id
    if (typeof named === 'string' && wanted.has(named)) members.push({member: 'index', pos: i + 1, line})
  }
  for (const r of runs) {
    members.push({member: 'run', run: r.run_id, body: r.body})
    for (const [i, line] of r.events.entries()) members.push({member: 'event', run: r.run_id, n: i + 1, line})
    for (const s of [...r.snapshots].sort((a, b) => a.seq - b.seq)) members.push({member: 'snapshot', run: r.run_id, seq: s.seq, body: s.body})
    for (const s of [...r.states].sort((a, b) => a.seq - b.seq || (a.step < b.step ? -1 : a.step > b.step ? 1 : 0)))
      members.push({member: 'state', run: r.run_id, step: s.step, seq: s.seq, body: s.body})
  }
  const sorted = <T extends {id: string}>(list: T[]): T[] => [...list].sort((a, b) => compareIds(a.id, b.id))
  for (const s of sorted(source.specs)) if (records.has(s.id)) members.push({member: 'spec', id: s.id, body: s.body})
  for (const e of sorted(source.evidence)) if (records.has(e.id)) members.push({member: 'evidence', id: e.id, body: e.body})
  for (const f of sorted(source.features)) if (features.has(f.id)) members.push({member: 'feature', id: f.id, body: f.body})
  const keys = new Set<string>()
  for (const l of [...source.ledger].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))) {
    const run = parse(l.body)?.run_id
    if (typeof run === 'string' && wanted.has(run)) {
      keys.add(l.key)
      members.push({member: 'ledger', key: l.key, body: l.body})
    }
  }
  for (const [i, line] of source.ledgerLog.entries()) {
    const key = parse(line)?.key
    if (typeof key === 'string' && keys.has(key)) members.push({member: 'ledger-log', pos: i + 1, line})
  }
  for (const a of [...source.artifacts].sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0)))
    if (wanted.has(a.path.split('/')[0]!)) members.push({member: 'artifact', path: a.path, base64: Buffer.from(a.bytes).toString('base64')})
  const header = {format: ARCHIVE_FORMAT, version: ARCHIVE_VERSION, run: runIds[0], runs: runs.map((r) => r.run_id), members: members.length}
  const text = [header, ...members.map((m) => ({...m, sha256: sha256(textOf(m))}))].map((l) => `${JSON.stringify(l)}\n`).join('')
  return `${text}${JSON.stringify({digest: sha256(text)})}\n`
}

/** The digest an archive's last line must carry: the sha256 of every byte before it. */
export function archiveDigest(text: string): string | null {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text
  const cut = body.lastIndexOf('\n')
  const last = parse(body.slice(cut + 1))
  return typeof last?.digest === 'string' ? last.digest : null
}

/** Where a finding in an archive is: the archive's file and the member's line. */
function archiveRows(file: string, members: Array<Member & {line_no: number}>): TrailRows {
  const byRun = <T>(kind: string, run: string): T[] => members.filter((m) => m.member === kind && 'run' in m && m.run === run) as T[]
  const lineOf = (pick: (m: Member) => boolean): number | undefined => members.find(pick)?.line_no
  const body = (m: Member | undefined): Body | null => (m && 'body' in m ? m.body : null)
  const where = (loc: Loc): number | undefined => {
    switch (loc.kind) {
      case 'run':
      case 'run-place':
        return lineOf((m) => m.member === 'run' && m.run === loc.id)
      case 'events':
        return lineOf((m) => m.member === 'event' && m.run === loc.run && m.n === loc.n)
      case 'snapshot':
        return lineOf((m) => m.member === 'snapshot' && m.run === loc.run && m.seq === loc.seq)
      case 'spec':
      case 'evidence':
      case 'feature':
        return lineOf((m) => m.member === loc.kind && m.id === loc.id)
      case 'index':
        return lineOf((m) => m.member === 'index' && m.pos === loc.pos)
      case 'ledger-log':
        return lineOf((m) => m.member === 'ledger-log' && m.pos === loc.pos)
      case 'ledger':
        return lineOf((m) => m.member === 'ledger' && m.key === loc.key)
    }
  }
  return {
    runIndex: () => members.flatMap((m) => (m.member === 'index' ? [{pos: m.pos, line: m.line}] : [])),
    runIds: () => members.flatMap((m) => (m.member === 'run' ? [m.run] : [])),
    children: (id) =>
      members.flatMap((m) => {
        if (m.member !== 'run') return []
        const parent = parse(m.body)?.parent
        return isObject(parent) && parent.run_id === id ? [m.run] : []
      }),
    run: (id) => {
      const found = body(members.find((m) => m.member === 'run' && m.run === id))
      return found === null ? null : {body: found}
    },
    events: (id) => byRun<{n: number; line: string}>('event', id).map((m) => ({pos: m.n, line: m.line})),
    snapshots: (id) => byRun<{seq: number; body: string}>('snapshot', id).map((m) => ({seq: m.seq, body: m.body})),
    snapshot: (id, seq) => body(members.find((m) => m.member === 'snapshot' && m.run === id && m.seq === seq)),
    record: (id) => body(members.find((m) => (m.member === 'spec' || m.member === 'evidence') && m.id === id)),
    specIds: () => members.flatMap((m) => (m.member === 'spec' ? [m.id] : [])),
    evidenceIds: () => members.flatMap((m) => (m.member === 'evidence' ? [m.id] : [])),
    features: () => members.flatMap((m) => (m.member === 'feature' ? [{id: m.id, body: m.body}] : [])),
    ledgerLog: () => members.flatMap((m) => (m.member === 'ledger-log' ? [{pos: m.pos, line: m.line}] : [])),
    ledger: () => members.flatMap((m) => (m.member === 'ledger' ? [{key: m.key, body: m.body}] : [])),
    locate: (loc, field) => {
      const n = where(loc)
      return {file: n === undefined ? file : `${file}:${n}`, field}
    },
  }
}

/** An archive's header, or null when its first line is not one. */
export function archiveHeader(text: string): {run: string; runs: string[]} | null {
  const head = parse(text.slice(0, text.indexOf('\n')))
  if (head?.format !== ARCHIVE_FORMAT || typeof head.run !== 'string' || !Array.isArray(head.runs)) return null
  return {run: head.run, runs: head.runs.filter((r): r is string => typeof r === 'string')}
}

/**
 * Checks an archive on its own: its digest, each member's sha256, and then the trail's own checks of
 * its runs (seals, timelines, snapshot chains and binds, index lines, ledger entries against their
 * log lines). Each finding names the archive's line, the run or record, and what is wrong.
 */
export async function verifyArchive(file: string, text: string, kinds?: AuditKinds): Promise<AuditReport> {
  const members: Array<Member & {line_no: number}> = []
  const rows = archiveRows(file, members)
  const out = new Findings(rows)
  const at = (n: number): string => `${file}:${n}`
  const lines = text.split('\n')
  if (lines.at(-1) === '') lines.pop()
  const header = archiveHeader(text)
  if (!header) {
    out.add({record: file, file: at(1), field: 'format', message: `is not a ${ARCHIVE_FORMAT} file (its first line is no archive header)`})
    return out.report
  }
  const digest = archiveDigest(text)
  const before = text.slice(0, text.slice(0, -1).lastIndexOf('\n') + 1)
  if (digest === null) out.add({record: header.run, file: at(lines.length), field: 'digest', message: 'the archive has no digest line (cut short)'})
  else if (digest !== sha256(before))
    out.add({record: header.run, file: at(lines.length), field: 'digest', message: 'does not match the archive: a byte of it was changed, added or removed'})
  for (const [i, line] of lines.slice(1, digest === null ? undefined : -1).entries()) {
    const n = i + 2
    const m = parse(line) as (Member & {sha256?: unknown}) | null
    if (!m || typeof m.member !== 'string') {
      out.add({record: header.run, file: at(n), field: '(line)', message: 'is not an archive member'})
      continue
    }
    const content = (m as Record<string, unknown>)[m.member === 'artifact' ? 'base64' : 'body' in m ? 'body' : 'line']
    if (typeof content !== 'string') {
      out.add({record: memberName(m), file: at(n), field: '(line)', message: 'has no content'})
      continue
    }
    if (m.sha256 !== sha256(content))
      out.add({record: memberName(m), file: at(n), field: 'sha256', message: 'does not match the member: its content was changed'})
    members.push({...m, line_no: n})
  }
  // The runs' records through the trail's own checks, as audit verify RUN checks them in a store.
  const checks = new RecordChecks(rows, out)
  const indexed = new Map<string, Plain>()
  for (const {pos, line} of rows.runIndex() as Array<{pos: number; line: string}>) {
    const value = parse(line)
    const loc: Loc = {kind: 'index', pos}
    const record = typeof value?.run_id === 'string' ? value.run_id : `run index line ${pos}`
    if (!value) {
      out.problem(record, loc, 'line', 'not valid JSON')
      continue
    }
    const malformed = indexLineProblem(value)
    if (malformed) out.problem(record, loc, 'line', `is malformed: ${malformed}`)
    out.seal(checkLine(value, out.key), record, loc, 'hash')
    if (typeof value.run_id === 'string') indexed.set(value.run_id, value)
  }
  const delivered = new Map<string, string>()
  for (const id of header.runs) {
    if (!indexed.has(id)) out.problem(id, {kind: 'run-place', id}, '(index)', 'the run index line of the run is not in the archive')
    for (const [key, where] of await auditRun(rows, out, checks, id, indexed.get(id), kinds ?? {deliveredKeys: () => []}))
      if (!delivered.has(key)) delivered.set(key, where)
  }
  for (const id of rows.runIds() as string[])
    if (!header.runs.includes(id)) out.problem(id, {kind: 'run', id}, '(record)', 'the archive holds a run its header does not name')
  archivedLedger(rows, out, delivered)
  archivedFeatures(rows, out, indexed)
  return out.report
}

/** Features: sealed, stored under their id, and the file the run index lines bound. */
function archivedFeatures(rows: TrailRows, out: Findings, indexed: ReadonlyMap<string, Plain>): void {
  for (const {id, body} of rows.features() as Array<{id: string; body: Body}>) {
    out.report.features++
    const loc: Loc = {kind: 'feature', id}
    const parsed = parseBody(body)
    const feature = out.object(parsed, id, loc)
    if (!feature || !parsed.ok) continue
    if (feature.seal === undefined) out.problem(id, loc, 'seal', 'the feature record is not sealed')
    else out.seal(checkRecord(feature, out.key), id, loc, 'seal')
    if (feature.feature_id !== id) out.problem(id, loc, 'feature_id', `names ${String(feature.feature_id)}, not the feature it is stored as`)
    for (const line of indexed.values())
      if (line.feature_id === id && typeof line.feature_hash === 'string' && line.feature_hash !== fileHash(parsed.bytes)) {
        out.problem(id, loc, '(file)', 'is not the feature record the run index bound (changed or re-sealed after the fact)')
        break
      }
  }
}

/** Ledger entries against the log lines the archive kept for them: each sealed, the entry the last write the log recorded. */
function archivedLedger(rows: TrailRows, out: Findings, delivered: ReadonlyMap<string, string>): void {
  const logged = new Map<string, string[]>()
  for (const {pos, line} of rows.ledgerLog() as Array<{pos: number; line: string}>) {
    const value = parse(line)
    const loc: Loc = {kind: 'ledger-log', pos}
    const record = typeof value?.key === 'string' ? value.key : `ledger log line ${pos}`
    if (!value) {
      out.problem(record, loc, 'line', 'not valid JSON')
      continue
    }
    const malformed = ledgerLineProblem(value)
    if (malformed) out.problem(record, loc, 'line', `is malformed: ${malformed}`)
    out.seal(checkLine(value, out.key), record, loc, 'hash')
    if (typeof value.key === 'string') logged.set(value.key, [...(logged.get(value.key) ?? []), String(value.entry_seal)])
  }
  const present = new Set<string>()
  for (const {key, body} of rows.ledger() as Array<{key: string; body: Body}>) {
    present.add(key)
    out.report.ledger++
    const loc: Loc = {kind: 'ledger', key}
    const entry = out.object(parseBody(body), key, loc)
    if (!entry) continue
    out.schema('ledger', entry, key, loc)
    out.seal(checkRecord(entry, out.key), key, loc, 'seal')
    if (logged.get(key)?.at(-1) !== entry.seal) out.problem(key, loc, 'seal', 'is not the entry the ledger log lines in the archive recorded')
  }
  for (const [key, where] of delivered)
    if (!present.has(key)) out.problem(key, {kind: 'ledger', key}, '(file)', `ledger entry is missing (snapshot ${where} records a delivery under this key)`)
}

/** A line of the store's run index that records a run moved out to an archive (pipe store archive). */
export interface ArchiveAnchor {
  /** The run that left. */
  archived: string
  /** The archive's file: relative to the store's folder when inside it. */
  archive: string
  /** The archive's digest (its last line): the archive must still be the one that was written. */
  digest: string
  /** The hash of the run's own run index line: the archive's index member must be that line. */
  index_hash: string
}

/** Whether a run index line is an archive anchor, and what is wrong with one. */
export function anchorLineProblem(line: Plain): string | null {
  if (typeof line.archived !== 'string' || !ID_PATTERNS.run.test(line.archived)) return `archived ${JSON.stringify(line.archived)} is not a run id`
  if (typeof line.archive !== 'string' || line.archive === '') return 'archive is not a file name'
  if (typeof line.digest !== 'string' || !line.digest.startsWith('sha256:')) return 'digest is not a hash'
  if (typeof line.index_hash !== 'string') return 'index_hash is not a hash'
  return null
}

export const isAnchorLine = (line: Plain): boolean => line.archived !== undefined
