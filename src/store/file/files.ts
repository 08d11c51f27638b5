/**
 * The file store's layout and the helpers every record module of it shares: where each record
 * lives, and how a write-once record is written and a record read back is checked.
 *
 *   runs/R-.../run.json          the run record (lowdb, atomic writes)
 *   runs/R-.../events.jsonl      the run's timeline, append-only
 *   runs/R-.../snapshots/NNNNNN.json   one write-once file per step
 *   runs/R-.../commits.jsonl     the commit log: what each step that writes records records (commit.ts)
 *   runs/R-.../state/            the working state of steps that pause
 *   specs/S-....json             immutable spec versions, content-hashed
 *   evidence/E-....json          evidence records
 *   features/F-....json          feature registrations
 *   audit/runs.jsonl             the run index: one chained line per run created
 *   audit/ledger.jsonl           the ledger log: one chained line per ledger write
 *   ids/                         allocation hints
 */
import {closeSync, openSync, readdirSync, readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import type {RunRecord} from '../../types/run.js'
import {createFileExclusive, syncFd, writeFileAtomic, writingTo} from '../../util/fs.js'
import {readFile} from '../../util/fs-async.js'
import {allocateId, assertId, idKey, noteIdTaken} from './ids.js'
import {readText} from './trail.js'
import {recordText} from '../trail/records.js'

export {assertValid, wellFormed} from '../trail/checks.js'

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
  /** The caller moved the series' counter past the candidate already (once for a step's records, commit.ts). */
  counted?: boolean
}

/** Whether a write reaches the disk before it returns (see util/fs.ts); false once a commit log line holds the record. */
export interface WriteOptions {
  sync?: boolean
}

/** What the store last wrote of a run it holds (see Runs.owned). */
export interface OwnedRun {
  /** The run record as last written (sealed, with its head). */
  record?: RunRecord
  /** The timeline's line count and last line's hash. */
  timeline?: {count: number; hash: string}
  /** The last snapshot's seq and record hash. */
  head?: {seq: number; snapshot_hash: string | null}
}

/**
 * path.join for a folder the store made normal (absolute, from path.resolve) and names that are
 * single segments it checked (ids, seq names, its own file names): the same path without
 * path.join's normalising pass, which the per-step and per-run writes paid for many times over.
 */
export function within(dir: string, ...names: string[]): string {
  return names.length === 1 ? `${dir}${path.sep}${names[0]}` : [dir, ...names].join(path.sep)
}

export function seqName(seq: number): string {
  return `${String(seq).padStart(6, '0')}.json`
}

/**
 * Where the file store keeps each record, and what one store object shares between its record
 * modules: the hashes of the files it wrote or read, and what it wrote of the runs it holds.
 */
export class FileLayout {
  readonly root: string
  readonly runsDir: string
  readonly specsDir: string
  readonly evidenceDir: string
  readonly featuresDir: string
  readonly idsDir: string
  readonly auditDir: string
  /** sha256 of spec and evidence files this process wrote or read, for the snapshots that bind them. */
  readonly fileHashes = new Map<string, string>()

  /**
   * The runs whose lock this store holds (acquireRun), each with what it last wrote of the run's
   * record, timeline tail and last snapshot. Only the lock holder changes a run, so while the lock
   * is held these are what is on disk and updateRun need not read them back; each is learnt from
   * disk on first use after the lock is taken, and forgotten on any failed write and on release.
   */
  readonly owned = new Map<string, OwnedRun>()

  constructor(root: string) {
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

  runDir(runId: string): string {
    assertId('run', runId)
    return within(this.runsDir, runId)
  }

  snapshotFile(runId: string, seq: number): string {
    return within(this.runDir(runId), 'snapshots', seqName(seq))
  }

  specFile(version: string): string {
    assertId('spec', version)
    return within(this.specsDir, `${version}.json`)
  }

  evidenceFile(id: string): string {
    assertId('evidence', id)
    return within(this.evidenceDir, `${id}.json`)
  }

  featureFile(id: string): string {
    assertId('feature', id)
    return path.join(this.featuresDir, `${id}.json`)
  }

  commitLogFile(runId: string): string {
    return within(this.runDir(runId), 'commits.jsonl')
  }

  /** The journal file of an interrupted commit, as pipe wrote it before the commit log. */
  journalFile(runId: string): string {
    return within(this.runDir(runId), 'journal.json')
  }

  stepStateFile(runId: string, step: string, seq: number): string {
    if (!/^[a-z][a-z0-9_]*$/.test(step)) throw new PipeError('E_INTERNAL', `not a step id: ${JSON.stringify(step)}`)
    return path.join(this.runDir(runId), 'state', `${String(seq).padStart(6, '0')}-${step}.json`)
  }
}

/**
 * Writes a write-once record file: true when it is written now or already holds exactly `text`
 * (finishing a commit after a crash). With `repair`, a file there that is empty or not JSON (its
 * data lost to a power failure after the link) is rewritten; any other content is someone else's.
 */
export async function writeOnce(file: string, text: string, options: {sync: boolean; repair: boolean}): Promise<boolean> {
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
 * Creates a write-once record under the next free id of a series, or finishes one a crash
 * interrupted. `key`: the key new ids are numbered in (allocationDay for versions), asked only when
 * one is allocated; a candidate keeps the key it was numbered in.
 */
export async function createSealed(
  idsDir: string,
  prefix: 'S' | 'E',
  key: () => Promise<string>,
  file: (id: string) => string,
  build: (id: string) => string,
  intent: WriteIntent | undefined,
  options: WriteOptions,
): Promise<string> {
  const sync = options.sync ?? true
  if (intent?.candidate) {
    const id = intent.candidate
    const content = build(id)
    // The counter moves first, so that it never names less than what is written (newestSpecVersions).
    if (!intent.counted) await noteIdTaken(idsDir, prefix, idKey(id), id)
    if (await writeOnce(file(id), content, {sync, repair: intent.repair === true})) return id
  }
  return allocateId(idsDir, prefix, await key(), async (id) => {
    await intent?.onCandidate(id)
    return createFileExclusive(file(id), build(id), {sync})
  })
}

/** Writes a new file and syncs it (inside a staging folder, where nobody else looks); synchronous calls, see util/fs.ts. */
export function writeSynced(file: string, text: string): void {
  const fd = openSync(file, 'wx', 0o644)
  try {
    writingTo(file, () => {
      writeFileSync(fd, text)
      syncFd(fd)
    })
  } finally {
    closeSync(fd)
  }
}

/** The snapshot files of a run's folder in seq order; one synchronous listing (see util/fs.ts). */
export function snapshotNames(dir: string): string[] {
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return []
  }
  return names.filter((n) => /^\d{6,}\.json$/.test(n)).sort()
}

/** A record and its file content under an id, built once for the id last asked for (sealing hashes the whole record). */
export function builder<T>(build: (id: string) => T): (id: string) => {record: T; text: string} {
  let last: {id: string; record: T; text: string} | undefined
  return (id) => {
    if (last?.id !== id) {
      const record = build(id)
      last = {id, record, text: recordText(record)}
    }
    return last
  }
}

export async function readJson<T>(file: string, what: string): Promise<T> {
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
    throw new PipeError('E_INTEGRITY', `${what} is not valid JSON (${file}): ${(error as Error).message}`, {
      hint: 'The file was changed or damaged outside pipe; restore it from a backup.',
    })
  }
}

/** A JSON file pipe wrote atomically, or undefined when there is none: one that does not parse was changed outside pipe. */
export async function readOwnJson(file: string, what: string): Promise<unknown> {
  const text = await readText(file)
  if (text === null) return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    throw new PipeError('E_INTEGRITY', `${what} is not valid JSON`, {hint: `It was written atomically, so it was changed outside pipe: ${file}`})
  }
}
