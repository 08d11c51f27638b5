/**
 * The store as the engine and the use cases see it: one interface, whatever keeps the records (the
 * file store under .pipe/ today, a database next). Types only, so that code above the store depends
 * on what a store does, never on how one keeps its records.
 *
 * The protocol a store keeps:
 * - A step is recorded by one call, `commitStep`: its snapshot, the spec version and the evidence it
 *   wrote, and the line on its run's timeline, all or nothing. The snapshot is the commit point: a
 *   reader never sees a snapshot whose records are missing.
 * - A commit interrupted by a crash is finished (or dropped whole) by the store itself, when the run
 *   is next held (`recover`) or, for a run that has ended, by `repairEndedRun`; never by its caller.
 * - Committing the same step again (a redrive after a lost answer) returns what was recorded and
 *   records nothing twice; a different step under a seq already recorded is E_CONFLICT.
 * - One holder drives a run at a time (`acquireRun`); a second is refused with E_CONFLICT.
 * - Ids are handed out in the seed formats, gapless in the usual case and never twice: R-YYYYMMDD-NNNN
 *   and S-YYYYMMDD-NNNN per day, F-YYYY-NNN per year, E-NNNN overall.
 * - Every record is sealed and chained so that `audit` names what was changed after the fact.
 *
 * test/store-conformance.ts checks these against any implementation.
 */
import type {Evidence} from '../types/evidence.js'
import type {LedgerEntry} from '../types/ledger.js'
import type {RunEvent, RunRecord, RunStatus} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import type {BudgetHolds} from './budget-holds.js'
import type {TeamQueue} from './team.js'
import type {ArchiveAnchor, ArchiveSource} from './trail/archive.js'

/** A run record before the store gives it its id, head and seal. */
export type RunDraft = Omit<RunRecord, 'run_id' | 'head' | 'seal'>

/** A spec version before the store gives it its id and content hash. */
export type SpecDraft = Omit<CanonicalSpec, 'meta'> & {meta: Omit<CanonicalSpec['meta'], 'spec_version' | 'content_hash'>}

/** An evidence record before the store gives it its id, time and seal. */
export type EvidenceDraft = Omit<Evidence, 'evidence_id' | 'created_at' | 'record_hash'>

/** Gives up what was acquired. */
export type Release = () => Promise<void>

/**
 * Called at the named points of a commit (`journal-written:STEP`, `spec-written:STEP`, ...) so that
 * tests can stop a commit part way; a store names the points its protocol has.
 */
export type CommitHook = (point: string) => Promise<void> | void

/** Everything one step records, committed together by `RunStore.commitStep`. */
/** How a change of a run is written (RunStore.updateRun). */
export interface UpdateOptions {
  /**
   * false: the change may be acknowledged before it is durable, and lost with the database server's
   * crash (never with the writer's); the run's next durable write makes it durable with it. Only for
   * what a redrive would do again anyway: the start line of a step that is safe to run twice. A store
   * whose writes cost no more one way than the other may ignore it. Default true.
   */
  durable?: boolean
}

export interface StepCommit {
  run_id: string
  seq: number
  step: string
  /** The time the records are stamped with, fixed so that a redriven commit records the same bytes. */
  recorded_at: string
  /** The snapshot without the ids of the records below: the store fills in spec_version_out and the evidence links. */
  snapshot: Snapshot
  spec: {draft: SpecDraft} | null
  evidence: Array<{draft: EvidenceDraft; link: Snapshot['evidence_links'][number]['type']}>
}

export interface Committed {
  /** The snapshot as stored: sealed, with the ids the store gave the records. */
  snapshot: Snapshot
  spec: CanonicalSpec | null
}

/** A run created already started and held by its creator (`createStartedRun`). */
export interface StartedRun {
  record: RunRecord
  release: Release
}

/** Who holds a run. */
/** Who drives a run of a shared store now (pipe runs show): a worker under a live lease, or none; and its place in the queue. */
export interface Holding {
  /** The holder whose lease has not run out, or null. */
  worker: {host: string; pid: number; name?: string} | null
  lease_until: string | null
  /** The last holder, when its lease ran out without its letting go (killed, frozen): it holds the run no more, and a worker takes it over. */
  expired?: {worker: {host: string; pid: number; name?: string}; lease_until: string}
  /** How many times the run has been taken; a holder whose epoch moved on cannot commit. */
  epoch: number
  /** The queue the run waits in now, or null (not queued). */
  queue: string | null
  /** The queue pipe run --detach put it on: answers, reviews and pipe resume hand it back there. */
  detached_queue: string | null
}

export interface RunHolder {
  pid: number
  host: string
  start_time?: string
  alive: boolean
}

/** The publish ledger: one entry per idempotency key (feature_id + target + spec_version). */
export interface LedgerRecords {
  /** The local folder of the store the ledger belongs to: publications are named per store. */
  readonly storeRoot: string
  read(key: string): Promise<LedgerEntry | null>
  write(entry: LedgerEntry): Promise<void>
  /** Runs `work` holding the key, so that one key is published by one holder at a time. */
  withKey<T>(key: string, work: () => Promise<T>, waitMs?: number): Promise<T>
  list(filter?: {feature?: string; run?: string; target?: string}, limit?: number): Promise<LedgerEntry[]>
}

/** Which runs RunStore.listRuns gives: every field narrows; none, every run. */
export interface RunQuery {
  /** The stored status (a running run whose process is gone is still `running` here). */
  status?: RunStatus
  /** The pipeline's name. */
  pipeline?: string
  feature?: string
  /** Created at or after this ISO time. */
  since?: string
  /** Only runs no other run started (no parent). */
  top?: boolean
  /** At most this many runs (and damaged records) on the page; 100 when unset. */
  limit?: number
  /** The cursor a previous page gave: the page goes on after it. */
  cursor?: string | null
}

/** A page of RunStore.listRuns, newest first. */
export interface RunPage {
  runs: RunRecord[]
  /** Ids whose record could not be read as a run (readRun says why): named, never left out unsaid. */
  damaged: string[]
  /** Where the next page starts, or null when this one is the last. */
  cursor: string | null
}

export interface AuditFinding {
  record: string
  file: string
  field: string
  message: string
}

export interface AuditReport {
  ok: boolean
  /** Whether seals were checked with PIPE_AUDIT_KEY. */
  keyed: boolean
  runs: number
  snapshots: number
  specs: number
  evidence: number
  events: number
  features: number
  ledger: number
  /** Keyed seals that could not be checked because PIPE_AUDIT_KEY is not set: not a pass. */
  unverifiable: number
  problems: AuditFinding[]
  /** Not damage, but worth knowing: an unfinished commit, records an interrupted step left unused. */
  notes: AuditFinding[]
  /** Leftovers of crashes that were tidied: temp files, interrupted run creations. */
  cleaned: AuditFinding[]
  /** A digest over every run's seal, the run index, the ledger and the features (whole store only), to anchor elsewhere. */
  head: string | null
  /** The runs moved out to archives, as their anchors in the run index name them (whole store only; absent when none). */
  archives?: Array<{run_id: string; archive: string; digest: string; index_hash: string}>
}

/** A person's signed decision on a run's timeline, as the audit walk read it. */
export interface SignedLine {
  run_id: string
  /** The timeline line that records it, from 1. */
  line: number
  event: RunEvent['event']
  signed: NonNullable<RunEvent['signed']>
  /** The run record's policy file, whose trusted keys say whose key signed it. */
  policy_path: string | null | undefined
}

/**
 * What a step kind knows that the audit needs: the ledger keys a snapshot records as delivered. And
 * who wants each signed decision of a run whose record and timeline read whole (the app checks
 * them against the run's policy, which the store does not know): told by the walk that already
 * parsed them, so that nothing reads a store's timelines a second time.
 */
export interface AuditKinds {
  deliveredKeys(snapshot: Snapshot): readonly string[]
  signedDecision?(found: SignedLine): void
}

/**
 * What pipe store archive needs of a store (app/archive.ts holds the logic, trail/archive.ts the
 * format): read records as kept, append anchors to the run index, remove a run whose anchor is there.
 */
export interface ArchiveStore {
  /** The runs' records as kept, what they name (spec versions, evidence, features), the run index, the ledger and the runs' live artifacts. */
  source(runIds: readonly string[]): Promise<ArchiveSource>
  /** The archive anchors of the run index. */
  anchors(): Promise<ArchiveAnchor[]>
  /** Appends the anchors to the run index, chained and synced; one already there is not appended again. */
  anchor(anchors: readonly ArchiveAnchor[]): Promise<void>
  /** Removes the records of a run whose anchor is in the run index (E_INTERNAL otherwise), and its live artifacts. */
  remove(runId: string): Promise<void>
  /** Runs whose removal a crash interrupted: finished by remove. */
  leftovers(): Promise<string[]>
  /** Where archives go without --to: the store's own folder; null for a store kept elsewhere (a database), which must be told. */
  readonly defaultFolder: string | null
}

export interface RunStore {
  /**
   * The local folder for what a run keeps beside its records and is no record itself: live
   * artifacts, concurrency slots, the reply cache. A store that keeps its records elsewhere still
   * has one.
   */
  readonly root: string

  // Runs and their timelines

  /** Creates a run whole, with its first timeline line, under the next run id. */
  createRun(draft: RunDraft, now: Date, event: RunEvent): Promise<RunRecord>
  /** Creates a run already started (`start.change` applied, `start.event` on its timeline) and held by the caller. */
  createStartedRun(draft: RunDraft, now: Date, created: RunEvent, start: {event: RunEvent; change: (record: RunRecord) => void}): Promise<StartedRun>
  /** Finishes the run creations a crash interrupted, so that a resumed parent finds the child it created. */
  finishCreations(): Promise<void>
  readRun(runId: string): Promise<RunRecord>
  /** E_NOT_FOUND for an id that names no run. */
  assertRunExists(runId: string): Promise<void>
  /** Every run id, newest first. */
  listRunIds(): Promise<string[]>
  /** The runs the query matches, a page at a time, newest first (see RunQuery). */
  listRuns(query: RunQuery): Promise<RunPage>
  /**
   * The child runs `runId` started (pipeline and foreach steps), in step and item order, by their
   * parent link; a child whose record cannot be read is left out. Its cost is the children's, never
   * the store's: every foreach step, cancel and export asks it.
   */
  listChildren(runId: string): Promise<RunRecord[]>
  /** Changes the run record and appends `event` to its timeline, together; only the run's holder calls it. */
  updateRun(runId: string, change: (record: RunRecord) => void, event: RunEvent, options?: UpdateOptions): Promise<RunRecord>
  appendEvent(runId: string, event: RunEvent): Promise<RunRecord>
  /** The timeline in the order it was written. */
  readEvents(runId: string): Promise<RunEvent[]>
  /** Holds the run (E_CONFLICT while another holder lives); whatever another holder did is learnt afresh. */
  acquireRun(runId: string): Promise<Release>
  runOwner(runId: string): Promise<RunHolder | null>
  /**
   * E_INTEGRITY unless the trail vouches for the run as its record stands (./vouch.ts): a shared
   * store, whose rows other roles can write, checks before anything of a run is executed. The file
   * store has none: whoever can write its folder can run anything as its user, and its resume
   * finishes the half-made commits a crash leaves, which a check beforehand would refuse. Returns
   * the record it vouched for, so that what runs is what was checked, not a row read again after.
   */
  vouch?(runId: string): Promise<RunRecord>
  /**
   * Asks the process driving the run to end it as cancelled (pipe cancel): the first request's text
   * stays. The driver reads it (cancelRequest) when pipe cancel rings it (util/cancel-bell.ts) and
   * records the step it was in as cancelled. A store without them (in memory) is signalled instead.
   */
  requestCancel?(runId: string, request: string): Promise<void>
  /** The run's cancel request (requestCancel), null when none was made. */
  cancelRequest?(runId: string): Promise<string | null>
  /** A shared store's lease and queue of a run (the file store has neither). */
  holding?(runId: string): Promise<Holding | null>
  /** The same for many runs at once, keyed by run id (a run with no row is absent). */
  holdings?(runIds: readonly string[]): Promise<Map<string, Holding>>
  /** A store that workers share: its queue, leases and cancel requests (./team.ts). The file store has none. */
  readonly team?: TeamQueue
  /** Budget holds shared beyond this process (PostgreSQL: every worker's); absent, the process keeps them (./budget-holds.ts). */
  readonly budgetHolds?: BudgetHolds
  /** Moving ended runs out to archives (pipe store archive); a store without it cannot archive yet. */
  readonly archiving?: ArchiveStore
  /** Ends what the store keeps open (a database's connections); a store with nothing open has none. */
  close?(): Promise<void>

  // The step commit

  /** Records a step, all or nothing (see above). */
  commitStep(commit: StepCommit, hook?: CommitHook): Promise<Committed>
  /**
   * Finishes a commit a crash interrupted, and repairs records lost after their commit. The caller
   * holds the run. `lastSeq`: the last snapshot of a run that has ended. Whether anything changed.
   */
  recover(runId: string, hook?: CommitHook, options?: {lastSeq?: number}): Promise<boolean>
  /** `recover` for a run that has ended, under its lock; a run another process holds is left to it. */
  repairEndedRun(runId: string): Promise<boolean>
  /** The run's snapshots in seq order. */
  readSnapshots(runId: string): Promise<Snapshot[]>

  // Spec versions, evidence, features

  /** A spec version, its content hash checked (a mismatch is E_INTEGRITY, never repaired). */
  readSpec(version: string): Promise<CanonicalSpec>
  /** Stores a complete version under its own id; an existing one is never replaced (E_CONFLICT). */
  putSpec(spec: CanonicalSpec): Promise<void>
  /** Every spec version, oldest first. */
  listSpecVersions(): Promise<string[]>
  /** Spec versions newest first, lazily. */
  newestSpecVersions(now?: Date): AsyncGenerator<string>
  readEvidence(id: string): Promise<Evidence>
  /** Every evidence id, oldest first. */
  listEvidenceIds(): Promise<string[]>
  /** Registers a feature under the next F- id of the year. */
  createFeature(now: Date, title: string): Promise<string>
  ensureFeature(id: string, now: Date): Promise<void>

  // The working state of a step that pauses or may be interrupted mid-way, sealed

  readStepState(runId: string, step: string, seq: number): Promise<unknown>
  writeStepState(runId: string, step: string, seq: number, state: unknown): Promise<void>
  latestStepStateSeq(runId: string, step: string): Promise<number | null>
  /** Where a step's state is kept, for a message (seq null: where a run's states are). */
  stepStateLocation(runId: string, step: string, seq: number | null): string

  // The publish ledger and the audit

  ledger(): LedgerRecords
  /** Checks every seal and link of the run (and its children) or, without one, of the whole store. */
  audit(runId?: string, kinds?: AuditKinds): Promise<AuditReport>
}
