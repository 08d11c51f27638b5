/**
 * The file store's step commit: recording a finished step so that a crash at any moment loses
 * nothing and writes nothing twice, with one sync per step.
 *
 * A step that writes more than its snapshot (a spec version, evidence) first appends a line to the
 * run's commit log (runs/R/commits.jsonl, one fdatasync): everything it is about to record, the ids
 * it will take and the time the records are stamped with, so each record can be rebuilt from the
 * line byte for byte. That sync is the step's only one: the records and then the snapshot are
 * written atomically (temporary file, then link) but not synced. The snapshot is the commit point.
 * Should an id be taken by another process meanwhile, the next one is logged (a new line for the
 * same seq; the last line of a seq wins) before it is tried.
 *
 * The log lines are kept, not dropped after the snapshot: until the operating system has written
 * them back, a record is safe only in its line. On resume, each line of the log is checked:
 * - its snapshot is missing: the commit was interrupted (a kill) or lost (a power failure), and is
 *   finished from the line: an id whose file holds exactly the record is reused, so no version is
 *   lost or written twice, and the step itself is not run again;
 * - its snapshot is there, but a record it names is missing, empty or not JSON (a power failure
 *   lost data the line still holds): the record is rebuilt from the line and written again if its
 *   bytes are the ones the snapshot bound. A record that is valid JSON but different is never
 *   overwritten: that is tampering, which pipe audit verify reports.
 * A step without records writes its snapshot synced, and no line.
 *
 * A commit made again after it completed (a redrive that never learnt it had) finds its own line
 * and records the same ids, so nothing is written twice.
 *
 * Stores written by an older pipe may hold runs/R/journal.json (the journal of an interrupted
 * commit, before the log existed); it is moved into the log and finished the same way.
 */
import {statSync} from 'node:fs'
import {PipeError} from '../../errors.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {appendCommit, deleteJournal, readCommitLog, readJournal} from './commit-log.js'
import {evidenceText, writeEvidence} from './evidence.js'
import {type FileLayout, type WriteIntent} from './files.js'
import {allocationDay, compareIds, dayKey, ID_PATTERNS, idKey, noteIdTaken, peekIds} from './ids.js'
import type {Runs} from './runs.js'
import {writeSnapshot} from './snapshots.js'
import {specText, writeSpec} from './specs.js'
import {readText} from './trail.js'
import {writeFileAtomic} from '../../util/fs.js'
import {fileHash} from '../trail/integrity.js'
import {commitHash, committedSnapshot} from '../trail/snapshots.js'
import type {CommitHook, Committed, StepCommit} from '../types.js'

/** A commit log line: the step's commit with the ids its records take. */
export interface Journal extends StepCommit {
  version: 1
  spec: (NonNullable<StepCommit['spec']> & {candidate?: string}) | null
  evidence: Array<StepCommit['evidence'][number] & {candidate?: string}>
}

/**
 * Records a step. `logged`: the journal is already the last line of its seq in the commit log
 * (finishing a commit on resume), so it is not appended again.
 */
export async function commitJournal(layout: FileLayout, journal: Journal, hook?: CommitHook, logged = false): Promise<Committed> {
  const {run_id: runId, step} = journal
  const at = new Date(journal.recorded_at)
  const journaled = journal.spec !== null || journal.evidence.length > 0
  if (journaled && !logged && statSync(layout.snapshotFile(runId, journal.seq), {throwIfNoEntry: false})) logged = await redriven(layout, journal)
  const intent = (item: {candidate?: string}): WriteIntent => ({
    ...(item.candidate ? {candidate: item.candidate, counted: true} : {}),
    // A record named by a logged line and found empty or torn was lost by a power failure: rewrite it.
    repair: logged,
    onCandidate: async (id) => {
      item.candidate = id
      await appendCommit(layout, runId, journal)
      if (hook) await hook(`id-reserved:${step}`)
    },
  })
  if (journaled && !logged) {
    // Name every id before taking any, so one log line covers them all in the usual case.
    const needEvidence = journal.evidence.filter((item) => !item.candidate)
    if (needEvidence.length > 0) (await peekIds(layout.idsDir, 'E', '', needEvidence.length)).forEach((id, i) => (needEvidence[i]!.candidate = id))
    if (journal.spec && !journal.spec.candidate)
      journal.spec.candidate = (await peekIds(layout.idsDir, 'S', await allocationDay(layout.idsDir, 'S', at), 1))[0]!
    await appendCommit(layout, runId, journal)
    if (hook) await hook(`journal-written:${step}`)
  }
  // Each counter moves once a step, past every candidate, before any record is written (so it never
  // names less than what exists), not once per record: a default run has ~20 evidence records.
  await noteCandidatesTaken(layout, journal)
  // With a log line, the records and the snapshot need no sync of their own: the line rebuilds them.
  const sync = !journaled
  const links: Snapshot['evidence_links'] = []
  for (const item of journal.evidence) {
    const evidence = await writeEvidence(layout, item.draft, at, intent(item), {sync})
    links.push({type: item.link, evidence_id: evidence.evidence_id})
    if (hook) await hook(`evidence-written:${step}`)
  }
  let spec: CanonicalSpec | null = null
  if (journal.spec) {
    spec = await writeSpec(layout, journal.spec.draft, at, intent(journal.spec), {sync})
    if (hook) await hook(`spec-written:${step}`)
  }
  const snapshot = committedSnapshot(journal.snapshot, spec, links)
  if (hook) await hook(`before-snapshot:${step}`)
  const stored = await writeSnapshot(layout, snapshot, {sync, repair: logged})
  if (hook) await hook(`snapshot-written:${step}`)
  return {snapshot: stored, spec}
}

/** Moves the evidence counter to the highest evidence candidate of a journal, and the spec counter to its spec candidate. */
async function noteCandidatesTaken(layout: FileLayout, journal: Journal): Promise<void> {
  const evidence = journal.evidence.map((item) => item.candidate).filter((id): id is string => id !== undefined)
  const highest = evidence.sort(compareIds).at(-1)
  if (highest) await noteIdTaken(layout.idsDir, 'E', '', highest)
  const spec = journal.spec?.candidate
  if (spec) await noteIdTaken(layout.idsDir, 'S', idKey(spec), spec)
}

/**
 * A commit of a step whose snapshot is there already: when the last log line of its seq records the
 * same, the line's ids are taken over and the commit finishes as a logged one (writing nothing new);
 * otherwise it goes on as a new commit, and its snapshot is refused (E_CONFLICT).
 */
async function redriven(layout: FileLayout, journal: Journal): Promise<boolean> {
  const line = (await loggedCommits(layout, journal.run_id)).find((j) => j.seq === journal.seq)
  if (!line || commitHash(line) !== commitHash(journal)) return false
  if (journal.spec && line.spec?.candidate) journal.spec.candidate = line.spec.candidate
  journal.evidence.forEach((item, i) => {
    const candidate = line.evidence[i]?.candidate
    if (candidate) item.candidate = candidate
  })
  return true
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** An id a line names is one of its own series (never a path: `../x` must not reach a file name). */
const candidateOk = (candidate: unknown, pattern: RegExp): boolean => candidate === undefined || (typeof candidate === 'string' && pattern.test(candidate))

/**
 * Whether a log line is a journal pipe could have written for this run: the log is not sealed, so a
 * line changed by hand is left out rather than followed (audit verify still sees it).
 */
function isJournal(value: unknown, runId: string): value is Journal {
  if (!isObject(value)) return false
  const j = value as Partial<Journal>
  if (
    j.version !== 1 ||
    j.run_id !== runId ||
    !Number.isSafeInteger(j.seq) ||
    j.seq! < 1 ||
    typeof j.recorded_at !== 'string' ||
    Number.isNaN(Date.parse(j.recorded_at))
  )
    return false
  if (!isObject(j.snapshot) || j.snapshot.run_id !== runId || !isObject(j.snapshot.step) || j.snapshot.step.seq !== j.seq) return false
  // A version is numbered in the day its records are stamped with, or in a later one when the clock
  // had gone back (allocationDay), never an earlier one. Whether that later day was counted is not
  // asked: counters are hints a power failure may lose, and a line it leaves must still be finished.
  const stamped = dayKey(new Date(j.recorded_at))
  const dayOk = (candidate: unknown): boolean => typeof candidate !== 'string' || idKey(candidate) >= stamped
  if (j.spec !== null && !(isObject(j.spec) && isObject(j.spec.draft) && candidateOk(j.spec.candidate, ID_PATTERNS.spec) && dayOk(j.spec.candidate)))
    return false
  return (
    Array.isArray(j.evidence) &&
    j.evidence.every((item) => isObject(item) && isObject(item.draft) && typeof item.link === 'string' && candidateOk(item.candidate, ID_PATTERNS.evidence))
  )
}

/** The last line of each seq in the run's commit log, in seq order (with an older pipe's journal.json moved in). */
async function loggedCommits(layout: FileLayout, runId: string, lenient = false): Promise<Journal[]> {
  const legacy = await readJournal(layout, runId)
  if (legacy !== null) {
    // Into the log first (synced), so that dropping the file loses nothing.
    if (isJournal(legacy, runId)) await appendCommit(layout, runId, legacy)
    await deleteJournal(layout, runId)
  }
  const bySeq = new Map<number, Journal>()
  for (const line of await readCommitLog(layout, runId, lenient)) if (isJournal(line, runId)) bySeq.set(line.seq, line)
  return [...bySeq.values()].sort((a, b) => a.seq - b.seq)
}

/** A record file's state; something that is not a regular file (a FIFO put there) is damaged, and is never waited on. */
async function readParsed(file: string): Promise<{state: 'missing' | 'damaged'} | {state: 'ok'; value: unknown}> {
  let text: string | null
  try {
    text = await readText(file)
  } catch {
    return {state: 'damaged'}
  }
  if (text === null) return {state: 'missing'}
  try {
    return {state: 'ok', value: JSON.parse(text) as unknown}
  } catch {
    return {state: 'damaged'}
  }
}

/**
 * Rewrites the records of a committed step that a power failure lost (missing, empty or torn),
 * each only if the rebuilt bytes are the ones its snapshot bound, so what is written is exactly
 * what was there (synced: a repair is rare). Returns how many were rewritten.
 */
async function repairRecords(layout: FileLayout, journal: Journal, snapshot: Snapshot): Promise<number> {
  const at = new Date(journal.recorded_at)
  const binds = snapshot.meta?.binds ?? {}
  let repaired = 0
  const items: Array<{id: string | undefined; rebuild: (id: string) => string; file: (id: string) => string}> = [
    ...journal.evidence.map((item) => ({
      id: item.candidate,
      rebuild: (id: string) => evidenceText(item.draft, at, id),
      file: (id: string) => layout.evidenceFile(id),
    })),
    ...(journal.spec
      ? [{id: journal.spec.candidate, rebuild: (id: string) => specText(journal.spec!.draft, id), file: (id: string) => layout.specFile(id)}]
      : []),
  ]
  for (const item of items) {
    if (!item.id || binds[item.id] === undefined) continue
    if ((await readParsed(item.file(item.id))).state === 'ok') continue
    const text = item.rebuild(item.id)
    if (fileHash(text) !== binds[item.id]) continue
    await writeFileAtomic(item.file(item.id), text)
    repaired++
  }
  return repaired
}

/**
 * Finishes the commit a crash interrupted, if any, and rewrites records a power failure lost (see
 * above). The caller holds the run. Returns whether anything was finished or rewritten.
 *
 * `lastSeq`: the last snapshot of a run that has ended; no commit of it can be past that, and its
 * log is read leniently (a line that is not JSON is left out, since only what a snapshot binds is
 * rewritten). A run still walked refuses such a log instead.
 */
export async function recoverCommit(layout: FileLayout, runId: string, hook?: CommitHook, options: {lastSeq?: number} = {}): Promise<boolean> {
  let changed = false
  for (const journal of await loggedCommits(layout, runId, options.lastSeq !== undefined)) {
    // A run that has ended has no commit past its last snapshot: such a line was not written by its steps.
    if (options.lastSeq !== undefined && journal.seq > options.lastSeq) continue
    const found = await readParsed(layout.snapshotFile(runId, journal.seq))
    if (found.state === 'ok') {
      if ((await repairRecords(layout, journal, found.value as Snapshot)) > 0) changed = true
      continue
    }
    // Steps commit in seq order, so only the step after a snapshot that is there can be unfinished:
    // a line further on (changed by hand) would leave a gap.
    if (journal.seq > 1 && (await readParsed(layout.snapshotFile(runId, journal.seq - 1))).state === 'missing') continue
    await commitJournal(layout, journal, hook, true)
    changed = true
  }
  return changed
}

/**
 * For a run that has ended (and so is never walked again): under the run's lock, the same repair
 * as a resume's. A run another process holds is left to it.
 */
export async function repairEndedRun(layout: FileLayout, runs: Runs, runId: string): Promise<boolean> {
  let release: (() => Promise<void>) | undefined
  try {
    release = await runs.acquire(runId)
  } catch {
    return false
  }
  try {
    const run = await runs.read(runId)
    return await recoverCommit(layout, runId, undefined, {lastSeq: run.head?.seq ?? 0})
  } catch (error) {
    // A log changed by hand (a line that is not JSON) leaves nothing to rewrite from: the run has
    // ended either way, and that is what the caller says; audit verify reports damaged records.
    if (error instanceof PipeError && error.code === 'E_INTEGRITY') return false
    throw error
  } finally {
    await release()
  }
}
