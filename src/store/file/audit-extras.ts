/**
 * What pipe audit verify checks that only the file store has, beside the trail's walk
 * (../trail/audit.ts): leftovers of crashes (temporary files, half-made run folders), which it tidies
 * and reports as cleaned, never as damage; the working state of paused steps; a run's commit log
 * (commit.ts); and the reply cache.
 */
import {renameSync, rmSync, statSync, unlinkSync} from 'node:fs'
import path from 'node:path'
import {processAlive} from '../../util/lock.js'
import type {Findings} from '../trail/audit.js'
import {checkRecord, sealMessage} from '../trail/integrity.js'
import {ReplyCache, replyFileProblem, textRefs} from '../replies.js'
import {listDir, parseBytes, parseFile, readBytes, readTail} from './audit-read.js'
import type {FileLayout} from './files.js'
import {ID_PATTERNS} from './ids.js'
import {stagedRun, tempWriter} from './trail.js'

/** Removes a temp file whose writer is gone; one being written right now is left alone. Whether `name` is a temp file. */
export function tidyTemp(a: Findings, dir: string, name: string): boolean {
  const pid = tempWriter(name)
  if (pid === null) return false
  if (pid !== process.pid && !processAlive(pid)) {
    const file = path.join(dir, name)
    try {
      unlinkSync(file)
      a.report.cleaned.push({record: name, file, field: '(file)', message: `removed a temporary file left by process ${pid}, which is gone`})
    } catch {
      // Gone already.
    }
  }
  return true
}

export function tidyDir(a: Findings, dir: string): void {
  for (const name of listDir(dir)) tidyTemp(a, dir, name)
}

/**
 * A run folder a crash left half-made: before it was indexed it is removed; after, it is complete
 * and is renamed into place. A folder whose creator is alive is left alone.
 */
export function tidyStagedRuns(a: Findings, runsDir: string, indexed: () => ReadonlySet<string>): void {
  for (const name of listDir(runsDir)) {
    if (tidyTemp(a, runsDir, name)) continue
    const staged = stagedRun(name)
    if (!staged || processAlive(staged.pid)) continue
    const from = path.join(runsDir, name)
    const to = path.join(runsDir, staged.runId)
    let exists = true
    try {
      statSync(to)
    } catch {
      exists = false
    }
    try {
      if (indexed().has(staged.runId) && !exists) {
        renameSync(from, to)
        a.report.cleaned.push({
          record: staged.runId,
          file: to,
          field: '(file)',
          message: `finished creating the run (process ${staged.pid} was killed after indexing it)`,
        })
      } else {
        rmSync(from, {recursive: true})
        a.report.cleaned.push({
          record: staged.runId,
          file: from,
          field: '(file)',
          message: `removed a run creation that process ${staged.pid} abandoned (it never became a run)`,
        })
      }
    } catch {
      // Another audit verify tidied it first.
    }
  }
}

/**
 * The working state of the run's paused or interrupted steps (an agent's conversation): each file
 * sealed, since a resumed step acts on it. It is not chained to the trail (it changes as the step
 * goes), so a file re-sealed with pipe's own functions passes unless keyed mode is on.
 */
export function stepStates(a: Findings, runId: string, stateDir: string): void {
  for (const name of listDir(stateDir)) {
    if (tidyTemp(a, stateDir, name) || !/^\d{6}-[a-z][a-z0-9_]*\.json$/.test(name)) continue
    const file = path.join(stateDir, name)
    const parsed = parseFile<unknown>(file)
    const record = `${runId} state ${name.slice(0, -5)}`
    if (!parsed.ok) {
      a.add({record, file, field: '(file)', message: parsed.message})
      continue
    }
    const sealed = parsed.value !== null && typeof parsed.value === 'object' && 'seal' in parsed.value ? checkRecord(parsed.value, a.key) : null
    if (sealed === 'ok') continue
    if (sealed === 'no-key') {
      a.report.unverifiable++
      continue
    }
    a.add({record, file, field: 'seal', message: sealed === null ? 'the step state is not sealed' : sealMessage(sealed)})
  }
}

/** A log's lines that end with a newline (what follows the last one is a torn write). */
function completeLines(bytes: Buffer): string[] {
  const raw = bytes.toString('utf8').split('\n')
  raw.pop()
  return raw
}

/** The last of completeLines(bytes), decoded alone. */
function lastLine(bytes: Buffer): string[] {
  const end = bytes.lastIndexOf(0x0a)
  if (end < 0) return []
  // (A negative offset would count from the end.)
  const start = end === 0 ? 0 : bytes.lastIndexOf(0x0a, end - 1) + 1
  return [bytes.toString('utf8', start, end)]
}

/** How appendCommit's JSON.stringify of a journal begins: its version, run and seq, in that order. */
const JOURNAL_HEAD = /^\{"version":1,"run_id":"(R-[0-9-]+)","seq":(\d{1,9}),"/

/**
 * Whether an intact run's last commit log line is a commit that finished (its snapshot is there), so
 * that it has nothing to note: read from the start of the line, without parsing the rest (a line
 * holds a whole step's records, ~14 KB a default run). Whether the rest is JSON changes nothing: an
 * intact run's last line that is not is ignored all the same.
 */
function committedLast(bytes: Buffer, runId: string, snapshotNames: ReadonlySet<string>, store: FileLayout): boolean {
  const end = bytes.lastIndexOf(0x0a)
  if (end < 0) return false
  const start = end === 0 ? 0 : bytes.lastIndexOf(0x0a, end - 1) + 1
  const head = JOURNAL_HEAD.exec(bytes.toString('latin1', start, Math.min(end, start + 96)))
  if (!head || head[1] !== runId) return false
  return snapshotNames.has(path.basename(store.snapshotFile(runId, Number(head[2]))))
}

/**
 * The run's commit log (see commit.ts): its last line without a snapshot is a commit a crash
 * interrupted. When the run has damage, each record or snapshot the log can rebuild byte for byte
 * (missing, empty or not JSON: what a power failure leaves of an unsynced write) is named, since
 * pipe resume rewrites it. Only the last line is read when the run is intact.
 */
/** `settled`: the run's status and last snapshot when it is not running, so that no commit can be in flight past it. */
export function commitLog(
  a: Findings,
  store: FileLayout,
  runId: string,
  damaged: boolean,
  snapshotNames: ReadonlySet<string>,
  settled: {seq: number; status: string} | null,
): void {
  const file = store.commitLogFile(runId)
  // Intact, only the last line is read: a commit log holds every step's records (~40 KB a default run).
  const text = damaged ? readBytes(file) : readTail(file, 1 << 14)
  if (typeof text === 'string') {
    if (text !== 'file is missing')
      a.report.notes.push({
        record: runId,
        file,
        field: '(file)',
        message: `the commit log ${text.replace(/^cannot read/, 'cannot be read')}: pipe resume cannot finish or repair a commit from it`,
      })
    return
  }
  if (!damaged && committedLast(text, runId, snapshotNames, store)) return
  const raw = damaged ? completeLines(text) : lastLine(text)
  const bySeq = new Map<number, {seq: number; recorded_at?: string; spec?: {candidate?: string} | null; evidence?: Array<{candidate?: string}>}>()
  for (const [i, line] of raw.entries()) {
    try {
      const entry = JSON.parse(line) as {run_id?: string; seq?: unknown}
      if (entry.run_id === runId && typeof entry.seq === 'number') bySeq.set(entry.seq, entry as {seq: number})
    } catch {
      // The first line of a tail read may be cut; read whole, a line that is not JSON was changed (the log is not the trail: nothing is bound to it).
      if (damaged)
        a.report.notes.push({
          record: runId,
          file,
          field: `line ${i + 1}`,
          message: `line ${i + 1} of the commit log is not JSON (changed outside pipe?): it is ignored for a run that has ended, and a run still going is not resumed from this log`,
        })
    }
  }
  const lines = [...bySeq.values()].sort((a, b) => a.seq - b.seq)
  const state = (f: string): 'ok' | 'missing' | 'damaged' => {
    const parsed = parseFile<unknown>(f)
    return parsed.ok ? 'ok' : parsed.message === 'file is missing' ? 'missing' : 'damaged'
  }
  const last = lines.at(-1)
  for (const line of lines) {
    const snapshotFile = store.snapshotFile(runId, line.seq)
    if (settled && line.seq > settled.seq && !snapshotNames.has(path.basename(snapshotFile))) {
      a.report.notes.push({
        record: `${runId}#${line.seq}`,
        file,
        field: `seq ${line.seq}`,
        message: `names a step past the run's last snapshot #${settled.seq}, yet the run is ${settled.status}: no step wrote it (changed by hand?), and pipe resume ignores it`,
      })
      continue
    }
    if (line === last && !snapshotNames.has(path.basename(snapshotFile))) {
      a.report.notes.push({record: `${runId}#${line.seq}`, file, field: `seq ${line.seq}`, message: 'a step commit was interrupted; pipe resume finishes it'})
      continue
    }
    if (!damaged) continue
    const snapshot = state(snapshotFile)
    if (snapshot !== 'ok') {
      a.report.notes.push({
        record: `${runId}#${line.seq}`,
        file,
        field: `seq ${line.seq}`,
        message: `the snapshot is ${snapshot}, and the commit log holds it (lost in a power failure?): pipe resume ${runId} rewrites it`,
      })
      continue
    }
    // The log is not bound to anything: a line changed by hand must not stop the audit.
    const items: unknown[] = [...(Array.isArray(line.evidence) ? line.evidence : []), line.spec]
    const ids = items
      .map((item) => (typeof item === 'object' && item !== null ? (item as {candidate?: unknown}).candidate : undefined))
      .filter((id): id is string => typeof id === 'string')
    for (const id of ids) {
      const recordFile = ID_PATTERNS.spec.test(id) ? store.specFile(id) : ID_PATTERNS.evidence.test(id) ? store.evidenceFile(id) : null
      if (!recordFile) continue
      const found = state(recordFile)
      if (found !== 'ok')
        a.report.notes.push({
          record: id,
          file: recordFile,
          field: '(file)',
          message: `is ${found}, and the commit log of ${runId} holds it (lost in a power failure?): pipe resume ${runId} rewrites it`,
        })
    }
  }
}

/**
 * The reply cache: each file's format, name and seal (a file that fails would be refused when a
 * run reuses it). Not part of the trail: a removed reply is only asked again.
 */
export function auditReplies(a: Findings, root: string): void {
  const dir = path.join(root, 'replies')
  const cache = new ReplyCache(root)
  for (const name of listDir(dir)) {
    if (tidyTemp(a, dir, name)) continue
    if (!/^[0-9a-f]{64}\.json$/.test(name)) continue
    const file = path.join(dir, name)
    const parsed = parseBytes<Record<string, unknown>>(readBytes(file))
    const problem = parsed.ok ? replyFileProblem(parsed.value, `sha256:${name.slice(0, 64)}`) : parsed.message
    if (problem) a.add({record: `reply ${name.slice(0, 12)}`, file, field: '(file)', message: problem})
    else if (parsed.ok) {
      for (const ref of textRefs(parsed.value['request'])) {
        const text = cache.textProblem(ref)
        if (text) a.add({record: `reply ${name.slice(0, 12)}`, file, field: 'request.messages', message: `refers to a message text that ${text}`})
      }
    }
  }
  // A shared text no reply refers to any more is harmless; one whose bytes changed is damage wherever it is.
  const texts = path.join(dir, 'texts')
  for (const name of listDir(texts)) {
    if (tidyTemp(a, texts, name) || !/^[0-9a-f]{64}\.txt$/.test(name)) continue
    const text = cache.textProblem(`sha256:${name.slice(0, 64)}`)
    if (text) a.add({record: `reply text ${name.slice(0, 12)}`, file: path.join(texts, name), field: '(file)', message: `a message text that ${text}`})
  }
}
