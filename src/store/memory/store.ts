/**
 * The in-memory store: the reference RunStore (../types.ts). It keeps each record as the text the
 * other stores keep (a file's bytes, a row's body) in maps, and everything a record is comes from
 * the trail (../trail/): ids, texts, seals and chains, run creation and change, the committed
 * snapshot, the commit hash, the audit walk. What is left here is persistence only, so a behaviour
 * that differs between this store and another is that store's persistence, never the protocol.
 *
 * A commit is all or nothing by construction: its records are built first and put in the maps in
 * one synchronous step, so nothing of a commit that stopped at a hook is kept, and two commits
 * never interleave. Nothing survives the process: it serves tests and in-process runs.
 */
import os from 'node:os'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import type {Evidence} from '../../types/evidence.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {fileHash, sealLine, verifySpec} from '../trail/integrity.js'
import type {
  ArchiveStore,
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
} from '../types.js'
import {sealedStepState, stepStateProblem} from '../step-state.js'
import {auditRows, type TrailRows} from '../trail/audit.js'
import {tableLocate} from '../trail/audit-walk.js'
import {MemoryLedger} from './ledger.js'
import {assertValid, wellFormed} from '../trail/checks.js'
import {compareIds, formatId, latestDay, todayKey, type DatedPrefix} from '../trail/ids.js'
import {childrenAmong, pageOf} from '../trail/listing.js'
import {buildEvidence, buildSpec, featureText, lineText, recordText} from '../trail/records.js'
import {changedRun, movedHead, newRun, runIndexLine, type RunStart} from '../trail/runs.js'
import {memoryArchiving} from './archive.js'
import {commitHash, committedSnapshot, sealCommitted} from '../trail/snapshots.js'

export interface RunRows {
  body: string
  events: string[]
  snapshots: Map<number, {body: string; commit_hash: string}>
  states: Map<string, string>
  holder: string | null
}

/** What the tamper hook of the tests can reach: a record's stored text. */
export type MemoryTable = 'runs' | 'events' | 'snapshots' | 'specs' | 'evidence' | 'features' | 'ledger' | 'run_index' | 'ledger_log'

const notFound = (runId: string): PipeError =>
  new PipeError('E_NOT_FOUND', `run ${runId} not found in memory`, {hint: 'pipe runs list shows the runs of this store.'})

function parsed<T>(schema: 'snapshot' | 'spec' | 'evidence' | 'run', text: string, what: string, where: string): T {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new PipeError('E_INTEGRITY', `${what} is not valid JSON (${where})`, {
      hint: 'It was changed after it was stored; run pipe audit verify to see all damage.',
    })
  }
  return wellFormed<T>(schema, value, what, where)
}

export class MemoryStore implements RunStore {
  private readonly counters = new Map<string, number>()
  private readonly runs = new Map<string, RunRows>()
  private readonly children = new Map<string, string[]>()
  private readonly runIndex: string[] = []
  private readonly specs = new Map<string, string>()
  private readonly evidence = new Map<string, string>()
  private readonly features = new Map<string, string>()
  readonly ledgerEntries = new Map<string, string>()
  readonly ledgerLog: string[] = []
  private holders = 0

  /** `root`: the local folder for what runs keep beside their records (artifacts, slots); nothing is written there by the store. */
  constructor(readonly root: string = path.join(os.tmpdir(), 'pipe-memory-store')) {}

  /** The next number of a series (`R-20261121`, `E`, ...). */
  private next(series: string): number {
    const n = (this.counters.get(series) ?? 0) + 1
    this.counters.set(series, n)
    return n
  }

  /** The key a dated id is numbered in: never one before the latest counted (a clock set back). */
  private key(prefix: DatedPrefix, now: Date): string {
    return latestDay(this.counters.keys(), prefix, todayKey(prefix, now))
  }

  private rows(runId: string): RunRows {
    const rows = this.runs.get(runId)
    if (!rows) throw notFound(runId)
    return rows
  }

  // Runs and their timelines

  async createRun(draft: RunDraft, now: Date, event: RunEvent): Promise<RunRecord> {
    return this.create(draft, now, event, undefined).record
  }

  async createStartedRun(draft: RunDraft, now: Date, created: RunEvent, start: RunStart): Promise<StartedRun> {
    const {record, release} = this.create(draft, now, created, start)
    return {record, release: release!}
  }

  private create(draft: RunDraft, now: Date, event: RunEvent, start: RunStart | undefined): {record: RunRecord; release?: Release} {
    const day = this.key('R', now)
    const id = formatId('R', day, (this.counters.get(`R-${day}`) ?? 0) + 1)
    const {record, lines} = newRun(id, draft, event, start)
    const feature = this.features.get(draft.feature_id)
    const prev = this.runIndex.at(-1)
    const indexLine = sealLine(runIndexLine(record, feature === undefined ? null : fileHash(feature)), prev ? (JSON.parse(prev) as {hash: string}).hash : null)
    this.next(`R-${day}`)
    const holder = start ? `holder-${++this.holders}` : null
    this.runs.set(id, {body: recordText(record), events: lines.map(lineText), snapshots: new Map(), states: new Map(), holder})
    this.runIndex.push(lineText(indexLine))
    if (record.parent) this.children.set(record.parent.run_id, [...(this.children.get(record.parent.run_id) ?? []), id])
    return holder ? {record, release: this.releaser(id, holder)} : {record}
  }

  private releaser(runId: string, holder: string): Release {
    return async () => {
      const rows = this.runs.get(runId)
      if (rows?.holder === holder) rows.holder = null
    }
  }

  async finishCreations(): Promise<void> {
    // A creation is one synchronous step: nothing is ever half made.
  }

  async readRun(runId: string): Promise<RunRecord> {
    return parsed<RunRecord>('run', this.rows(runId).body, `the run record of ${runId}`, `runs(${runId})`)
  }

  async assertRunExists(runId: string): Promise<void> {
    this.rows(runId)
  }

  async listRunIds(): Promise<string[]> {
    return [...this.runs.keys()].sort((a, b) => compareIds(b, a))
  }

  async listRuns(query: RunQuery): Promise<RunPage> {
    const cursor = query.cursor ?? null
    const ids = (await this.listRunIds()).filter((id) => cursor === null || compareIds(id, cursor) < 0)
    return pageOf(
      ids.map((id) => ({run_id: id, record: () => this.readRun(id)})),
      query,
    )
  }

  async listChildren(runId: string): Promise<RunRecord[]> {
    const ids = this.children.get(runId) ?? []
    return childrenAmong(await Promise.all(ids.map((id) => this.readRun(id).catch(() => null))), runId)
  }

  async updateRun(runId: string, change: (record: RunRecord) => void, event: RunEvent): Promise<RunRecord> {
    const rows = this.rows(runId)
    const {record, line} = changedRun(await this.readRun(runId), change, event)
    rows.events.push(lineText(line))
    rows.body = recordText(record)
    return record
  }

  appendEvent(runId: string, event: RunEvent): Promise<RunRecord> {
    return this.updateRun(runId, () => undefined, event)
  }

  async readEvents(runId: string): Promise<RunEvent[]> {
    return this.rows(runId).events.map((line, i) => {
      try {
        const {prev: _p, hash: _h, run_state: _r, ...event} = JSON.parse(line) as RunEvent & {prev?: unknown; hash?: unknown; run_state?: unknown}
        return event
      } catch {
        throw new PipeError('E_INTEGRITY', `line ${i + 1} of the timeline of ${runId} is not JSON (events(${runId}))`, {
          hint: 'It was changed after it was stored; run pipe audit verify.',
        })
      }
    })
  }

  async acquireRun(runId: string): Promise<Release> {
    const rows = this.rows(runId)
    if (rows.holder !== null)
      throw new PipeError('E_CONFLICT', `run ${runId} is being driven by another holder in this process`, {
        hint: 'Wait for it to finish, or stop it; pipe runs show shows its state.',
      })
    const holder = `holder-${++this.holders}`
    rows.holder = holder
    return this.releaser(runId, holder)
  }

  async runOwner(runId: string): Promise<RunHolder | null> {
    return this.rows(runId).holder === null ? null : {pid: process.pid, host: os.hostname(), alive: true}
  }

  /**
   * The end of the process that held runs here, without its letting go (a crash): what another
   * store's next process finds, a run whose holder is dead and which may be taken over. Only the
   * records outlive it (the crash matrix, test/faults/crash-matrix.test.ts).
   */
  endProcess(): void {
    for (const rows of this.runs.values()) rows.holder = null
  }

  // The step commit

  async commitStep(commit: StepCommit, hook?: CommitHook): Promise<Committed> {
    const {run_id: runId, step} = commit
    this.rows(runId)
    // The points a commit passes; nothing is kept until all are passed (see the top of this file).
    if (hook) {
      for (const _ of commit.evidence) await hook(`evidence-written:${step}`)
      if (commit.spec) await hook(`spec-written:${step}`)
      await hook(`before-snapshot:${step}`)
    }
    const committed = this.commitNow(commit)
    if (hook) await hook(`committed:${step}`)
    return committed
  }

  /** The commit itself, in one synchronous step. */
  private commitNow(commit: StepCommit): Committed {
    const {run_id: runId, seq} = commit
    const rows = this.rows(runId)
    const hash = commitHash(commit)
    const found = rows.snapshots.get(seq)
    if (found) {
      if (found.commit_hash !== hash)
        throw new PipeError('E_CONFLICT', `snapshot ${seq} of ${runId} already exists`, {
          hint: 'Snapshots are written once; another holder may be driving this run.',
        })
      const snapshot = parsed<Snapshot>('snapshot', found.body, `snapshot ${runId}#${seq}`, `snapshots(${runId}, ${seq})`)
      const version = snapshot.spec_version_out
      return {snapshot, spec: version && commit.spec ? (JSON.parse(this.specs.get(version)!) as CanonicalSpec) : null}
    }
    const at = new Date(commit.recorded_at)
    const texts = new Map<string, string>()
    const links: Snapshot['evidence_links'] = []
    const taken = this.counters.get('E') ?? 0
    commit.evidence.forEach((item, i) => {
      const id = formatId('E', '', taken + i + 1)
      texts.set(id, recordText(buildEvidence(item.draft, at, id)))
      links.push({type: item.link, evidence_id: id})
    })
    let spec: CanonicalSpec | null = null
    const day = this.key('S', at)
    if (commit.spec) {
      const id = formatId('S', day, (this.counters.get(`S-${day}`) ?? 0) + 1)
      spec = buildSpec(commit.spec.draft, id)
      texts.set(id, recordText(spec))
    }
    const snapshot = committedSnapshot(commit.snapshot, spec, links)
    const stored = sealCommitted(snapshot, (id) => {
      const text = texts.get(id) ?? (id.startsWith('S-') ? this.specs.get(id) : this.evidence.get(id))
      if (text === undefined)
        throw new PipeError('E_NOT_FOUND', `${id} is named by a snapshot but is not in the store`, {hint: 'Run pipe audit verify to see all damage.'})
      return fileHash(text)
    })
    const moved = movedHead(this.readRunNow(runId), seq, stored.meta.record_hash ?? null)
    // Everything is built: now it is kept, all of it.
    for (const _ of commit.evidence) this.next('E')
    if (commit.spec) this.next(`S-${day}`)
    for (const [id, text] of texts) (id.startsWith('S-') ? this.specs : this.evidence).set(id, text)
    rows.snapshots.set(seq, {body: recordText(stored), commit_hash: hash})
    if (moved) rows.body = recordText(moved)
    return {snapshot: stored, spec}
  }

  private readRunNow(runId: string): RunRecord {
    return parsed<RunRecord>('run', this.rows(runId).body, `the run record of ${runId}`, `runs(${runId})`)
  }

  async recover(): Promise<boolean> {
    return false
  }

  async repairEndedRun(): Promise<boolean> {
    return false
  }

  async readSnapshots(runId: string): Promise<Snapshot[]> {
    return [...this.rows(runId).snapshots.entries()]
      .sort(([a], [b]) => a - b)
      .map(([seq, row]) => parsed<Snapshot>('snapshot', row.body, `snapshot ${runId}#${seq}`, `snapshots(${runId}, ${seq})`))
  }

  // Spec versions, evidence, features

  async readSpec(version: string): Promise<CanonicalSpec> {
    const text = this.specs.get(version)
    if (text === undefined) throw new PipeError('E_NOT_FOUND', `spec version ${version} not found (memory)`)
    const spec = parsed<CanonicalSpec>('spec', text, `spec version ${version}`, `specs(${version})`)
    const problems = verifySpec(spec)
    if (problems.length > 0)
      throw new PipeError(
        'E_INTEGRITY',
        `spec version ${version} does not match its content hash (${problems.map((p) => `${p.field}: ${p.message}`).join('; ')})`,
        {
          hint: 'It was changed after it was stored; run pipe audit verify to see all damage.',
        },
      )
    return spec
  }

  async putSpec(spec: CanonicalSpec): Promise<void> {
    if (verifySpec(spec).length > 0) throw new PipeError('E_INTEGRITY', `spec version ${spec.meta.spec_version} does not match its content hash`)
    assertValid('spec', spec, `spec version ${spec.meta.spec_version}`)
    if (this.specs.has(spec.meta.spec_version))
      throw new PipeError('E_CONFLICT', `spec version ${spec.meta.spec_version} already exists and is immutable`, {
        hint: 'A change to the spec is a new version; run a step that writes one.',
      })
    this.specs.set(spec.meta.spec_version, recordText(spec))
  }

  async listSpecVersions(): Promise<string[]> {
    return [...this.specs.keys()].sort(compareIds)
  }

  async *newestSpecVersions(): AsyncGenerator<string> {
    yield* (await this.listSpecVersions()).reverse()
  }

  async readEvidence(id: string): Promise<Evidence> {
    const text = this.evidence.get(id)
    if (text === undefined) throw new PipeError('E_NOT_FOUND', `evidence ${id} not found (memory)`)
    const evidence = parsed<Evidence>('evidence', text, `evidence ${id}`, `evidence(${id})`)
    if (evidence.evidence_id !== id) throw new PipeError('E_INTEGRITY', `evidence ${id} names ${evidence.evidence_id}`, {hint: 'Run pipe audit verify.'})
    return evidence
  }

  async listEvidenceIds(): Promise<string[]> {
    return [...this.evidence.keys()].sort(compareIds)
  }

  async createFeature(now: Date, title: string): Promise<string> {
    const year = this.key('F', now)
    const id = formatId('F', year, this.next(`F-${year}`))
    this.features.set(id, featureText(id, now, title))
    return id
  }

  async ensureFeature(id: string, now: Date): Promise<void> {
    if (!this.features.has(id)) this.features.set(id, featureText(id, now))
  }

  // Step state

  async readStepState(runId: string, step: string, seq: number): Promise<unknown> {
    const text = this.rows(runId).states.get(`${seq}/${step}`)
    if (text === undefined) return undefined
    let value: unknown
    try {
      value = JSON.parse(text)
    } catch {
      value = null
    }
    const problem = stepStateProblem(value, runId, step, seq)
    if (problem) throw new PipeError('E_INTEGRITY', `the state of step ${step} (seq ${seq}) of ${runId} ${problem}`, {hint: `pipe audit verify ${runId}`})
    return (value as {state: unknown}).state
  }

  async writeStepState(runId: string, step: string, seq: number, state: unknown): Promise<void> {
    this.rows(runId).states.set(`${seq}/${step}`, `${JSON.stringify(sealedStepState(runId, step, seq, state))}\n`)
  }

  async latestStepStateSeq(runId: string, step: string): Promise<number | null> {
    const seqs = [...this.rows(runId).states.keys()].filter((k) => k.endsWith(`/${step}`)).map((k) => Number(k.slice(0, k.indexOf('/'))))
    return seqs.length > 0 ? Math.max(...seqs) : null
  }

  stepStateLocation(runId: string, step: string, seq: number | null): string {
    return seq === null ? `the step states of ${runId} (memory)` : `the state of step ${step} (seq ${seq}) of ${runId} (memory)`
  }

  // The ledger and the audit

  ledger(): LedgerRecords {
    return new MemoryLedger(this)
  }

  /** Archiving (app/archive.ts): the maps read, the index appended to, a run's rows dropped (./archive.ts). */
  readonly archiving: ArchiveStore = memoryArchiving({
    runs: this.runs,
    children: this.children,
    runIndex: this.runIndex,
    specs: this.specs,
    evidence: this.evidence,
    features: this.features,
    ledgerEntries: this.ledgerEntries,
    ledgerLog: this.ledgerLog,
  })

  audit(runId?: string, kinds?: AuditKinds): Promise<AuditReport> {
    return auditRows(this.trailRows(), runId, kinds)
  }

  /** The records as the trail's audit walk reads them, under the table names the PostgreSQL store gives them. */
  private trailRows(): TrailRows {
    return {
      runIndex: () => this.runIndex.map((line, i) => ({pos: i + 1, line})),
      run: (id) => {
        const rows = this.runs.get(id)
        return rows ? {body: rows.body} : null
      },
      runIds: () => [...this.runs.keys()],
      children: (id) => this.children.get(id) ?? [],
      events: (id) => (this.runs.get(id)?.events ?? []).map((line, i) => ({pos: i + 1, line})),
      snapshots: (id) =>
        [...(this.runs.get(id)?.snapshots ?? new Map<number, {body: string}>()).entries()].sort(([a], [b]) => a - b).map(([seq, r]) => ({seq, body: r.body})),
      snapshot: (id, seq) => this.runs.get(id)?.snapshots.get(seq)?.body ?? null,
      record: (id) => (id.startsWith('S-') ? this.specs.get(id) : this.evidence.get(id)) ?? null,
      specIds: () => [...this.specs.keys()],
      evidenceIds: () => [...this.evidence.keys()],
      features: () => [...this.features.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([id, body]) => ({id, body})),
      ledgerLog: () => this.ledgerLog.map((line, i) => ({pos: i + 1, line})),
      ledger: () => [...this.ledgerEntries.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, body]) => ({key, body})),
      locate: tableLocate,
    }
  }

  /**
   * Changes a stored text after the fact, as someone with access to the store's memory could: for
   * the conformance suite's tamper cases (a file edited by hand, a row updated with its trigger off).
   */
  tamper(table: MemoryTable, key: string, edit: (text: string) => string): void {
    const [id, n] = key.split('#') as [string, string | undefined]
    const change = <K>(map: Map<K, string>, k: K): void => {
      const text = map.get(k)
      if (text === undefined) throw new Error(`nothing stored under ${table} ${key}`)
      map.set(k, edit(text))
    }
    if (table === 'runs') this.rows(id).body = edit(this.rows(id).body)
    else if (table === 'events') this.rows(id).events[Number(n) - 1] = edit(this.rows(id).events[Number(n) - 1]!)
    else if (table === 'snapshots') {
      const row = this.rows(id).snapshots.get(Number(n))!
      row.body = edit(row.body)
    } else if (table === 'specs') change(this.specs, id)
    else if (table === 'evidence') change(this.evidence, id)
    else if (table === 'features') change(this.features, id)
    else if (table === 'ledger') change(this.ledgerEntries, id)
    else if (table === 'run_index') this.runIndex[Number(id) - 1] = edit(this.runIndex[Number(id) - 1]!)
    else this.ledgerLog[Number(id) - 1] = edit(this.ledgerLog[Number(id) - 1]!)
  }
}
