/**
 * The file store: the RunStore (types.ts) over a folder (.pipe/ by default), the project's embedded
 * default. Each record kind lives in a module of its own (runs, timeline, snapshots, specs,
 * evidence, features, step-state, commit-log, ledger, replies); this class ties them to one folder
 * (files.ts lays it out) and keeps what they share.
 *
 * The audit trail is anchored so that nothing can be dropped from its end unnoticed: each timeline
 * line chains to the one before and binds the run record's state; the run record seals the head
 * (timeline length and last hash, last snapshot seq and hash) each time it is written; a snapshot
 * binds the files of the spec versions and evidence it names; the run index chains every run.
 *
 * Write-once records are created with link(2), which fails if the name exists: a second write of
 * the same ID is E_CONFLICT, never a silent overwrite.
 */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import type {Evidence} from '../../types/evidence.js'
import type {RunEvent, RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {createFileExclusive, makeDirs} from '../../util/fs.js'
import {readdir, readFile} from '../../util/fs-async.js'
import {FileArchive} from './archive.js'
import {auditStore} from './audit.js'
import * as commitLog from './commit-log.js'
import {commitJournal, recoverCommit, repairEndedRun, type Journal} from './commit.js'
import * as evidence from './evidence.js'
import * as features from './features.js'
import {FileLayout, type WriteIntent, type WriteOptions} from './files.js'
import {allocationDay, compareIds, peekIds} from './ids.js'
import {pageOf} from '../trail/listing.js'
import {Ledger} from './ledger.js'
import {Runs} from './runs.js'
import * as snapshots from './snapshots.js'
import * as specs from './specs.js'
import * as stepState from '../step-state.js'
import * as timeline from './timeline.js'
import type {
  AuditKinds,
  AuditReport,
  CommitHook,
  Committed,
  EvidenceDraft,
  LedgerRecords,
  Release,
  RunDraft,
  RunHolder,
  RunPage,
  RunQuery,
  RunStore,
  SpecDraft,
  StartedRun,
  StepCommit,
} from '../types.js'

export type {EvidenceDraft, RunDraft, SpecDraft} from '../types.js'
export type {WriteIntent, WriteOptions} from './files.js'

export class Store extends FileLayout implements RunStore {
  private readonly runs = new Runs(this)
  readonly archiving = new FileArchive(this)

  static async open(root: string): Promise<Store> {
    const store = new Store(root)
    try {
      for (const dir of [store.runsDir, store.specsDir, store.evidenceDir, store.featuresDir, store.idsDir, store.auditDir]) makeDirs(dir)
    } catch (error) {
      throw new PipeError('E_IO', `cannot create the store at ${store.root}: ${(error as Error).message}`, {
        hint: 'Point --store (or PIPE_STORE) at a folder you can write to.',
      })
    }
    // A store inside a repository must never be committed by a checkpoint or removed by a rollback.
    await createFileExclusive(path.join(store.root, '.gitignore'), '# the pipe store: records, not sources\n*\n', {sync: false})
    return store
  }

  /** The store at root, or null when there is none: a listing of a place with no store lists nothing. */
  static async ifExists(root: string): Promise<Store | null> {
    const store = new Store(root)
    return (await readdir(store.runsDir).then(
      () => true,
      () => false,
    ))
      ? store
      : null
  }

  /** Opens a store that must already exist (read commands never create one). */
  static async existing(root: string): Promise<Store> {
    const store = new Store(root)
    try {
      await readdir(store.runsDir)
    } catch {
      throw new PipeError('E_NOT_FOUND', `no pipe store at ${store.root}`, {
        hint: 'Run a pipeline first (pipe run ...), or point at the store with --store DIR or PIPE_STORE.',
      })
    }
    return store
  }

  // Runs and their timelines

  async createRun(draft: RunDraft, now: Date, event: RunEvent): Promise<RunRecord> {
    return (await this.runs.create(draft, now, event, undefined)).record
  }

  /**
   * A new run already started and held: its timeline holds the creation and the start line, and its
   * owner lock is in the folder before the folder is renamed into place. A new run (a pipe run, each
   * child of a foreach) thus costs two synced writes fewer than creating it, taking its lock and
   * recording its start one after the other. A crash leaves what createRun leaves, with a lock of a
   * dead process (taken over by a resume).
   */
  async createStartedRun(draft: RunDraft, now: Date, created: RunEvent, start: {event: RunEvent; change: (record: RunRecord) => void}): Promise<StartedRun> {
    const {record, release} = await this.runs.create(draft, now, created, start)
    return {record, release: release!}
  }

  finishCreations(locked = false): Promise<void> {
    return this.runs.finishCreations(locked)
  }

  readRun(runId: string): Promise<RunRecord> {
    return this.runs.read(runId)
  }

  assertRunExists(runId: string): Promise<void> {
    return this.runs.assertExists(runId)
  }

  listRunIds(): Promise<string[]> {
    return this.runs.list()
  }

  async listRuns(query: RunQuery): Promise<RunPage> {
    const cursor = query.cursor ?? null
    const ids = (await this.runs.list()).filter((id) => cursor === null || compareIds(id, cursor) < 0)
    return pageOf(
      ids.map((id) => ({run_id: id, record: () => this.runs.read(id)})),
      query,
    )
  }

  listChildren(runId: string): Promise<RunRecord[]> {
    return this.runs.children(runId)
  }

  updateRun(runId: string, change: (record: RunRecord) => void, event: RunEvent): Promise<RunRecord> {
    return this.runs.update(runId, change, event)
  }

  /** Appends an event that changes nothing else of the run; the record's head moves with it. */
  appendEvent(runId: string, event: RunEvent): Promise<RunRecord> {
    return this.runs.update(runId, () => undefined, event)
  }

  readEvents(runId: string): Promise<RunEvent[]> {
    return timeline.readEvents(this, runId)
  }

  acquireRun(runId: string): Promise<Release> {
    return this.runs.acquire(runId)
  }

  runOwner(runId: string): Promise<RunHolder | null> {
    return this.runs.owner(runId)
  }

  /** A file beside the run's records, written by whoever asks (the driver holds the run); the first request stays. */
  async requestCancel(runId: string, request: string): Promise<void> {
    await createFileExclusive(this.cancelRequestFile(runId), request, {sync: false})
  }

  async cancelRequest(runId: string): Promise<string | null> {
    return readFile(this.cancelRequestFile(runId), 'utf8').catch(() => null)
  }

  private cancelRequestFile(runId: string): string {
    return path.join(this.runDir(runId), 'cancel-request.txt')
  }

  // The step commit (commit.ts)

  commitStep(commit: StepCommit | Journal, hook?: CommitHook): Promise<Committed> {
    // The caller's items are the journal's: the ids a commit takes stay on them for a redrive.
    return commitJournal(this, 'version' in commit ? commit : {version: 1, ...commit}, hook)
  }

  recover(runId: string, hook?: CommitHook, options: {lastSeq?: number} = {}): Promise<boolean> {
    return recoverCommit(this, runId, hook, options)
  }

  repairEndedRun(runId: string): Promise<boolean> {
    return repairEndedRun(this, this.runs, runId)
  }

  /** The commit log's lines (commit-log.ts). */
  appendCommit(runId: string, journal: unknown): Promise<void> {
    return commitLog.appendCommit(this, runId, journal)
  }

  readCommitLog(runId: string, lenient = false): Promise<unknown[]> {
    return commitLog.readCommitLog(this, runId, lenient)
  }

  readJournal(runId: string): Promise<unknown> {
    return commitLog.readJournal(this, runId)
  }

  deleteJournal(runId: string): Promise<void> {
    return commitLog.deleteJournal(this, runId)
  }

  // Snapshots

  /** Writes a snapshot once, outside a commit (tests, tools); a different one under its seq is E_CONFLICT. */
  writeSnapshot(snapshot: Snapshot, options: WriteOptions & {repair?: boolean} = {}): Promise<Snapshot> {
    return snapshots.writeSnapshot(this, snapshot, options)
  }

  readSnapshots(runId: string): Promise<Snapshot[]> {
    return snapshots.readSnapshots(this, runId)
  }

  // Spec versions

  /** Writes a spec version outside a commit (tests, tools): a step's versions are committed with it. */
  writeSpec(draft: SpecDraft, now: Date, intent?: WriteIntent, options: WriteOptions = {}): Promise<CanonicalSpec> {
    return specs.writeSpec(this, draft, now, intent, options)
  }

  /** The file content of a spec version, as writeSpec writes it. */
  specText(draft: SpecDraft, id: string): string {
    return specs.specText(draft, id)
  }

  readSpec(version: string): Promise<CanonicalSpec> {
    return specs.readSpec(this, version)
  }

  putSpec(spec: CanonicalSpec): Promise<void> {
    return specs.putSpec(this, spec)
  }

  newestSpecVersions(now: Date = new Date()): AsyncGenerator<string> {
    return specs.newestSpecVersions(this, now)
  }

  listSpecVersions(): Promise<string[]> {
    return specs.listSpecVersions(this)
  }

  // Evidence

  /** Writes evidence outside a commit (tests, tools): a step's evidence is committed with it. */
  writeEvidence(draft: EvidenceDraft, now: Date, intent?: WriteIntent, options: WriteOptions = {}): Promise<Evidence> {
    return evidence.writeEvidence(this, draft, now, intent, options)
  }

  /** The file content of an evidence record, as writeEvidence writes it. */
  evidenceText(draft: EvidenceDraft, now: Date, id: string): string {
    return evidence.evidenceText(draft, now, id)
  }

  readEvidence(id: string): Promise<Evidence> {
    return evidence.readEvidence(this, id)
  }

  listEvidenceIds(): Promise<string[]> {
    return evidence.listEvidenceIds(this)
  }

  /** Likely next ids of a series, for a journal to name before it writes (see commit.ts). */
  async candidateIds(series: 'spec' | 'evidence', at: Date, count: number): Promise<string[]> {
    return series === 'spec' ? peekIds(this.idsDir, 'S', await allocationDay(this.idsDir, 'S', at), count) : peekIds(this.idsDir, 'E', '', count)
  }

  // Features

  createFeature(now: Date, title: string): Promise<string> {
    return features.createFeature(this, now, title)
  }

  ensureFeature(id: string, now: Date): Promise<void> {
    return features.ensureFeature(this, id, now)
  }

  // Step state

  readStepState(runId: string, step: string, seq: number): Promise<unknown> {
    return stepState.readStepState(this, runId, step, seq)
  }

  writeStepState(runId: string, step: string, seq: number, state: unknown): Promise<void> {
    return stepState.writeStepState(this, runId, step, seq, state)
  }

  latestStepStateSeq(runId: string, step: string): Promise<number | null> {
    return stepState.latestStepStateSeq(this, runId, step)
  }

  stepStateLocation(runId: string, step: string, seq: number | null): string {
    return seq === null ? `${this.runDir(runId)}/state` : this.stepStateFile(runId, step, seq)
  }

  // The ledger and the audit

  ledger(): LedgerRecords {
    return new Ledger(this)
  }

  audit(runId?: string, kinds?: AuditKinds): Promise<AuditReport> {
    return auditStore(this, runId, kinds)
  }
}

/** The file store by the name a second store (PostgreSQL) will sit beside. */
export {Store as FileStore}
