/**
 * pipe audit verify: recompute every seal and link of the stored trail and name each record that
 * was changed, removed, reordered or re-sealed after the fact, with its file and field.
 *
 * What anchors what (see store.ts): the run index chains every run and binds the facts fixed at its
 * creation and its feature's file; a run's timeline chains its lines, and each line binds the run
 * record's state; the run record seals the head (timeline length and last hash, last snapshot seq
 * and hash); snapshots chain to each other and bind the files of the spec versions and evidence they
 * name; the ledger log chains every ledger write. So an edit shows at its own seal, and an edit
 * re-sealed with pipe's own functions shows at the next link; only a rewrite of everything after it
 * goes unseen, which keyed mode (PIPE_AUDIT_KEY) prevents and the printed head digest, anchored
 * elsewhere, reveals.
 *
 * Before checking, leftovers of crashes are tidied and reported as cleaned, never as damage: temp
 * files whose writer is gone, and run folders whose creation a crash interrupted.
 *
 * Reads are synchronous on purpose: a whole-store check reads thousands of small files one after
 * another, and the promise-based reads cost several times the CPU of the reads themselves.
 */
import {closeSync, constants, fstatSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, unlinkSync} from 'node:fs'
import path from 'node:path'
import {check} from '../schema/registry.js'
import type {Evidence} from '../types/evidence.js'
import type {LedgerEntry} from '../types/ledger.js'
import {ReplyCache, replyFileProblem, textRefs} from './replies.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {hashJson} from '../util/hash.js'
import {processAlive} from '../util/lock.js'
import {auditKey, checkRecord, fileHash, runCreationHash, runStateHash, sealMessage, verifyEvidence, verifySnapshot, verifySpec, type IntegrityProblem, type SealCheck} from './integrity.js'
import {compareIds, ID_PATTERNS} from './ids.js'
import {eventLineProblem, indexLineProblem, isObject, ledgerLineProblem, notAnObject} from './shapes.js'
import type {Store} from './store.js'
import {readChain, stagedRun, tempWriter, type ChainedLine} from './trail.js'

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
}

/** Statuses in which no step can be in flight: the run record was sealed after its last snapshot. */
const SETTLED = new Set(['succeeded', 'failed', 'blocked', 'cancelled', 'awaiting_input'])

type Parsed<T> = {ok: true; value: T; bytes: Buffer} | {ok: false; message: string}

/** One buffer for every read: records are small, and readFileSync's fstat and allocation per file add up over a store. */
const scratch = Buffer.allocUnsafe(1 << 16)

/**
 * Opens `file` without blocking (a FIFO put in a record's place must not hang the audit) and gives
 * `read` its descriptor; a missing or unreadable file is a message, not an exception.
 */
function readWith(file: string, read: (fd: number) => Buffer | string): Buffer | string {
  let fd: number
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK)
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file is missing' : `cannot read (${String(error)})`
  }
  try {
    return read(fd)
  } catch (error) {
    return `cannot read (${String(error)})`
  } finally {
    closeSync(fd)
  }
}

function readBytes(file: string): Buffer | string {
  return readWith(file, (fd) => {
    const n = readSync(fd, scratch, 0, scratch.length, 0)
    if (n < scratch.length) return Buffer.from(scratch.subarray(0, n))
    // (A device in a record's place would never end.)
    return fstatSync(fd).isFile() ? readFileSync(fd) : 'cannot read (not a regular file)'
  })
}

/** The end of a file, enough to hold its last line (or all of it, when the line is longer). */
function readTail(file: string): Buffer | string {
  return readWith(file, (fd) => {
    const stats = fstatSync(fd)
    if (!stats.isFile()) return 'cannot read (not a regular file)'
    const {size} = stats
    const take = Math.min(size, scratch.length)
    const n = readSync(fd, scratch, 0, take, size - take)
    const tail = scratch.subarray(0, n)
    // A complete last line has a newline before it within the tail (or the tail is the whole file).
    if (take === size || tail.lastIndexOf(0x0a, n - 2) >= 0) return Buffer.from(tail)
    return readFileSync(fd)
  })
}

function parseBytes<T>(bytes: Buffer | string): Parsed<T> {
  if (typeof bytes === 'string') return {ok: false, message: bytes}
  try {
    return {ok: true, value: JSON.parse(bytes.toString('utf8')) as T, bytes}
  } catch (error) {
    return {ok: false, message: `not valid JSON (${(error as Error).message})`}
  }
}

function parseFile<T>(file: string): Parsed<T> {
  return parseBytes<T>(readBytes(file))
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

function schemaFindings(schema: 'run' | 'snapshot' | 'spec' | 'evidence' | 'ledger', value: unknown, record: string, file: string): AuditFinding[] {
  const result = check(schema, value)
  return result.errors.map((e) => ({record, file, field: e.instancePath.slice(1).replace(/\//g, '.') || '(record)', message: `does not match the ${schema} schema: ${e.message ?? e.keyword}`}))
}

export class Auditor {
  /** Spec versions and evidence already checked, with the sha256 of their file (null: unreadable). */
  private readonly files = new Map<string, string | null>()
  private readonly fullyChecked = new Set<string>()
  /** '' when no key is set, so that the seal functions do not look the environment up again per record. */
  readonly key = auditKey() ?? ''
  readonly report: AuditReport = {ok: true, keyed: false, runs: 0, snapshots: 0, specs: 0, evidence: 0, events: 0, features: 0, ledger: 0, unverifiable: 0, problems: [], notes: [], cleaned: [], head: null}
  /** run id -> the run's seal, for the head digest. */
  readonly runSeals = new Map<string, string | null>()

  constructor(private readonly store: Store) {
    this.report.keyed = this.key !== ''
  }

  problem(finding: AuditFinding): void {
    this.report.problems.push(finding)
    this.report.ok = false
  }

  /** Reports a failed seal check; a keyed seal without the key is counted, not reported one by one. */
  seal(result: SealCheck, record: string, file: string, field: string): void {
    if (result === 'ok') return
    if (result === 'no-key') {
      this.report.unverifiable++
      return
    }
    this.problem({record, file, field, message: sealMessage(result)})
  }

  private integrity(problems: IntegrityProblem[], record: string, file: string): void {
    for (const p of problems) {
      if (p.check === 'no-key') this.report.unverifiable++
      else this.problem({record, file, field: p.field, message: p.message})
    }
  }

  /** Removes a temp file whose writer is gone; one being written right now is left alone. */
  tidyTemp(dir: string, name: string): boolean {
    const pid = tempWriter(name)
    if (pid === null) return false
    if (pid !== process.pid && !processAlive(pid)) {
      const file = path.join(dir, name)
      try {
        unlinkSync(file)
        this.report.cleaned.push({record: name, file, field: '(file)', message: `removed a temporary file left by process ${pid}, which is gone`})
      } catch {
        // Gone already.
      }
    }
    return true
  }

  tidyDir(dir: string): void {
    for (const name of listDir(dir)) this.tidyTemp(dir, name)
  }

  /**
   * A run folder a crash left half-made: before it was indexed it is removed; after, it is complete
   * and is renamed into place. A folder whose creator is alive is left alone.
   */
  tidyStagedRuns(indexed: Set<string>): void {
    for (const name of listDir(this.store.runsDir)) {
      if (this.tidyTemp(this.store.runsDir, name)) continue
      const staged = stagedRun(name)
      if (!staged || processAlive(staged.pid)) continue
      const from = path.join(this.store.runsDir, name)
      const to = path.join(this.store.runsDir, staged.runId)
      const exists = (() => {
        try {
          statSync(to)
          return true
        } catch {
          return false
        }
      })()
      try {
        if (indexed.has(staged.runId) && !exists) {
          renameSync(from, to)
          this.report.cleaned.push({record: staged.runId, file: to, field: '(file)', message: `finished creating the run (process ${staged.pid} was killed after indexing it)`})
        } else {
          rmSync(from, {recursive: true})
          this.report.cleaned.push({record: staged.runId, file: from, field: '(file)', message: `removed a run creation that process ${staged.pid} abandoned (it never became a run)`})
        }
      } catch {
        // Another audit verify tidied it first.
      }
    }
  }

  /** The sha256 of a spec or evidence file, read once. */
  private fileOf(id: string, file: string): string | null {
    if (!this.files.has(id)) {
      const bytes = readBytes(file)
      this.files.set(id, typeof bytes === 'string' ? null : fileHash(bytes))
    }
    return this.files.get(id)!
  }

  /** Checks a spec version fully: parse, content hash, schema, name. */
  spec(version: string, referencedBy: string): CanonicalSpec | null {
    if (this.fullyChecked.has(version)) return null
    this.fullyChecked.add(version)
    const file = this.store.specFile(version)
    const parsed = parseFile<CanonicalSpec>(file)
    if (!parsed.ok) {
      this.problem({record: version, file, field: '(file)', message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`})
      return null
    }
    if (!isObject(parsed.value)) {
      this.problem({record: version, file, field: '(record)', message: notAnObject(parsed.value)})
      return null
    }
    this.integrity(verifySpec(parsed.value), version, file)
    const malformed = schemaFindings('spec', parsed.value, version, file)
    for (const f of malformed) this.problem(f)
    if (parsed.value.meta?.spec_version !== version) this.problem({record: version, file, field: 'meta.spec_version', message: `names ${String(parsed.value.meta?.spec_version)}, not the file's version`})
    // A malformed version is reported; nothing further is read from it.
    return malformed.length === 0 ? parsed.value : null
  }

  evidence(id: string, referencedBy: string): void {
    if (this.fullyChecked.has(id)) return
    this.fullyChecked.add(id)
    const file = this.store.evidenceFile(id)
    const parsed = parseFile<Evidence>(file)
    if (!parsed.ok) {
      this.problem({record: id, file, field: '(file)', message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`})
      return
    }
    if (!isObject(parsed.value)) {
      this.problem({record: id, file, field: '(record)', message: notAnObject(parsed.value)})
      return
    }
    this.integrity(verifyEvidence(parsed.value), id, file)
    for (const f of schemaFindings('evidence', parsed.value, id, file)) this.problem(f)
    if (parsed.value.evidence_id !== id) this.problem({record: id, file, field: 'evidence_id', message: `names ${String(parsed.value.evidence_id)}, not the file's id`})
  }

  /**
   * A spec version or evidence record a snapshot names: when its file is byte for byte the one the
   * snapshot bound, it is exactly what pipe wrote (and checked) and needs no further work.
   */
  private bound(id: string, kind: 'spec' | 'evidence', snapshot: Snapshot, record: string, snapshotFile: string): void {
    const file = kind === 'spec' ? this.store.specFile(id) : this.store.evidenceFile(id)
    const first = !this.files.has(id)
    const actual = this.fileOf(id, file)
    if (first && kind === 'spec') this.report.specs++
    else if (first) this.report.evidence++
    const expected = snapshot.meta?.binds?.[id]
    if (actual !== null && expected === actual) return
    // Name the field that changed, if the file says which.
    if (kind === 'spec') this.spec(id, record)
    else this.evidence(id, record)
    if (expected === undefined) this.problem({record, file: snapshotFile, field: 'meta.binds', message: `does not bind ${id}, which the snapshot names`})
    else if (actual !== null) this.problem({record: id, file, field: '(file)', message: `is not the file snapshot ${record} bound (changed or re-sealed after the fact)`})
  }

  run(runId: string, indexLine: ChainedLine | undefined): Snapshot[] {
    this.report.runs++
    const dir = this.store.runDir(runId)
    const names = listDir(dir)
    for (const name of names) this.tidyTemp(dir, name)
    const runFile = path.join(dir, 'run.json')
    const parsed = parseFile<RunRecord>(runFile)
    let run: RunRecord | null = null
    if (!parsed.ok || !isObject(parsed.value)) {
      this.problem({record: runId, file: runFile, field: parsed.ok ? '(record)' : '(file)', message: parsed.ok ? notAnObject(parsed.value) : parsed.message})
      this.runSeals.set(runId, null)
    } else {
      run = parsed.value
      this.runSeals.set(runId, typeof run.seal === 'string' ? run.seal : null)
      for (const f of schemaFindings('run', run, runId, runFile)) this.problem(f)
      if (run.run_id !== runId) this.problem({record: runId, file: runFile, field: 'run_id', message: `names ${String(run.run_id)}, not the folder's run`})
      if (run.seal === undefined) this.problem({record: runId, file: runFile, field: 'seal', message: 'the run record is not sealed'})
      else this.seal(checkRecord(run, this.key), runId, runFile, 'seal')
      if (indexLine && indexLine.created_hash !== runCreationHash(run as unknown as Record<string, unknown>)) {
        this.problem({record: runId, file: runFile, field: '(created)', message: 'what the run was created with (pipeline, input, feature, policy, times) differs from the run index'})
      }
    }
    // Only a head of the right shape anchors the checks below (a malformed one is reported above).
    const head = isObject(run?.head) && Number.isInteger(run.head.events) && Number.isInteger(run.head.seq) ? run.head : undefined

    // The timeline.
    const eventsFile = path.join(dir, 'events.jsonl')
    const text = readBytes(eventsFile)
    const chain = readChain(typeof text === 'string' ? '' : text.toString('utf8'), this.key, eventLineProblem)
    this.report.events += chain.lines.length
    for (const p of chain.problems) {
      if (p.check) this.seal(p.check, runId, eventsFile, `line ${p.line}`)
      else this.problem({record: runId, file: eventsFile, field: `line ${p.line}`, message: p.message})
    }
    if (chain.torn) this.report.notes.push({record: runId, file: eventsFile, field: `line ${chain.lines.length + 1}`, message: 'torn last line (a crash while appending); earlier lines are intact'})
    if (head && run) {
      const anchored = chain.lines[head.events - 1]
      if (chain.lines.length < head.events) {
        this.problem({record: runId, file: eventsFile, field: `line ${chain.lines.length + 1}`, message: `the timeline has ${chain.lines.length} line(s), the run record's head names ${head.events} (lines were removed)`})
      } else if (head.events > 0 && anchored?.hash !== head.event_hash) {
        this.problem({record: runId, file: eventsFile, field: `line ${head.events}`, message: "is not the line the run record's head names (rewritten or re-sealed)"})
      } else if (anchored && anchored.run_state !== runStateHash(run as unknown as Record<string, unknown>)) {
        this.problem({record: runId, file: runFile, field: '(state)', message: `the run record is not the state its timeline line ${head.events} recorded (status, owner, answers or decisions changed)`})
      }
      if (chain.lines.length > head.events) {
        this.report.notes.push({record: runId, file: eventsFile, field: `line ${head.events + 1}`, message: 'a change to the run record was interrupted (the timeline is ahead of the record); the next change completes it'})
      }
    }
    if (names.includes('journal.json')) {
      this.report.notes.push({record: runId, file: this.store.journalFile(runId), field: '(file)', message: 'a step commit was interrupted; pipe resume finishes it'})
    }
    const problemsBefore = this.report.problems.length

    // Snapshots.
    const snapshotDir = path.join(dir, 'snapshots')
    const files = listDir(snapshotDir)
      .filter((n) => !this.tidyTemp(snapshotDir, n))
      .sort()
    if (!names.includes('snapshots') && (head?.seq ?? 0) > 0) this.problem({record: runId, file: snapshotDir, field: '(folder)', message: 'the snapshots folder is missing'})
    const snapshots: Snapshot[] = []
    let expectedPrev: string | null | undefined = null
    const replayOf: unknown = run?.replay_of
    if (replayOf !== undefined) {
      if (isObject(replayOf) && typeof replayOf.run_id === 'string' && ID_PATTERNS.run.test(replayOf.run_id) && Number.isInteger(replayOf.seq)) {
        const origin = (replayOf.seq as number) > 1 ? parseFile<Snapshot>(this.store.snapshotFile(replayOf.run_id, (replayOf.seq as number) - 1)) : null
        expectedPrev = origin === null ? null : origin.ok && isObject(origin.value) && isObject(origin.value.meta) ? origin.value.meta.record_hash : undefined
      } else expectedPrev = undefined
    }
    let expectedSeq = 1
    let headSeen = false
    for (const name of files) {
      const file = path.join(snapshotDir, name)
      const seqText = /^(\d{6,})\.json$/.exec(name)?.[1]
      if (!seqText) {
        this.problem({record: `${runId}/${name}`, file, field: '(file)', message: 'not a snapshot file name'})
        continue
      }
      const seq = Number(seqText)
      const record = `${runId}#${seq}`
      while (expectedSeq < seq) {
        this.problem({record: `${runId}#${expectedSeq}`, file: this.store.snapshotFile(runId, expectedSeq), field: '(file)', message: 'snapshot is missing (a gap in seq)'})
        expectedSeq++
        expectedPrev = undefined
      }
      expectedSeq = seq + 1
      this.report.snapshots++
      const parsedSnapshot = parseFile<Snapshot>(file)
      if (!parsedSnapshot.ok) {
        this.problem({record, file, field: '(file)', message: parsedSnapshot.message})
        expectedPrev = undefined
        continue
      }
      const s = parsedSnapshot.value
      if (!isObject(s)) {
        this.problem({record, file, field: '(record)', message: notAnObject(s)})
        expectedPrev = undefined
        continue
      }
      const damage = verifySnapshot(s, this.key)
      this.integrity(damage, record, file)
      // Even a snapshot whose seal holds is checked: without a key, anyone can seal anything.
      const malformed = schemaFindings('snapshot', s, record, file)
      for (const f of malformed) this.problem(f)
      // Only a well-formed snapshot is handed on (to the step kinds, for the keys it delivered).
      if (malformed.length === 0) snapshots.push(s)
      if (s.run_id !== runId) this.problem({record, file, field: 'run_id', message: `names run ${String(s.run_id)}`})
      if (s.step?.seq !== seq) this.problem({record, file, field: 'step.seq', message: `is ${String(s.step?.seq)}, but the file is seq ${seq}`})
      if (expectedPrev !== undefined && s.meta?.prev_hash !== expectedPrev) {
        this.problem({record, file, field: 'meta.prev_hash', message: 'does not match the record hash of the snapshot before it (the chain is broken)'})
      }
      expectedPrev = s.meta?.record_hash
      if (head && seq === head.seq) {
        headSeen = true
        if (s.meta?.record_hash !== head.snapshot_hash) this.problem({record, file, field: 'meta.record_hash', message: "is not the snapshot the run record's head names (rewritten or re-sealed)"})
      }
      if (head && run && seq > head.seq && SETTLED.has(run.status)) {
        this.problem({record, file, field: '(file)', message: `was written after the run record was sealed, yet the run is ${run.status} (added after the fact)`})
      }
      for (const version of [s.spec_version_in, s.spec_version_out]) if (typeof version === 'string' && ID_PATTERNS.spec.test(version)) this.bound(version, 'spec', s, record, file)
      const links: unknown = s.evidence_links
      for (const link of Array.isArray(links) ? links : []) {
        if (isObject(link) && typeof link.evidence_id === 'string' && ID_PATTERNS.evidence.test(link.evidence_id)) this.bound(link.evidence_id, 'evidence', s, record, file)
      }
    }
    if (head && head.seq > 0 && !headSeen) {
      const last = snapshots.at(-1)?.step.seq ?? 0
      this.problem({record: `${runId}#${head.seq}`, file: this.store.snapshotFile(runId, head.seq), field: '(file)', message: `the run record's head names snapshot #${head.seq}, but ${last ? `the last is #${last}` : 'there are none'} (snapshots were removed)`})
    }
    if (names.includes('state')) this.stepStates(runId, path.join(dir, 'state'))
    if (names.includes('commits.jsonl')) this.commitLog(runId, this.report.problems.length > problemsBefore, new Set(files), head && run && SETTLED.has(run.status) ? {seq: head.seq, status: run.status} : null)
    return snapshots
  }

  /**
   * The working state of the run's paused or interrupted steps (an agent's conversation): each file
   * sealed, since a resumed step acts on it. It is not chained to the trail (it changes as the step
   * goes), so a file re-sealed with pipe's own functions passes unless keyed mode is on.
   */
  private stepStates(runId: string, stateDir: string): void {
    for (const name of listDir(stateDir)) {
      if (this.tidyTemp(stateDir, name) || !/^\d{6}-[a-z][a-z0-9_]*\.json$/.test(name)) continue
      const file = path.join(stateDir, name)
      const parsed = parseFile<unknown>(file)
      const record = `${runId} state ${name.slice(0, -5)}`
      if (!parsed.ok) {
        this.problem({record, file, field: '(file)', message: parsed.message})
        continue
      }
      const sealed = parsed.value !== null && typeof parsed.value === 'object' && 'seal' in parsed.value ? checkRecord(parsed.value, this.key) : null
      if (sealed === 'ok') continue
      if (sealed === 'no-key') {
        this.report.unverifiable++
        continue
      }
      this.problem({record, file, field: 'seal', message: sealed === null ? 'the step state is not sealed' : sealMessage(sealed)})
    }
  }

  /**
   * The run's commit log (see engine/commit.ts): its last line without a snapshot is a commit a crash
   * interrupted. When the run has damage, each record or snapshot the log can rebuild byte for byte
   * (missing, empty or not JSON: what a power failure leaves of an unsynced write) is named, since
   * pipe resume rewrites it. Only the last line is read when the run is intact.
   */
  /** `settled`: the run's status and last snapshot when it is not running, so that no commit can be in flight past it. */
  private commitLog(runId: string, damaged: boolean, snapshotNames: ReadonlySet<string>, settled: {seq: number; status: string} | null): void {
    const file = this.store.commitLogFile(runId)
    const text = damaged ? readBytes(file) : readTail(file)
    if (typeof text === 'string') {
      if (text !== 'file is missing') this.report.notes.push({record: runId, file, field: '(file)', message: `the commit log ${text.replace(/^cannot read/, 'cannot be read')}: pipe resume cannot finish or repair a commit from it`})
      return
    }
    const raw = text.toString('utf8').split('\n')
    raw.pop()
    const bySeq = new Map<number, {seq: number; recorded_at?: string; spec?: {candidate?: string} | null; evidence?: Array<{candidate?: string}>}>()
    for (const [i, line] of raw.entries()) {
      if (!damaged && i < raw.length - 1) continue
      try {
        const entry = JSON.parse(line) as {run_id?: string; seq?: unknown}
        if (entry.run_id === runId && typeof entry.seq === 'number') bySeq.set(entry.seq, entry as {seq: number})
      } catch {
        // The first line of a tail read may be cut; read whole, a line that is not JSON was changed (the log is not the trail: nothing is bound to it).
        if (damaged) this.report.notes.push({record: runId, file, field: `line ${i + 1}`, message: `line ${i + 1} of the commit log is not JSON (changed outside pipe?): it is ignored for a run that has ended, and a run still going is not resumed from this log`})
      }
    }
    const lines = [...bySeq.values()].sort((a, b) => a.seq - b.seq)
    const state = (f: string): 'ok' | 'missing' | 'damaged' => {
      const parsed = parseFile<unknown>(f)
      return parsed.ok ? 'ok' : parsed.message === 'file is missing' ? 'missing' : 'damaged'
    }
    const last = lines.at(-1)
    for (const line of lines) {
      const snapshotFile = this.store.snapshotFile(runId, line.seq)
      if (settled && line.seq > settled.seq && !snapshotNames.has(path.basename(snapshotFile))) {
        this.report.notes.push({record: `${runId}#${line.seq}`, file, field: `seq ${line.seq}`, message: `names a step past the run's last snapshot #${settled.seq}, yet the run is ${settled.status}: no step wrote it (changed by hand?), and pipe resume ignores it`})
        continue
      }
      if (line === last && !snapshotNames.has(path.basename(snapshotFile))) {
        this.report.notes.push({record: `${runId}#${line.seq}`, file, field: `seq ${line.seq}`, message: 'a step commit was interrupted; pipe resume finishes it'})
        continue
      }
      if (!damaged) continue
      const snapshot = state(snapshotFile)
      if (snapshot !== 'ok') {
        this.report.notes.push({record: `${runId}#${line.seq}`, file, field: `seq ${line.seq}`, message: `the snapshot is ${snapshot}, and the commit log holds it (lost in a power failure?): pipe resume ${runId} rewrites it`})
        continue
      }
      // The log is not bound to anything: a line changed by hand must not stop the audit.
      const items: unknown[] = [...(Array.isArray(line.evidence) ? line.evidence : []), line.spec]
      const ids = items.map((item) => (typeof item === 'object' && item !== null ? (item as {candidate?: unknown}).candidate : undefined)).filter((id): id is string => typeof id === 'string')
      for (const id of ids) {
        const recordFile = ID_PATTERNS.spec.test(id) ? this.store.specFile(id) : ID_PATTERNS.evidence.test(id) ? this.store.evidenceFile(id) : null
        if (!recordFile) continue
        const found = state(recordFile)
        if (found !== 'ok') this.report.notes.push({record: id, file: recordFile, field: '(file)', message: `is ${found}, and the commit log of ${runId} holds it (lost in a power failure?): pipe resume ${runId} rewrites it`})
      }
    }
  }

  /** Records no snapshot refers to: left by a step whose commit was never finished. */
  unreferenced(): void {
    for (const name of listDir(this.store.specsDir)) {
      if (this.tidyTemp(this.store.specsDir, name)) continue
      const version = name.endsWith('.json') ? name.slice(0, -5) : ''
      if (!ID_PATTERNS.spec.test(version) || this.files.has(version)) continue
      this.report.specs++
      const spec = this.spec(version, '')
      if (spec) this.report.notes.push({record: version, file: this.store.specFile(version), field: '(file)', message: `no snapshot refers to it (written by ${spec.meta.run_id} step ${spec.meta.created_by_step}, whose commit did not finish)`})
    }
    for (const name of listDir(this.store.evidenceDir)) {
      if (this.tidyTemp(this.store.evidenceDir, name)) continue
      const id = name.endsWith('.json') ? name.slice(0, -5) : ''
      if (!ID_PATTERNS.evidence.test(id) || this.files.has(id)) continue
      this.report.evidence++
      this.evidence(id, '')
      this.report.notes.push({record: id, file: this.store.evidenceFile(id), field: '(file)', message: 'no snapshot refers to it'})
    }
  }

  /** Feature records: sealed, present for every run that names one, and as the run index bound them. */
  features(referenced: Map<string, string[]>, bound: Map<string, string>): Map<string, string | null> {
    const seals = new Map<string, string | null>()
    const present = new Set<string>()
    for (const name of listDir(this.store.featuresDir)) {
      if (this.tidyTemp(this.store.featuresDir, name)) continue
      const id = name.endsWith('.json') ? name.slice(0, -5) : ''
      if (!ID_PATTERNS.feature.test(id)) continue
      present.add(id)
      this.report.features++
      const file = this.store.featureFile(id)
      const bytes = readBytes(file)
      const parsed = parseBytes<{feature_id?: string; seal?: string}>(bytes)
      if (!parsed.ok || !isObject(parsed.value)) {
        this.problem({record: id, file, field: parsed.ok ? '(record)' : '(file)', message: parsed.ok ? notAnObject(parsed.value) : parsed.message})
        continue
      }
      seals.set(id, parsed.value.seal ?? null)
      if (parsed.value.seal === undefined) this.problem({record: id, file, field: 'seal', message: 'the feature record is not sealed'})
      else this.seal(checkRecord(parsed.value, this.key), id, file, 'seal')
      if (parsed.value.feature_id !== id) this.problem({record: id, file, field: 'feature_id', message: `names ${String(parsed.value.feature_id)}, not the file's feature`})
      const expected = bound.get(id)
      if (expected && expected !== fileHash(parsed.bytes)) this.problem({record: id, file, field: '(file)', message: 'is not the feature record the run index bound (changed or re-sealed after the fact)'})
    }
    for (const [id, runs] of referenced) {
      if (!present.has(id)) this.problem({record: id, file: this.store.featureFile(id), field: '(file)', message: `feature record is missing (named by ${runs.join(', ')})`})
    }
    return seals
  }

  /**
   * The reply cache: each file's format, name and seal (a file that fails would be refused when a
   * run reuses it). Not part of the trail: a removed reply is only asked again.
   */
  replies(): void {
    const dir = path.join(this.store.root, 'replies')
    const cache = new ReplyCache(this.store.root)
    for (const name of listDir(dir)) {
      if (this.tidyTemp(dir, name)) continue
      if (!/^[0-9a-f]{64}\.json$/.test(name)) continue
      const file = path.join(dir, name)
      const parsed = parseBytes<Record<string, unknown>>(readBytes(file))
      const problem = parsed.ok ? replyFileProblem(parsed.value, `sha256:${name.slice(0, 64)}`) : parsed.message
      if (problem) this.problem({record: `reply ${name.slice(0, 12)}`, file, field: '(file)', message: problem})
      else if (parsed.ok) {
        for (const ref of textRefs(parsed.value['request'])) {
          const text = cache.textProblem(ref)
          if (text) this.problem({record: `reply ${name.slice(0, 12)}`, file, field: 'request.messages', message: `refers to a message text that ${text}`})
        }
      }
    }
    // A shared text no reply refers to any more is harmless; one whose bytes changed is damage wherever it is.
    const texts = path.join(dir, 'texts')
    for (const name of listDir(texts)) {
      if (this.tidyTemp(texts, name) || !/^[0-9a-f]{64}\.txt$/.test(name)) continue
      const text = cache.textProblem(`sha256:${name.slice(0, 64)}`)
      if (text) this.problem({record: `reply text ${name.slice(0, 12)}`, file: path.join(texts, name), field: '(file)', message: `a message text that ${text}`})
    }
  }

  /**
   * Ledger entries against the ledger log: each entry's seal is the last one the log recorded for its
   * key. With `runIds`, only the records that name those runs: the entries of its publications and the
   * keys its snapshots delivered (`named`), with their log lines.
   */
  ledger(named: ReadonlyMap<string, string> = new Map(), runIds?: ReadonlySet<string>): {head: string | null; seals: Array<[string, string | null]>} {
    const dir = path.join(this.store.root, 'ledger')
    const logFile = path.join(this.store.auditDir, 'ledger.jsonl')
    const text = readBytes(logFile)
    const chain = readChain(typeof text === 'string' ? '' : text.toString('utf8'), this.key, ledgerLineProblem)
    const entries: Array<{key: string; file: string; parsed: Parsed<unknown>}> = []
    for (const name of listDir(dir).sort()) {
      if (this.tidyTemp(dir, name) || !name.endsWith('.json')) continue
      const file = path.join(dir, name)
      entries.push({key: name.slice(0, -5), file, parsed: parseFile<unknown>(file)})
    }
    // The keys this check covers: every key, or those of the run's publications.
    const covered = new Set<string>(named.keys())
    if (runIds) for (const {key, parsed} of entries) if (parsed.ok && isObject(parsed.value) && typeof parsed.value.run_id === 'string' && runIds.has(parsed.value.run_id)) covered.add(key)
    const covers = (key: unknown): boolean => runIds === undefined || (typeof key === 'string' && covered.has(key))
    // A log line is checked with its key's, and so are its neighbours: a line removed or rewritten before it shows at its link, or is where its link goes.
    const lineNumbers = new Set<number>()
    chain.lines.forEach((line, i) => {
      if (covers(line.key)) for (const n of [-1, 0, 1]) lineNumbers.add(chain.at[i]! + n)
    })
    for (const p of chain.problems) {
      if (runIds !== undefined && !lineNumbers.has(p.line)) continue
      if (p.check) this.seal(p.check, 'ledger log', logFile, `line ${p.line}`)
      else this.problem({record: 'ledger log', file: logFile, field: `line ${p.line}`, message: p.message})
    }
    if (chain.torn) this.report.notes.push({record: 'ledger log', file: logFile, field: `line ${chain.lines.length + 1}`, message: 'torn last line (a crash while appending); earlier lines are intact'})
    const logged = new Map<string, string[]>()
    for (const line of chain.lines) {
      // A malformed line is reported above and names no key.
      if (ledgerLineProblem(line) !== null || !covers(line.key)) continue
      const key = line.key as string
      logged.set(key, [...(logged.get(key) ?? []), line.entry_seal as string])
    }
    const seals: Array<[string, string | null]> = []
    const present = new Set<string>()
    for (const {key, file, parsed} of entries) {
      if (!covers(key)) continue
      present.add(key)
      this.report.ledger++
      if (!parsed.ok || !isObject(parsed.value)) {
        this.problem({record: key, file, field: parsed.ok ? '(record)' : '(file)', message: !parsed.ok ? parsed.message : parsed.value === null ? 'empty ledger entry' : notAnObject(parsed.value)})
        continue
      }
      const entry = parsed.value as Partial<LedgerEntry>
      seals.push([key, typeof entry.seal === 'string' ? entry.seal : null])
      for (const f of schemaFindings('ledger', entry, key, file)) this.problem(f)
      if (entry.key !== key) this.problem({record: key, file, field: 'key', message: `names ${String(entry.key)}, not the file's key`})
      if (entry.seal === undefined) {
        this.problem({record: key, file, field: 'seal', message: 'the ledger entry is not sealed'})
        continue
      }
      this.seal(checkRecord(entry, this.key), key, file, 'seal')
      const history = logged.get(key) ?? []
      if (history.at(-1) === entry.seal) continue
      if (history.length >= 2 && history.at(-2) === entry.seal) {
        this.report.notes.push({record: key, file, field: '(file)', message: 'a ledger write was interrupted (the log is one write ahead of the entry); the next publish of this key completes it'})
      } else {
        this.problem({record: key, file, field: 'seal', message: typeof entry.seal === 'string' && history.includes(entry.seal) ? 'is an earlier state of the entry than the ledger log records (rolled back)' : 'is not an entry the ledger log recorded (changed, re-sealed or the log was cut short)'})
      }
    }
    // A publish step's snapshot names each key it delivered: its entry must exist, whatever the log says.
    const delivery = (key: string): string => `ledger entry is missing (snapshot ${named.get(key)} records a delivery under this key)`
    for (const key of named.keys()) {
      if (present.has(key) || logged.has(key)) continue
      this.problem({record: key, file: path.join(dir, `${key}.json`), field: '(file)', message: delivery(key)})
    }
    for (const [key, history] of logged) {
      if (present.has(key)) continue
      const file = path.join(dir, `${key}.json`)
      if (history.length >= 2) this.problem({record: key, file, field: '(file)', message: `ledger entry is missing (the ledger log recorded ${history.length} writes of it)`})
      else if (named.has(key)) this.problem({record: key, file, field: '(file)', message: delivery(key)})
      else this.report.notes.push({record: key, file, field: '(file)', message: 'a ledger write was interrupted before the entry was first written'})
    }
    return {head: chain.lines.at(-1)?.hash ?? null, seals}
  }
}

/** What a step kind knows that the audit needs: the ledger keys a snapshot records as delivered. */
export interface AuditKinds {
  deliveredKeys(snapshot: Snapshot): readonly string[]
}

/** The ledger keys snapshots recorded as delivered, with the snapshot that says so. */
function deliveredKeys(snapshots: readonly Snapshot[], kinds: AuditKinds): Array<[string, string]> {
  return snapshots.flatMap((s) => kinds.deliveredKeys(s).map((key): [string, string] => [key, `${s.run_id}#${s.step.seq}`]))
}

/**
 * The runs started by `runId` (pipeline and foreach steps), theirs in turn: records that name it as
 * their parent. Children are created after their parent, so only later run ids are read.
 */
function childRuns(store: Store, runId: string): string[] {
  const later = listDir(store.runsDir)
    .filter((name) => ID_PATTERNS.run.test(name) && compareIds(name, runId) > 0)
    .sort(compareIds)
  const parents = new Set([runId])
  const out: string[] = []
  for (const id of later) {
    const parsed = parseFile<unknown>(path.join(store.runsDir, id, 'run.json'))
    const parent = parsed.ok && isObject(parsed.value) && isObject(parsed.value.parent) ? parsed.value.parent.run_id : undefined
    if (typeof parent === 'string' && parents.has(parent)) {
      parents.add(id)
      out.push(id)
    }
  }
  return out
}

/** `kinds` tells which snapshots name deliveries (the step kinds know; the store does not). */
export async function auditStore(store: Store, runId?: string, kinds: AuditKinds = {deliveredKeys: () => []}): Promise<AuditReport> {
  const auditor = new Auditor(store)
  const indexFile = store.runIndexFile
  const indexText = readBytes(indexFile)
  const index = readChain(typeof indexText === 'string' ? '' : indexText.toString('utf8'), auditor.key, indexLineProblem)
  // A malformed line is reported with the index; one that still names a run is that run's line.
  const indexed = new Map<string, ChainedLine>()
  for (const line of index.lines) if (typeof line.run_id === 'string' && ID_PATTERNS.run.test(line.run_id)) indexed.set(line.run_id, line)
  const reportIndex = (lines?: ReadonlySet<number>): void => {
    for (const p of index.problems) {
      if (lines && !lines.has(p.line)) continue
      if (p.check) auditor.seal(p.check, 'run index', indexFile, `line ${p.line}`)
      else auditor.problem({record: 'run index', file: indexFile, field: `line ${p.line}`, message: p.message})
    }
  }

  if (runId) {
    // The run, its child runs, and every record that names them: their index lines, their ledger entries.
    const runs = [runId, ...childRuns(store, runId)]
    const lineNumbers = new Set<number>()
    index.lines.forEach((line, i) => {
      // With its neighbours: a line removed or rewritten before the run's shows at its link, or is where its link goes.
      if (typeof line.run_id === 'string' && runs.includes(line.run_id)) for (const n of [-1, 0, 1]) lineNumbers.add(index.at[i]! + n)
    })
    reportIndex(lineNumbers)
    const delivered = new Map<string, string>()
    for (const id of runs) {
      const line = indexed.get(id)
      if (!line) auditor.problem({record: id, file: indexFile, field: '(index)', message: 'the run is not in the run index'})
      for (const [key, where] of deliveredKeys(auditor.run(id, line), kinds)) if (!delivered.has(key)) delivered.set(key, where)
    }
    auditor.ledger(delivered, new Set(runs))
    return auditor.report
  }

  auditor.tidyStagedRuns(new Set(indexed.keys()))
  for (const dir of [store.root, store.auditDir, store.idsDir]) auditor.tidyDir(dir)
  reportIndex()
  if (index.torn) auditor.report.notes.push({record: 'run index', file: indexFile, field: `line ${index.lines.length + 1}`, message: 'torn last line (a crash while appending); earlier lines are intact'})

  const ids = await store.listRunIds()
  const present = new Set(ids)
  const featureRuns = new Map<string, string[]>()
  const featureBound = new Map<string, string>()
  const publishedKeys = new Map<string, string>()
  for (const id of [...ids].sort()) {
    const line = indexed.get(id)
    if (!line) auditor.problem({record: id, file: store.runDir(id), field: '(index)', message: 'the run is not in the run index (added after the fact, or the index was cut short)'})
    for (const [key, where] of deliveredKeys(auditor.run(id, line), kinds)) if (!publishedKeys.has(key)) publishedKeys.set(key, where)
  }
  for (const [id, line] of indexed) {
    // A feature id the index names must be one before it names a file (the line is reported above).
    if (indexLineProblem(line) === null) {
      const feature = line.feature_id as string
      featureRuns.set(feature, [...(featureRuns.get(feature) ?? []), id])
      if (typeof line.feature_hash === 'string' && !featureBound.has(feature)) featureBound.set(feature, line.feature_hash)
    }
    if (!present.has(id)) auditor.problem({record: id, file: path.join(store.runsDir, id), field: '(folder)', message: 'the run folder is missing (the run index names it: deleted after the fact)'})
  }
  auditor.unreferenced()
  const features = auditor.features(featureRuns, featureBound)
  const ledger = auditor.ledger(publishedKeys)
  auditor.replies()
  auditor.report.head = hashJson({
    index: index.lines.at(-1)?.hash ?? null,
    runs: [...auditor.runSeals].sort(([a], [b]) => (a < b ? -1 : 1)),
    ledger: ledger.head,
    ledger_entries: ledger.seals,
    features: [...features].sort(([a], [b]) => (a < b ? -1 : 1)),
  })
  return auditor.report
}
