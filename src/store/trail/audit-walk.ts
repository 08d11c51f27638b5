/**
 * What the trail's one audit walk (audit.ts) reads and writes: a store's records as rows, where each
 * record lives (so a finding names the file or the table row users know), and the findings so far.
 */
import {check} from '../../schema/registry.js'
import {auditKey, checkLine, sealMessage, type IntegrityProblem, type SealCheck} from './integrity.js'
import {isObject, notAnObject, type Plain} from './shapes.js'
import type {AuditFinding, AuditReport} from '../types.js'

/** A stored record's text; `unreadable` says why it could not be read (a file: missing, not a regular file). */
export type Body = string | Uint8Array | {unreadable: string}

type Awaitable<T> = T | Promise<T>

/** Where a finding is: the store names it (a file and a line of it, a table and a row). */
export type Loc =
  | {kind: 'run'; id: string}
  /** Where the store keeps a run as a whole (a folder, a row). */
  | {kind: 'run-place'; id: string}
  | {kind: 'events'; run: string; n: number}
  | {kind: 'snapshot'; run: string; seq: number}
  | {kind: 'spec' | 'evidence' | 'feature'; id: string}
  | {kind: 'index'; pos: number}
  | {kind: 'ledger-log'; pos: number}
  | {kind: 'ledger'; key: string}

/** The run's records as the walk found them, for what a store checks beside it (see TrailRows.afterRun). */
export interface RunContext {
  /** Whether the walk found damage in the run's records. */
  damaged: boolean
  status: string | null
  head: {seq: number; events: number} | null
  /** The seqs the store holds snapshots for. */
  seqs: ReadonlySet<number>
}

/**
 * A store's records as the audit reads them, each the text the store keeps. Lists are in their
 * chain's or their key's order; a chain's positions count from 1.
 */
export interface TrailRows {
  runIndex(): Awaitable<Array<{pos: number; line: string}>>
  runIds(): Awaitable<string[]>
  /** The runs that name this one as their parent. */
  children(id: string): Awaitable<string[]>
  /** A run's record, and (a team store) the workspace its row sends a worker to: null columns, none. */
  run(id: string): Awaitable<{body: Body; workspace?: {id: string | null; root: string | null; sub: string | null}} | null>
  events(id: string): Awaitable<Array<{pos: number; line: string}>>
  snapshots(id: string): Awaitable<Array<{seq: number; body: Body}>>
  snapshot(id: string, seq: number): Awaitable<Body | null>
  /** A spec version's (S-) or evidence record's (E-) text, or null. */
  record(id: string): Awaitable<Body | null>
  /** fileHash of record(id)'s text, null when it is missing or unreadable: a store that can hash where it reads says so (most records are only hashed). */
  recordHash?(id: string): Awaitable<string | null>
  specIds(): Awaitable<string[]>
  evidenceIds(): Awaitable<string[]>
  features(): Awaitable<Array<{id: string; body: Body}>>
  ledgerLog(): Awaitable<Array<{pos: number; line: string}>>
  ledger(): Awaitable<Array<{key: string; body: Body}>>
  /** Names a finding's place as users see it: a file and a line, a table and a row. */
  locate(loc: Loc, field: string): {file: string; field: string}
  /** What the store checks of a run beyond its records (the file store: its commit log, step states). */
  afterRun?(id: string, context: RunContext, out: Findings): void
}

export type Parsed = {ok: true; value: unknown; bytes: string | Uint8Array} | {ok: false; message: string}

export function parseBody(body: Body | null): Parsed {
  if (body === null) return {ok: false, message: 'the record is missing'}
  if (typeof body === 'object' && 'unreadable' in body) return {ok: false, message: body.unreadable}
  try {
    // (Buffer.from over a Buffer would copy it.)
    const text = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')
    return {ok: true, value: JSON.parse(text), bytes: body}
  } catch (error) {
    return {ok: false, message: `not valid JSON (${(error as Error).message})`}
  }
}

/** The findings of one audit, as the report gives them. */
export class Findings {
  /** '' when no key is set, so that the seal functions do not look the environment up again per record. */
  readonly key = auditKey() ?? ''
  readonly report: AuditReport = {
    ok: true,
    keyed: this.key !== '',
    runs: 0,
    snapshots: 0,
    specs: 0,
    evidence: 0,
    events: 0,
    features: 0,
    ledger: 0,
    unverifiable: 0,
    problems: [],
    notes: [],
    cleaned: [],
    head: null,
  }

  constructor(private readonly rows: Pick<TrailRows, 'locate'>) {}

  at(record: string, loc: Loc, field: string, message: string): AuditFinding {
    return {record, ...this.rows.locate(loc, field), message}
  }

  problem(record: string, loc: Loc, field: string, message: string): void {
    this.add(this.at(record, loc, field, message))
  }

  add(finding: AuditFinding): void {
    this.report.problems.push(finding)
    this.report.ok = false
  }

  note(record: string, loc: Loc, field: string, message: string): void {
    this.report.notes.push(this.at(record, loc, field, message))
  }

  /** A failed seal check; a keyed seal without the key is counted, not reported one by one. */
  seal(result: SealCheck, record: string, loc: Loc, field: string): void {
    if (result === 'ok') return
    if (result === 'no-key') this.report.unverifiable++
    else this.problem(record, loc, field, sealMessage(result))
  }

  integrity(problems: IntegrityProblem[], record: string, loc: Loc): void {
    for (const p of problems) {
      if (p.check === 'no-key') this.report.unverifiable++
      else this.problem(record, loc, p.field, p.message)
    }
  }

  /** A record that failed to parse or is not an object: reported; the object otherwise. */
  object(parsed: Parsed, record: string, loc: Loc): Plain | null {
    if (!parsed.ok) this.problem(record, loc, '(file)', parsed.message)
    else if (!isObject(parsed.value)) this.problem(record, loc, '(record)', notAnObject(parsed.value))
    else return parsed.value
    return null
  }

  /** Schema findings of a record; whether there were any. */
  schema(schema: 'run' | 'snapshot' | 'spec' | 'evidence' | 'ledger', value: unknown, record: string, loc: Loc): boolean {
    const result = check(schema, value)
    for (const e of result.errors)
      this.problem(record, loc, e.instancePath.slice(1).replace(/\//g, '.') || '(record)', `does not match the ${schema} schema: ${e.message ?? e.keyword}`)
    return result.errors.length > 0
  }
}

export interface ChainLine {
  pos: number
  value: Plain
}

/**
 * Checks a chain of lines ordered by position: each a JSON object of its shape, sealed, linked to
 * the one before, none missing. A line that is not an object is reported and left out; one of the
 * wrong shape is reported and kept, so that lines are still counted and chained.
 */
export function checkChain(
  lines: ReadonlyArray<{pos: number; line: string}>,
  out: Findings,
  loc: (pos: number) => Loc,
  record: (pos: number, line: Plain | null) => string,
  shape?: (line: Plain) => string | null,
  keep: (pos: number) => boolean = () => true,
): ChainLine[] {
  const parsed: ChainLine[] = []
  // The hash the next line must link to; undefined after an unreadable line (nothing to compare with).
  let prev: string | null | undefined = null
  let expected = 1
  for (const {pos, line} of lines) {
    let value: unknown
    try {
      value = JSON.parse(line)
    } catch {
      value = undefined
    }
    const plain = isObject(value) ? value : null
    const report = keep(pos)
    const problem = (field: string, message: string): void => {
      if (report) out.problem(record(pos, plain), loc(pos), field, message)
    }
    if (pos !== expected) {
      const many = pos - expected > 1
      problem('pos', `line${many ? `s ${expected}-${pos - 1}` : ` ${expected}`} of the chain ${many ? 'are' : 'is'} missing (deleted)`)
    }
    expected = pos + 1
    if (!plain) {
      problem('line', value === undefined ? 'not valid JSON' : notAnObject(value))
      prev = undefined
      continue
    }
    const malformed = shape?.(plain)
    if (malformed) problem('line', `is malformed: ${malformed}`)
    const sealed = checkLine(plain, out.key)
    if (report) out.seal(sealed, record(pos, plain), loc(pos), 'hash')
    if (prev !== undefined && plain.prev !== prev) problem('prev', 'does not link to the line before it (a line was removed, reordered or rewritten)')
    prev = typeof plain.hash === 'string' ? plain.hash : undefined
    parsed.push({pos, value: plain})
  }
  return parsed
}

const ROW_FIELDS: Readonly<Record<string, string>> = {'(file)': 'body', '(record)': 'body', '(folder)': 'row', '(index)': 'row'}

function tableRow(loc: Loc): string {
  switch (loc.kind) {
    case 'run':
    case 'run-place':
      return `pipe_runs(${loc.id})`
    case 'events':
      return `pipe_events(${loc.n})`
    case 'snapshot':
      return `pipe_snapshots(${loc.run}, ${loc.seq})`
    case 'spec':
      return `pipe_specs(${loc.id})`
    case 'evidence':
      return `pipe_evidence(${loc.id})`
    case 'feature':
      return `pipe_features(${loc.id})`
    case 'index':
      return `pipe_run_index(${loc.pos})`
    case 'ledger-log':
      return `pipe_ledger_log(${loc.pos})`
    case 'ledger':
      return `pipe_ledger(${loc.key})`
  }
}

/** Where a finding is in a store of tables (the PostgreSQL store; the in-memory store names its maps so): a table and a row. */
export function tableLocate(loc: Loc, field: string): {file: string; field: string} {
  return {file: tableRow(loc), field: ROW_FIELDS[field] ?? field}
}
