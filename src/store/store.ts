/**
 * The record store. Laid out so that a step writes only what it owns and no write grows with
 * history:
 *
 *   runs/R-.../run.json          the run record (lowdb, atomic writes)
 *   runs/R-.../events.jsonl      the run's timeline, append-only
 *   runs/R-.../snapshots/NNNNNN.json   one write-once file per step
 *   runs/R-.../commits.jsonl     the commit log: what each step that writes records records (engine/commit.ts)
 *   specs/S-....json             immutable spec versions, content-hashed
 *   evidence/E-....json          evidence records
 *   features/F-....json          feature registrations
 *   audit/runs.jsonl             the run index: one chained line per run created
 *   audit/ledger.jsonl           the ledger log: one chained line per ledger write
 *   ids/                         allocation hints
 *
 * The audit trail is anchored so that nothing can be dropped from its end unnoticed: each timeline
 * line chains to the one before and binds the run record's state; the run record seals the head
 * (timeline length and last hash, last snapshot seq and hash) each time it is written; a snapshot
 * binds the files of the spec versions and evidence it names; the run index chains every run.
 * A run is created whole: built in a staging folder, indexed, then renamed into place.
 *
 * Write-once records are created with link(2), which fails if the name exists: a second write of
 * the same ID is E_CONFLICT, never a silent overwrite.
 */
import {randomBytes} from 'node:crypto'
import {closeSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync} from 'node:fs'
import {mkdir, readdir, readFile, rename, rm, stat} from '../util/fs-async.js'
import path from 'node:path'
import {Low} from 'lowdb'
import {PipeError} from '../errors.js'
import {check, describeErrors} from '../schema/registry.js'
import type {Evidence} from '../types/evidence.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {appendSynced, createFileExclusive, makeDirs, syncFd, writeFileAtomic} from '../util/fs.js'
import {allocateId, assertId, compareIds, dayKey, formatId, ID_PATTERNS, noteIdTaken, peekIds, readCounter} from './ids.js'
import {checkRecord, fileHash, runCreationHash, runRecordSealer, sealEvidence, sealLine, sealMessage, sealRecord, sealSnapshot, sealSpec, verifySpec} from './integrity.js'
import {AtomicJsonFile} from './json-file-adapter.js'
import {acquireLock, lockHolder, newLock, processAlive} from '../util/lock.js'
import {faultPoint} from '../util/faults.js'
import {appendChained, readChain, readText, stagedRun} from './trail.js'
import {eventLineProblem, isObject, notAnObject} from './shapes.js'

export type RunDraft = Omit<RunRecord, 'run_id' | 'head' | 'seal'>

export type SpecDraft = Omit<CanonicalSpec, 'meta'> & {meta: Omit<CanonicalSpec['meta'], 'spec_version' | 'content_hash'>}
export type EvidenceDraft = Omit<Evidence, 'evidence_id' | 'created_at' | 'record_hash'>

/** Set while a write-once record is being created, so a crash mid-way can be finished on resume. */
export interface WriteIntent {
  /** An id this write already tried (from a journal): reused when its file holds exactly this record. */
  candidate?: string
  /** Called with each id before it is tried, to record it in a journal. */
  onCandidate(id: string): Promise<void>
  /**
   * Finishing a logged commit: the candidate's file, if empty or not JSON, lost its data to a power
   * failure after the link (records are written unsynced once the commit log holds them), so it is
   * rewritten. Records are written atomically, so a crash alone never leaves such a file.
   */
  repair?: boolean
}

/** Whether a write reaches the disk before it returns (see util/fs.ts); false once a commit log line holds the record. */
export interface WriteOptions {
  sync?: boolean
}

/**
 * Writes a write-once record file: true when it is written now or already holds exactly `text`
 * (finishing a commit after a crash). With `repair`, a file there that is empty or not JSON (its
 * data lost to a power failure after the link) is rewritten; any other content is someone else's.
 */
async function writeOnce(file: string, text: string, options: {sync: boolean; repair: boolean}): Promise<boolean> {
  if (await createFileExclusive(file, text, {sync: options.sync})) return true
  const found = await readFile(file, 'utf8').catch(() => null)
  if (found === text) return true
  if (!options.repair || found === null || !damaged(found)) return false
  await writeFileAtomic(file, text)
  return true
}

/** Whether `text` (a record file's content) is damaged: empty or not JSON. */
function damaged(text: string): boolean {
  try {
    JSON.parse(text)
    return false
  } catch {
    return true
  }
}

/**
 * The calendar days from tomorrow down to the oldest counted day: those a spec list must account
 * for. Null when a counted day is no calendar day (not pipe's counter) or the span passes 4,000
 * days: then the list comes from the folder.
 */
function probeDays(counted: Iterable<string>, now: Date): string[] | null {
  const sorted = [...counted].sort()
  const toDate = (day: string): Date => new Date(Date.UTC(Number(day.slice(0, 4)), Number(day.slice(4, 6)) - 1, Number(day.slice(6, 8))))
  if (sorted.length === 0 || sorted.some((day) => dayKey(toDate(day)) !== day)) return null
  const out: string[] = []
  for (let at = toDate(dayKey(new Date(now.getTime() + 86400000))); dayKey(at) >= sorted[0]!; at = new Date(at.getTime() - 86400000)) {
    if (out.length >= 4000) return null
    out.push(dayKey(at))
  }
  return out
}

/**
 * path.join for a folder the store made normal (absolute, from path.resolve) and names that are
 * single segments it checked (ids, seq names, its own file names): the same path without
 * path.join's normalising pass, which the per-step and per-run writes paid for many times over.
 */
function within(dir: string, ...names: string[]): string {
  return names.length === 1 ? `${dir}${path.sep}${names[0]}` : [dir, ...names].join(path.sep)
}

function seqName(seq: number): string {
  return `${String(seq).padStart(6, '0')}.json`
}

function assertValid(schema: 'snapshot' | 'spec' | 'evidence' | 'run', record: unknown, what: string): void {
  const result = check(schema, record)
  if (!result.valid) throw new PipeError('E_INTERNAL', `refusing to store an invalid ${what}: ${describeErrors(result.errors)}`, {hint: 'This is a bug in pipe or in a step kind.'})
}

/** Writes a new file and syncs it (inside a staging folder, where nobody else looks); synchronous calls, see util/fs.ts. */
function writeSynced(file: string, text: string): void {
  const fd = openSync(file, 'wx', 0o644)
  try {
    writeFileSync(fd, text)
    syncFd(fd)
  } finally {
    closeSync(fd)
  }
}

/** The snapshot files of a run's folder in seq order; one synchronous listing (see util/fs.ts). */
function snapshotNames(dir: string): string[] {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  return names.filter((n) => /^\d{6,}\.json$/.test(n)).sort()
}

function buildSpec(draft: SpecDraft, id: string): CanonicalSpec {
  // Keep meta's keys in a fixed order so the files read well.
  const spec = {...draft, meta: {spec_version: id, ...draft.meta, content_hash: ''}}
  const sealed = sealSpec(spec)
  assertValid('spec', sealed, `spec version ${id}`)
  return sealed
}

function buildEvidence(draft: EvidenceDraft, now: Date, id: string): Evidence {
  const record = sealEvidence({evidence_id: id, ...draft, created_at: now.toISOString()})
  assertValid('evidence', record, `evidence ${id}`)
  return record
}

/** A record and its file content under an id, built once for the id last asked for (sealing hashes the whole record). */
function builder<T>(build: (id: string) => T): (id: string) => {record: T; text: string} {
  let last: {id: string; record: T; text: string} | undefined
  return (id) => {
    if (last?.id !== id) {
      const record = build(id)
      last = {id, record, text: `${JSON.stringify(record, null, 2)}\n`}
    }
    return last
  }
}

/**
 * A record read back from the store, checked against its schema before anything reads a field of it:
 * one of the wrong shape was changed outside pipe (E_INTEGRITY, naming the file), never a crash
 * further on.
 */
function wellFormed<T>(schema: 'snapshot' | 'spec' | 'evidence' | 'run', value: unknown, what: string, file: string): T {
  const result = isObject(value) ? check(schema, value) : null
  if (result?.valid) return value as T
  const why = result ? describeErrors(result.errors.slice(0, 3)) : notAnObject(value)
  throw new PipeError('E_INTEGRITY', `${what} is malformed (${file}): ${why}`, {hint: 'It was changed outside pipe; run pipe audit verify to see all damage, and restore the file from a backup.'})
}

async function readJson<T>(file: string, what: string): Promise<T> {
  let text: string
  try {
    // Synchronous, as the run record's read (see json-file-adapter.ts).
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new PipeError('E_NOT_FOUND', `${what} not found (${file})`)
    throw error
  }
  try {
    return JSON.parse(text) as T
  } catch (error) {
    throw new PipeError('E_INTEGRITY', `${what} is not valid JSON (${file}): ${(error as Error).message}`, {hint: 'The file was changed or damaged outside pipe; restore it from a backup.'})
  }
}

interface OwnedRun {
  /** The run record as last written (sealed, with its head). */
  record?: RunRecord
  /** The timeline's line count and last line's hash. */
  timeline?: {count: number; hash: string}
  /** The last snapshot's seq and record hash. */
  head?: {seq: number; snapshot_hash: string | null}
}

export class Store {
  readonly runsDir: string
  readonly specsDir: string
  readonly evidenceDir: string
  readonly featuresDir: string
  readonly idsDir: string
  readonly auditDir: string
  /** sha256 of spec and evidence files this process wrote or read, for the snapshots that bind them. */
  private readonly fileHashes = new Map<string, string>()

  /**
   * The runs whose lock this store holds (acquireRun), each with what it last wrote of the run's
   * record, timeline tail and last snapshot. Only the lock holder changes a run, so while the lock
   * is held these are what is on disk and updateRun need not read them back; each is learnt from
   * disk on first use after the lock is taken, and forgotten on any failed write and on release.
   */
  private readonly owned = new Map<string, OwnedRun>()

  constructor(readonly root: string) {
    this.root = path.resolve(root)
    this.runsDir = path.join(this.root, 'runs')
    this.specsDir = path.join(this.root, 'specs')
    this.evidenceDir = path.join(this.root, 'evidence')
    this.featuresDir = path.join(this.root, 'features')
    this.idsDir = path.join(this.root, 'ids')
    this.auditDir = path.join(this.root, 'audit')
  }

  get runIndexFile(): string {
    return path.join(this.auditDir, 'runs.jsonl')
  }

  static async open(root: string): Promise<Store> {
    const store = new Store(root)
    try {
      for (const dir of [store.runsDir, store.specsDir, store.evidenceDir, store.featuresDir, store.idsDir, store.auditDir]) makeDirs(dir)
    } catch (error) {
      throw new PipeError('E_IO', `cannot create the store at ${store.root}: ${(error as Error).message}`, {hint: 'Point --store (or PIPE_STORE) at a folder you can write to.'})
    }
    // A store inside a repository must never be committed by a checkpoint or removed by a rollback.
    await createFileExclusive(path.join(store.root, '.gitignore'), '# the pipe store: records, not sources\n*\n', {sync: false})
    return store
  }

  /** Opens a store that must already exist (read commands never create one). */
  /** The store at root, or null when there is none: a listing of a place with no store lists nothing. */
  static async ifExists(root: string): Promise<Store | null> {
    const store = new Store(root)
    return (await readdir(store.runsDir).then(() => true, () => false)) ? store : null
  }

  static async existing(root: string): Promise<Store> {
    const store = new Store(root)
    try {
      await readdir(store.runsDir)
    } catch {
      throw new PipeError('E_NOT_FOUND', `no pipe store at ${store.root}`, {hint: 'Run a pipeline first (pipe run ...), or point at the store with --store DIR or PIPE_STORE.'})
    }
    return store
  }

  runDir(runId: string): string {
    assertId('run', runId)
    return within(this.runsDir, runId)
  }

  // Runs

  /**
   * Creates a run whole, with its first timeline line: the folder is built under a staging name,
   * the run is added to the run index, then the folder is renamed into place. A crash before the
   * index line leaves only a staging folder (removed by pipe audit verify); a crash after it leaves
   * a complete staging folder that audit verify renames into place. Creations are serialised by the
   * index's lock, which also keeps the index chain linear.
   */
  async createRun(draft: RunDraft, now: Date, event: RunEvent): Promise<RunRecord> {
    return (await this.create(draft, now, event, undefined)).record
  }

  /**
   * Creates a run already started and held by this process: its timeline holds the creation line
   * and the start line, and its owner lock is in the folder before the folder is renamed into
   * place, so no other process ever sees it unowned. A new run (a pipe run, each child of a
   * foreach) thus costs two synced writes fewer than creating it, taking its lock and recording
   * its start one after the other. `start` changes the created record into the started one.
   * A crash leaves what createRun leaves, with a lock of a dead process (taken over by a resume).
   */
  async createStartedRun(draft: RunDraft, now: Date, created: RunEvent, start: {event: RunEvent; change: (record: RunRecord) => void}): Promise<{record: RunRecord; release: () => Promise<void>}> {
    const {record, release} = await this.create(draft, now, created, start)
    return {record, release: release!}
  }

  private async create(draft: RunDraft, now: Date, event: RunEvent, start: {event: RunEvent; change: (record: RunRecord) => void} | undefined): Promise<{record: RunRecord; release?: () => Promise<void>}> {
    if (!this.auditDirMade) {
      await mkdir(this.auditDir, {recursive: true})
      this.auditDirMade = true
    }
    const release = await this.lockRunIndex()
    try {
      await this.finishCreations(true)
      let made: {record: RunRecord; release?: () => Promise<void>} | undefined
      const featureHash = await this.featureHash(draft.feature_id)
      await allocateId(this.idsDir, 'R', dayKey(now), async (id) => {
        const final = within(this.runsDir, id)
        // Without throwing for the usual answer (no such run yet): a thrown ENOENT costs more than the stat.
        if (statSync(final, {throwIfNoEntry: false}) !== undefined) return false
        const staging = within(this.runsDir, `.new-${id}.${process.pid}.${randomBytes(4).toString('hex')}`)
        // Synchronous, like the writes below (util/fs.ts says why): a run's creation is a dozen small calls.
        mkdirSync(staging, {recursive: true})
        mkdirSync(within(staging, 'snapshots'))
        const fresh = {run_id: id, ...draft} as RunRecord
        let sealer = runRecordSealer(fresh as unknown as Record<string, unknown>)
        const lines = [sealLine({...event, run_state: sealer.stateHash}, null)]
        let state = fresh
        if (start) {
          state = structuredClone(fresh)
          start.change(state)
          sealer = runRecordSealer(state as unknown as Record<string, unknown>)
          lines.push(sealLine({...start.event, run_state: sealer.stateHash}, lines[0]!.hash))
        }
        // The state stored is the one checked; the created state before a start is only hashed.
        assertValid('run', state, 'run record')
        const last = lines.at(-1)!
        writeSynced(within(staging, 'events.jsonl'), lines.map((l) => `${JSON.stringify(l)}\n`).join(''))
        const head = {events: lines.length, event_hash: last.hash, seq: 0, snapshot_hash: null}
        const record = {...state, head, seal: sealer.seal(head)} as RunRecord
        writeSynced(within(staging, 'run.json'), `${JSON.stringify(record, null, 2)}\n`)
        // The lock needs no sync: after a crash, a lock of a dead process is taken over anyway.
        const lock = start ? newLock() : undefined
        if (lock) writeFileSync(within(staging, 'owner.lock'), lock.text, {flag: 'wx'})
        faultPoint('run-staged')
        await appendChained(this.runIndexFile, {
          run_id: id,
          feature_id: draft.feature_id,
          feature_hash: featureHash,
          created_hash: runCreationHash(record as unknown as Record<string, unknown>),
        })
        faultPoint('run-indexed')
        renameSync(staging, final)
        if (lock) {
          // Held from birth: what this store wrote is what is on disk (see owned).
          this.owned.set(id, {record: structuredClone(record), timeline: {count: lines.length, hash: last.hash}, head: {seq: 0, snapshot_hash: null}})
          const releaseLock = lock.releaserOf(within(final, 'owner.lock'))
          made = {record, release: async () => {
            this.owned.delete(id)
            await releaseLock()
          }}
        } else made = {record}
        return true
      })
      return made!
    } finally {
      await release()
    }
  }

  private auditDirMade = false

  /** Feature files are created once and never rewritten: the hash of one that exists is read once per store. */
  private readonly featureHashes = new Map<string, string>()

  /** The hash of the feature's file as the run index binds it, null when it has none. */
  private async featureHash(featureId: string): Promise<string | null> {
    const known = this.featureHashes.get(featureId)
    if (known) return known
    const bytes = await readFile(path.join(this.featuresDir, `${featureId}.json`)).catch(() => null)
    if (!bytes) return null
    const hash = fileHash(bytes)
    this.featureHashes.set(featureId, hash)
    return hash
  }

  /** Settles when the last run-index lock this store asked for is released (see lockRunIndex). */
  private indexQueue: Promise<void> = Promise.resolve()

  /**
   * The run index's lock file, taken by one creation of this process at a time: the creations of
   * one process (a foreach's children) queue here instead of polling the lock file against each
   * other, which costs a failed exclusive create, a read of the holder and a 50 ms wait each time.
   */
  private async lockRunIndex(): Promise<() => Promise<void>> {
    const previous = this.indexQueue
    let done!: () => void
    this.indexQueue = new Promise<void>((resolve) => (done = resolve))
    await previous
    try {
      const release = await acquireLock(path.join(this.auditDir, 'runs.lock'), {
        waitMs: 60000,
        busy: (holder) => `another pipe process (pid ${holder.pid}) is creating a run and holds the run index`,
        hint: 'Try again in a moment.',
      })
      return async () => {
        try {
          await release()
        } finally {
          done()
        }
      }
    } catch (error) {
      done()
      throw error
    }
  }

  private creationsFinished: Promise<void> | undefined

  /**
   * Finishes the run creations a killed process left staged (see createRun), once per Store: one
   * it indexed is complete and is renamed into place, so a resumed parent finds the child it
   * created and no later creation takes its id; one it never indexed never became a run and is
   * removed. `pipe audit verify` does the same and reports it; this makes a resume independent of
   * whether it ran first. A staging folder whose creator is alive is left alone.
   */
  async finishCreations(locked = false): Promise<void> {
    this.creationsFinished ??= (async () => {
      const names = await readdir(this.runsDir).catch(() => [] as string[])
      const dead = names.map((name) => ({name, staged: stagedRun(name)})).filter((n) => n.staged !== null && !processAlive(n.staged.pid))
      if (dead.length === 0) return
      const release = locked ? null : await this.lockRunIndex()
      try {
        const indexed = new Set(readChain((await readText(this.runIndexFile)) ?? '', undefined).lines.map((l) => l['run_id']))
        for (const {name, staged} of dead) {
          const from = path.join(this.runsDir, name)
          const to = path.join(this.runsDir, staged!.runId)
          const taken = await stat(to).then(() => true, () => false)
          // Another process may have finished it first: then there is nothing to do.
          if (indexed.has(staged!.runId) && !taken) await rename(from, to).catch(() => undefined)
          else if (!indexed.has(staged!.runId)) await rm(from, {recursive: true, force: true})
        }
      } finally {
        await release?.()
      }
    })()
    return this.creationsFinished
  }

  private async runDb(runId: string): Promise<Low<RunRecord>> {
    return new Low<RunRecord>(new AtomicJsonFile<RunRecord>(within(this.runDir(runId), 'run.json')), null as unknown as RunRecord)
  }

  async readRun(runId: string): Promise<RunRecord> {
    const dir = this.runDir(runId)
    const db = await this.runDb(runId)
    const file = within(dir, 'run.json')
    try {
      await db.read()
    } catch (error) {
      if (error instanceof SyntaxError) throw new PipeError('E_INTEGRITY', `run record of ${runId} is not valid JSON (${file})`, {hint: 'The file was changed outside pipe; run pipe audit verify to see all damage.'})
      throw error
    }
    if (db.data === null && !statSync(file, {throwIfNoEntry: false})) {
      const exists = await readdir(dir).then(() => true, () => false)
      throw new PipeError('E_NOT_FOUND', exists ? `run ${runId} was never completely created (no run.json)` : `run ${runId} not found in ${this.root}`, {hint: 'pipe runs list shows the runs of this store.'})
    }
    return wellFormed<RunRecord>('run', db.data, `the run record of ${runId}`, file)
  }

  /** Refuses a run id that names no run folder (E_NOT_FOUND), without reading its records. */
  async assertRunExists(runId: string): Promise<void> {
    if (!statSync(this.runDir(runId), {throwIfNoEntry: false})?.isDirectory()) throw new PipeError('E_NOT_FOUND', `run ${runId} not found in ${this.root}`, {hint: 'pipe runs list shows the runs of this store.'})
  }

  /**
   * Read-modify-write of a run record; only the process that owns the run calls it. Every change is
   * on the timeline: the event is appended first (binding the record's new state), then the record
   * is written with the new head and sealed. A crash between the two leaves a timeline one line
   * ahead of the record, which audit verify accepts as a change in flight.
   */
  async updateRun(runId: string, change: (record: RunRecord) => void, event: RunEvent): Promise<RunRecord> {
    const owned = this.owned.get(runId)
    const db = await this.runDb(runId)
    try {
      if (owned?.record) db.data = structuredClone(owned.record)
      else {
        await db.read()
        if (db.data !== null) db.data = wellFormed<RunRecord>('run', db.data, `the run record of ${runId}`, within(this.runDir(runId), 'run.json'))
      }
      if (!db.data) throw new PipeError('E_NOT_FOUND', `run ${runId} not found`)
      change(db.data)
      const {head: _h, seal: _s, ...state} = db.data
      assertValid('run', state, 'run record')
      const sealer = runRecordSealer(state)
      const line = await this.appendLine(runId, {...event, run_state: sealer.stateHash})
      const tip = owned?.head ?? (await this.snapshotHead(runId))
      const head = {events: line.count, event_hash: line.hash, ...tip}
      db.data = {...state, head, seal: sealer.seal(head)}
      await db.write()
      if (owned) Object.assign(owned, {record: structuredClone(db.data), timeline: line, head: tip})
      return db.data
    } catch (error) {
      // What failed may have been written in part: learn it all from disk again.
      if (owned) this.owned.set(runId, {})
      throw error
    }
  }

  /** Appends a chained line to the run's timeline, cutting off a torn last line first. */
  private async appendLine(runId: string, event: RunEvent): Promise<{count: number; hash: string}> {
    const file = within(this.runDir(runId), 'events.jsonl')
    // The tail this store appended itself under the run's lock needs no reading (see owned).
    let tail: {count: number; hash: string | null} | undefined = this.owned.get(runId)?.timeline
    if (!tail) {
      // Complete lines only: a torn last line (a crash mid-append) is cut off by appendSynced.
      const text = (await readText(file)) ?? ''
      const lines = text.slice(0, text.lastIndexOf('\n') + 1).split('\n').filter((l) => l.trim())
      const last = lines.at(-1)
      const parsed = last ? (JSON.parse(last) as unknown) : null
      if (last && !(isObject(parsed) && typeof parsed.hash === 'string')) throw new PipeError('E_INTEGRITY', `the last line of ${file} is not a timeline line pipe wrote`, {hint: 'Run pipe audit verify to see the damage.'})
      tail = {count: lines.length, hash: isObject(parsed) ? (parsed.hash as string) : null}
    }
    const sealed = sealLine(event, tail.hash)
    await appendSynced(file, `${JSON.stringify(sealed)}\n`)
    return {count: tail.count + 1, hash: sealed.hash}
  }

  /** The run's last snapshot as the run record's head names it. */
  private async snapshotHead(runId: string): Promise<{seq: number; snapshot_hash: string | null}> {
    const names = snapshotNames(within(this.runDir(runId), 'snapshots'))
    const last = names.at(-1)
    if (!last) return {seq: 0, snapshot_hash: null}
    const file = within(this.runDir(runId), 'snapshots', last)
    const snapshot = wellFormed<Snapshot>('snapshot', await readJson<unknown>(file, `snapshot ${runId}/${last}`), `snapshot ${runId}/${last}`, file)
    return {seq: Number(last.slice(0, -5)), snapshot_hash: snapshot.meta.record_hash ?? null}
  }

  async listRunIds(): Promise<string[]> {
    const names = await readdir(this.runsDir).catch(() => [] as string[])
    return names.filter((name) => ID_PATTERNS.run.test(name)).sort((a, b) => compareIds(b, a))
  }

  /** Appends an event that changes nothing else of the run; the record's head moves with it. */
  async appendEvent(runId: string, event: RunEvent): Promise<RunRecord> {
    return this.updateRun(runId, () => undefined, event)
  }

  async readEvents(runId: string): Promise<RunEvent[]> {
    const file = within(this.runDir(runId), 'events.jsonl')
    const text = await readFile(file, 'utf8').catch(() => '')
    const events: RunEvent[] = []
    const lines = text.split('\n')
    for (const [i, line] of lines.entries()) {
      if (!line.trim()) continue
      let event: unknown
      try {
        event = JSON.parse(line)
      } catch {
        // A crash mid-append can leave a torn last line; everything before it is intact.
        if (i === lines.length - 1) continue
        throw new PipeError('E_INTEGRITY', `line ${i + 1} of the timeline of ${runId} is not valid JSON (${file})`, {hint: 'Lines are appended whole, so it was changed outside pipe; run pipe audit verify to see all damage.'})
      }
      const problem = isObject(event) ? eventLineProblem(event) : notAnObject(event)
      if (problem) throw new PipeError('E_INTEGRITY', `line ${i + 1} of the timeline of ${runId} is malformed (${file}): ${problem}`, {hint: 'It was changed outside pipe; run pipe audit verify to see all damage.'})
      events.push(event as RunEvent)
    }
    return events
  }

  // Ownership: one process drives a run at a time.

  async acquireRun(runId: string): Promise<() => Promise<void>> {
    const release = await acquireLock(within(this.runDir(runId), 'owner.lock'), {
      busy: (holder) => `run ${runId} is being driven by another pipe process (pid ${holder.pid})`,
      hint: 'Wait for it to finish, or stop it; pipe runs show shows its state.',
    })
    // Whatever another process did before this lock was taken is learnt from disk.
    this.owned.set(runId, {})
    return async () => {
      this.owned.delete(runId)
      await release()
    }
  }

  async runOwner(runId: string): Promise<{pid: number; host: string; start_time?: string; alive: boolean} | null> {
    return lockHolder(within(this.runDir(runId), 'owner.lock'))
  }

  // Snapshots

  /**
   * Writes a snapshot once. Writing the very same snapshot again (finishing a commit after a crash)
   * returns it; a different snapshot under the same seq is E_CONFLICT.
   */
  async writeSnapshot(snapshot: Snapshot, options: WriteOptions & {repair?: boolean} = {}): Promise<Snapshot> {
    const binds: Record<string, string> = {}
    for (const version of [snapshot.spec_version_in, snapshot.spec_version_out]) if (version) binds[version] = await this.boundHash(version, this.specFile(version))
    for (const link of snapshot.evidence_links) binds[link.evidence_id] = await this.boundHash(link.evidence_id, this.evidenceFile(link.evidence_id))
    const stored = sealSnapshot({...snapshot, meta: {...snapshot.meta, binds}})
    assertValid('snapshot', stored, `snapshot ${snapshot.run_id}#${snapshot.step.seq}`)
    const file = within(this.runDir(snapshot.run_id), 'snapshots', seqName(snapshot.step.seq))
    const text = `${JSON.stringify(stored, null, 2)}\n`
    if (await writeOnce(file, text, {sync: options.sync ?? true, repair: options.repair === true})) {
      this.noteSnapshot(stored)
      return stored
    }
    throw new PipeError('E_CONFLICT', `snapshot ${snapshot.step.seq} of ${snapshot.run_id} already exists`, {hint: 'Snapshots are written once; another process may be driving this run.'})
  }

  /** A snapshot written under the run's lock right after the last one known moves the known head (see owned). */
  private noteSnapshot(stored: Snapshot): void {
    const owned = this.owned.get(stored.run_id)
    if (owned?.head && stored.step.seq === owned.head.seq + 1) owned.head = {seq: stored.step.seq, snapshot_hash: stored.meta.record_hash ?? null}
    else if (owned) delete owned.head
  }

  async readSnapshots(runId: string): Promise<Snapshot[]> {
    const dir = within(this.runDir(runId), 'snapshots')
    const names = snapshotNames(dir)
    const out: Snapshot[] = []
    for (const name of names) {
      const file = path.join(dir, name)
      const snapshot = wellFormed<Snapshot>('snapshot', await readJson<unknown>(file, `snapshot ${runId}/${name}`), `snapshot ${runId}/${name}`, file)
      if (snapshot.run_id !== runId || `${seqName(snapshot.step.seq)}` !== name) {
        throw new PipeError('E_INTEGRITY', `snapshot ${runId}/${name} names ${snapshot.run_id}#${snapshot.step.seq} (${file})`, {hint: 'It was moved or changed outside pipe; run pipe audit verify to see all damage.'})
      }
      out.push(snapshot)
    }
    return out
  }

  private async boundHash(id: string, file: string): Promise<string> {
    let hash = this.fileHashes.get(id)
    if (!hash) {
      const bytes = await readFile(file).catch(() => null)
      if (!bytes) throw new PipeError('E_NOT_FOUND', `${id} is named by a snapshot but its file is missing (${file})`, {hint: 'Run pipe audit verify to see all damage.'})
      hash = fileHash(bytes)
      this.fileHashes.set(id, hash)
    }
    return hash
  }

  snapshotFile(runId: string, seq: number): string {
    return within(this.runDir(runId), 'snapshots', seqName(seq))
  }

  // Spec versions

  /** Creates a write-once record under the next free id of a series, or finishes one a crash interrupted. */
  private async createSealed(prefix: 'S' | 'E', key: string, file: (id: string) => string, build: (id: string) => string, intent: WriteIntent | undefined, options: WriteOptions): Promise<string> {
    const sync = options.sync ?? true
    if (intent?.candidate) {
      const id = intent.candidate
      const content = build(id)
      // The counter moves first, so that it never names less than what is written (newestSpecVersions).
      await noteIdTaken(this.idsDir, prefix, key, id)
      if (await writeOnce(file(id), content, {sync, repair: intent.repair === true})) return id
    }
    return allocateId(this.idsDir, prefix, key, async (id) => {
      await intent?.onCandidate(id)
      return createFileExclusive(file(id), build(id), {sync})
    })
  }

  /**
   * Rewrites a record a power failure lost, from the commit log line that holds it (see
   * engine/commit.ts): only when its bytes are the ones the snapshot bound, so what is written is
   * exactly what was there. Synced: a repair is rare.
   */
  async restoreRecord(file: string, text: string, boundHash: string): Promise<boolean> {
    if (fileHash(text) !== boundHash) return false
    await writeFileAtomic(file, text)
    return true
  }

  async writeSpec(draft: SpecDraft, now: Date, intent?: WriteIntent, options: WriteOptions = {}): Promise<CanonicalSpec> {
    const built = builder((id) => buildSpec(draft, id))
    const id = await this.createSealed('S', dayKey(now), (v) => this.specFile(v), (v) => built(v).text, intent, options)
    this.fileHashes.set(id, fileHash(built(id).text))
    return built(id).record
  }

  /** The file content of a spec version, as writeSpec writes it. */
  specText(draft: SpecDraft, id: string): string {
    return `${JSON.stringify(buildSpec(draft, id), null, 2)}\n`
  }

  specFile(version: string): string {
    assertId('spec', version)
    return within(this.specsDir, `${version}.json`)
  }

  /** Reads a spec version and checks its content hash: a mismatch is an error, never repaired. */
  async readSpec(version: string): Promise<CanonicalSpec> {
    const file = this.specFile(version)
    const bytes = await readFile(file).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') throw new PipeError('E_NOT_FOUND', `spec version ${version} not found (${file})`)
      throw error
    })
    let parsed: unknown
    try {
      parsed = JSON.parse(bytes.toString('utf8'))
    } catch (error) {
      throw new PipeError('E_INTEGRITY', `spec version ${version} is not valid JSON (${file}): ${(error as Error).message}`, {hint: 'The file was changed or damaged outside pipe; restore it from a backup.'})
    }
    if (!isObject(parsed)) wellFormed('spec', parsed, `spec version ${version}`, file)
    const spec = parsed as CanonicalSpec
    const problems = verifySpec(spec)
    if (problems.length > 0) {
      throw new PipeError('E_INTEGRITY', `spec version ${version} does not match its content hash (${file}: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')})`, {
        hint: `The file ${this.specFile(version)} was changed after it was written; restore it, or run pipe audit verify to see all damage.`,
      })
    }
    wellFormed('spec', spec, `spec version ${version}`, file)
    if (spec.meta.spec_version !== version) throw new PipeError('E_INTEGRITY', `spec version ${version} names ${spec.meta.spec_version} (${file})`, {hint: 'It was moved or changed outside pipe; run pipe audit verify to see all damage.'})
    this.fileHashes.set(version, fileHash(bytes))
    return spec
  }

  /** Stores a complete version under its own name; an existing version is never replaced (E_CONFLICT). */
  async putSpec(spec: CanonicalSpec): Promise<void> {
    if (verifySpec(spec).length > 0) throw new PipeError('E_INTEGRITY', `spec version ${spec.meta.spec_version} does not match its content hash`)
    assertValid('spec', spec, `spec version ${spec.meta.spec_version}`)
    if (!(await createFileExclusive(this.specFile(spec.meta.spec_version), `${JSON.stringify(spec, null, 2)}\n`))) {
      throw new PipeError('E_CONFLICT', `spec version ${spec.meta.spec_version} already exists and is immutable`, {hint: 'A change to the spec is a new version; run a step that writes one.'})
    }
  }

  /**
   * Spec versions newest first, without listing the specs folder (35,000 names at 10,000 runs): the
   * id counters in ids/ say, per day, the highest number allocated, and every number under it was
   * allocated or tried. A counter is moved before the id it names is taken (allocateId, createSealed),
   * so it is never behind a written version; a few numbers past it are still probed, for counters an
   * older pipe wrote after the fact. Numbers never written (a take lost to a crash) are skipped.
   * Without readable counters, with one far past what exists, or with versions on a day between that
   * has no counter (removed by hand), this falls back to listing the folder; versions older than the
   * oldest counter come from the folder once the counted days are listed.
   */
  async *newestSpecVersions(now: Date = new Date()): AsyncGenerator<string> {
    const names = await readdir(this.idsDir).catch(() => null)
    const days = (names ?? []).filter((n) => /^S-\d{8}$/.test(n)).sort().reverse()
    const tops = new Map<string, number>()
    for (const name of days) {
      // A counter that is not a plain number in a regular file (a FIFO, a device, a folder) is not pipe's.
      const top = await readCounter(path.join(this.idsDir, name))
      if (top === null) {
        tops.clear()
        break
      }
      tops.set(name.slice(2), top)
    }
    const exists = (version: string): Promise<boolean> => stat(this.specFile(version)).then(() => true, () => false)
    const given = new Set<string>()
    // The rest of the versions, from the folder: what the counters cannot account for.
    const rest = async function* (this: Store): AsyncGenerator<string> {
      for (const v of (await this.listSpecVersions()).reverse()) if (!given.has(v)) yield v
    }.bind(this)
    // Day by day, newest first: a counted day's versions from its counter down; a day between
    // without a counter is probed by its first numbers, and versions there (a counter lost or removed
    // by hand) mean the counters do not name everything, so the folder lists the rest.
    const between = probeDays(tops.keys(), now)
    if (between === null) {
      yield* rest()
      return
    }
    for (const day of [...new Set([...tops.keys(), ...between])].sort().reverse()) {
      const top = tops.get(day)
      if (top === undefined) {
        if ((await exists(formatId('S', day, 1))) || (await exists(formatId('S', day, 2)))) {
          yield* rest()
          return
        }
        continue
      }
      let n = top
      for (let probe = n + 1; probe <= n + 4; probe++) if (await exists(formatId('S', day, probe))) n = probe
      let misses = 0
      for (; n >= 1; n--) {
        const version = formatId('S', day, n)
        if (!(await exists(version))) {
          // A counter far past what exists was not written by pipe: trust the folder instead.
          if (++misses > 1000) {
            yield* rest()
            return
          }
          continue
        }
        misses = 0
        given.add(version)
        yield version
      }
    }
    // Every counted day is listed: versions of days older than the oldest counter come from the folder.
    yield* rest()
  }

  async listSpecVersions(): Promise<string[]> {
    const names = await readdir(this.specsDir).catch(() => [] as string[])
    return names
      .filter((n) => n.endsWith('.json'))
      .map((n) => n.slice(0, -5))
      .filter((n) => ID_PATTERNS.spec.test(n))
      .sort(compareIds)
  }

  // Evidence

  async writeEvidence(draft: EvidenceDraft, now: Date, intent?: WriteIntent, options: WriteOptions = {}): Promise<Evidence> {
    const built = builder((id) => buildEvidence(draft, now, id))
    const id = await this.createSealed('E', '', (v) => this.evidenceFile(v), (v) => built(v).text, intent, options)
    this.fileHashes.set(id, fileHash(built(id).text))
    return built(id).record
  }

  /** The file content of an evidence record, as writeEvidence writes it. */
  evidenceText(draft: EvidenceDraft, now: Date, id: string): string {
    return `${JSON.stringify(buildEvidence(draft, now, id), null, 2)}\n`
  }

  evidenceFile(id: string): string {
    assertId('evidence', id)
    return within(this.evidenceDir, `${id}.json`)
  }

  async listEvidenceIds(): Promise<string[]> {
    const names = await readdir(this.evidenceDir).catch(() => [] as string[])
    return names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5)).filter((n) => ID_PATTERNS.evidence.test(n)).sort(compareIds)
  }

  /** Likely next ids of a series, for a journal to name before it writes (see engine/commit.ts). */
  async candidateIds(series: 'spec' | 'evidence', at: Date, count: number): Promise<string[]> {
    return series === 'spec' ? peekIds(this.idsDir, 'S', dayKey(at), count) : peekIds(this.idsDir, 'E', '', count)
  }

  // The commit log of the run: one line per step that writes records, before it writes them (see engine/commit.ts).

  commitLogFile(runId: string): string {
    return within(this.runDir(runId), 'commits.jsonl')
  }

  /** Appends a journal to the run's commit log: the step's one sync. A torn last line (a crash mid-append) is cut off first. */
  async appendCommit(runId: string, journal: unknown): Promise<void> {
    await appendSynced(this.commitLogFile(runId), `${JSON.stringify(journal)}\n`)
  }

  /**
   * The commit log's lines; a torn last line is left out. A line that is not JSON elsewhere was
   * changed outside pipe: E_INTEGRITY, or with `lenient` (repairing a run that has ended, where only
   * records a snapshot binds are rewritten) left out.
   */
  async readCommitLog(runId: string, lenient = false): Promise<unknown[]> {
    const text = (await readText(this.commitLogFile(runId))) ?? ''
    const raw = text.split('\n')
    // The last element is '' after a complete last line, or a torn line: either way not a line.
    raw.pop()
    return raw.map((line, i) => {
      try {
        return JSON.parse(line) as unknown
      } catch {
        if (lenient) return undefined
        throw new PipeError('E_INTEGRITY', `line ${i + 1} of the commit log of ${runId} is not valid JSON`, {hint: `It is appended whole, so it was changed outside pipe: ${this.commitLogFile(runId)}`})
      }
    })
  }

  // The journal file of an interrupted commit, as pipe wrote it before the commit log (read once, then moved into the log).

  journalFile(runId: string): string {
    return within(this.runDir(runId), 'journal.json')
  }

  async readJournal(runId: string): Promise<unknown> {
    return (await this.readOwnJson(this.journalFile(runId), `the commit journal of ${runId}`)) ?? null
  }

  /** A JSON file pipe wrote atomically, or undefined when there is none: one that does not parse was changed outside pipe. */
  private async readOwnJson(file: string, what: string): Promise<unknown> {
    const text = await readText(file)
    if (text === null) return undefined
    try {
      return JSON.parse(text) as unknown
    } catch {
      throw new PipeError('E_INTEGRITY', `${what} is not valid JSON`, {hint: `It was written atomically, so it was changed outside pipe: ${file}`})
    }
  }

  async deleteJournal(runId: string): Promise<void> {
    await rm(this.journalFile(runId), {force: true})
  }

  // The working state of a step that pauses or may be interrupted mid-way (an agent's conversation),
  // one file per step run (step id and seq), so that a resume continues where it stood. It decides
  // what a resumed step does (which call a confirmation runs), so it is sealed like every record
  // (keyed with PIPE_AUDIT_KEY), and a file whose seal does not hold is never acted on.

  stepStateFile(runId: string, step: string, seq: number): string {
    if (!/^[a-z][a-z0-9_]*$/.test(step)) throw new PipeError('E_INTERNAL', `not a step id: ${JSON.stringify(step)}`)
    return path.join(this.runDir(runId), 'state', `${String(seq).padStart(6, '0')}-${step}.json`)
  }

  async readStepState(runId: string, step: string, seq: number): Promise<unknown> {
    const file = this.stepStateFile(runId, step, seq)
    const parsed = await this.readOwnJson(file, `the state of step ${step} (seq ${seq}) of ${runId}`)
    if (parsed === undefined) return undefined
    const problem = stepStateProblem(parsed)
    if (problem) throw new PipeError('E_INTEGRITY', `the state of step ${step} (seq ${seq}) of ${runId} ${problem}`, {hint: `It was changed outside pipe, and a resumed step acts on it, so it is not used: ${file}. pipe audit verify ${runId} names what else changed.`})
    return (parsed as {state: unknown}).state
  }

  async writeStepState(runId: string, step: string, seq: number, state: unknown): Promise<void> {
    const file = this.stepStateFile(runId, step, seq)
    await mkdir(path.dirname(file), {recursive: true})
    await writeFileAtomic(file, `${JSON.stringify(sealRecord({state}))}\n`)
  }

  /** The seq of the latest state file of `step` (the attempt a pause of that step waits in), or null. */
  async latestStepStateSeq(runId: string, step: string): Promise<number | null> {
    const names = await readdir(path.join(this.runDir(runId), 'state')).catch(() => [] as string[])
    const seqs = names.map((n) => (n.endsWith(`-${step}.json`) ? Number(n.slice(0, 6)) : NaN)).filter((n) => Number.isInteger(n))
    return seqs.length > 0 ? Math.max(...seqs) : null
  }

  async readEvidence(id: string): Promise<Evidence> {
    const file = this.evidenceFile(id)
    const evidence = wellFormed<Evidence>('evidence', await readJson<unknown>(file, `evidence ${id}`), `evidence ${id}`, file)
    if (evidence.evidence_id !== id) throw new PipeError('E_INTEGRITY', `evidence ${id} names ${evidence.evidence_id} (${file})`, {hint: 'It was moved or changed outside pipe; run pipe audit verify to see all damage.'})
    return evidence
  }

  // Features

  featureFile(id: string): string {
    assertId('feature', id)
    return path.join(this.featuresDir, `${id}.json`)
  }

  async createFeature(now: Date, title: string): Promise<string> {
    return allocateId(this.idsDir, 'F', String(now.getUTCFullYear()), (id) =>
      createFileExclusive(this.featureFile(id), `${JSON.stringify(sealRecord({feature_id: id, title, created_at: now.toISOString()}), null, 2)}\n`),
    )
  }

  async ensureFeature(id: string, now: Date): Promise<void> {
    await createFileExclusive(this.featureFile(id), `${JSON.stringify(sealRecord({feature_id: id, created_at: now.toISOString()}), null, 2)}\n`)
  }
}


/** What is wrong with a step state file as parsed (`{state, seal}`), or null when its seal holds. */
function stepStateProblem(parsed: unknown): string | null {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed) || !('state' in parsed)) return 'is not a pipe step state record'
  if (!('seal' in parsed)) return 'is not sealed'
  const sealed = checkRecord(parsed)
  return sealed === 'ok' ? null : `fails its seal: ${sealMessage(sealed)}`
}
