/**
 * pipe audit verify of one run's own records: the run record against the run index, the timeline
 * against the record's head, the snapshot chain and the files it binds, the step states and the
 * commit log (see commit.ts).
 */
import path from 'node:path'
import type {RunRecord} from '../../types/run.js'
import type {Snapshot} from '../../types/snapshot.js'
import {timeBackwards} from '../trail/audit-notes.js'
import {listDir, parseFile, readBytes, readTail, schemaFindings} from './audit-read.js'
import type {Auditor} from './auditor.js'
import {ID_PATTERNS} from './ids.js'
import {checkRecord, creationFindings, runCreationHash, runStateHash, sealMessage, verifySnapshot} from '../trail/integrity.js'
import {eventLineProblem, isObject, notAnObject} from '../trail/shapes.js'
import {readChain, type ChainedLine} from './trail.js'

/** Statuses in which no step can be in flight: the run record was sealed after its last snapshot. */
const SETTLED = new Set(['succeeded', 'failed', 'blocked', 'cancelled', 'awaiting_input'])

export function auditRun(a: Auditor, runId: string, indexLine: ChainedLine | undefined): Snapshot[] {
  a.report.runs++
  const dir = a.store.runDir(runId)
  const names = listDir(dir)
  for (const name of names) a.tidyTemp(dir, name)
  const runFile = path.join(dir, 'run.json')
  const parsed = parseFile<RunRecord>(runFile)
  let run: RunRecord | null = null
  if (!parsed.ok || !isObject(parsed.value)) {
    a.problem({record: runId, file: runFile, field: parsed.ok ? '(record)' : '(file)', message: parsed.ok ? notAnObject(parsed.value) : parsed.message})
    a.runSeals.set(runId, null)
  } else {
    run = parsed.value
    a.runSeals.set(runId, typeof run.seal === 'string' ? run.seal : null)
    for (const f of schemaFindings('run', run, runId, runFile)) a.problem(f)
    if (run.run_id !== runId) a.problem({record: runId, file: runFile, field: 'run_id', message: `names ${String(run.run_id)}, not the folder's run`})
    if (run.seal === undefined) a.problem({record: runId, file: runFile, field: 'seal', message: 'the run record is not sealed'})
    else a.seal(checkRecord(run, a.key), runId, runFile, 'seal')
    if (indexLine && indexLine.created_hash !== runCreationHash(run as unknown as Record<string, unknown>)) {
      a.problem({
        record: runId,
        file: runFile,
        field: '(created)',
        message: 'what the run was created with (pipeline, input, feature, policy, times) differs from the run index',
      })
    }
    if (indexLine)
      for (const f of creationFindings(indexLine, run as unknown as Record<string, unknown>))
        a.report[f.note ? 'notes' : 'problems'].push({record: runId, file: runFile, ...f.finding})
  }
  // Only a head of the right shape anchors the checks below (a malformed one is reported above).
  const head = isObject(run?.head) && Number.isInteger(run.head.events) && Number.isInteger(run.head.seq) ? run.head : undefined

  // The timeline.
  const eventsFile = path.join(dir, 'events.jsonl')
  const text = readBytes(eventsFile)
  const chain = readChain(typeof text === 'string' ? '' : text.toString('utf8'), a.key, eventLineProblem)
  a.report.events += chain.lines.length
  for (const p of chain.problems) {
    if (p.check) a.seal(p.check, runId, eventsFile, `line ${p.line}`)
    else a.problem({record: runId, file: eventsFile, field: `line ${p.line}`, message: p.message})
  }
  const stamped = chain.lines.map((l, i) => ({record: `${runId} ${String(l.event)} (line ${chain.at[i]})`, field: `line ${chain.at[i]}`, at: l.at}))
  a.report.notes.push(...timeBackwards(stamped, eventsFile, `the timeline of ${runId}`))
  if (run) a.runCreated.set(runId, run.created_at)
  if (chain.torn)
    a.report.notes.push({
      record: runId,
      file: eventsFile,
      field: `line ${chain.lines.length + 1}`,
      message: 'torn last line (a crash while appending); earlier lines are intact',
    })
  if (head && run) {
    const anchored = chain.lines[head.events - 1]
    if (chain.lines.length < head.events) {
      a.problem({
        record: runId,
        file: eventsFile,
        field: `line ${chain.lines.length + 1}`,
        message: `the timeline has ${chain.lines.length} line(s), the run record's head names ${head.events} (lines were removed)`,
      })
    } else if (head.events > 0 && anchored?.hash !== head.event_hash) {
      a.problem({
        record: runId,
        file: eventsFile,
        field: `line ${head.events}`,
        message: "is not the line the run record's head names (rewritten or re-sealed)",
      })
    } else if (anchored && anchored.run_state !== runStateHash(run as unknown as Record<string, unknown>)) {
      a.problem({
        record: runId,
        file: runFile,
        field: '(state)',
        message: `the run record is not the state its timeline line ${head.events} recorded (status, owner, answers or decisions changed)`,
      })
    }
    if (chain.lines.length > head.events) {
      a.report.notes.push({
        record: runId,
        file: eventsFile,
        field: `line ${head.events + 1}`,
        message: 'a change to the run record was interrupted (the timeline is ahead of the record); the next change completes it',
      })
    }
  }
  if (names.includes('journal.json')) {
    a.report.notes.push({record: runId, file: a.store.journalFile(runId), field: '(file)', message: 'a step commit was interrupted; pipe resume finishes it'})
  }
  const problemsBefore = a.report.problems.length

  // Snapshots.
  const snapshotDir = path.join(dir, 'snapshots')
  const files = listDir(snapshotDir)
    .filter((n) => !a.tidyTemp(snapshotDir, n))
    .sort()
  if (!names.includes('snapshots') && (head?.seq ?? 0) > 0)
    a.problem({record: runId, file: snapshotDir, field: '(folder)', message: 'the snapshots folder is missing'})
  const snapshots: Snapshot[] = []
  let expectedPrev: string | null | undefined = null
  const replayOf: unknown = run?.replay_of
  if (replayOf !== undefined) {
    if (isObject(replayOf) && typeof replayOf.run_id === 'string' && ID_PATTERNS.run.test(replayOf.run_id) && Number.isInteger(replayOf.seq)) {
      const origin = (replayOf.seq as number) > 1 ? parseFile<Snapshot>(a.store.snapshotFile(replayOf.run_id, (replayOf.seq as number) - 1)) : null
      expectedPrev = origin === null ? null : origin.ok && isObject(origin.value) && isObject(origin.value.meta) ? origin.value.meta.record_hash : undefined
    } else expectedPrev = undefined
  }
  let expectedSeq = 1
  let headSeen = false
  for (const name of files) {
    const file = path.join(snapshotDir, name)
    const seqText = /^(\d{6,})\.json$/.exec(name)?.[1]
    if (!seqText) {
      a.problem({record: `${runId}/${name}`, file, field: '(file)', message: 'not a snapshot file name'})
      continue
    }
    const seq = Number(seqText)
    const record = `${runId}#${seq}`
    while (expectedSeq < seq) {
      a.problem({
        record: `${runId}#${expectedSeq}`,
        file: a.store.snapshotFile(runId, expectedSeq),
        field: '(file)',
        message: 'snapshot is missing (a gap in seq)',
      })
      expectedSeq++
      expectedPrev = undefined
    }
    expectedSeq = seq + 1
    a.report.snapshots++
    const parsedSnapshot = parseFile<Snapshot>(file)
    if (!parsedSnapshot.ok) {
      a.problem({record, file, field: '(file)', message: parsedSnapshot.message})
      expectedPrev = undefined
      continue
    }
    const s = parsedSnapshot.value
    if (!isObject(s)) {
      a.problem({record, file, field: '(record)', message: notAnObject(s)})
      expectedPrev = undefined
      continue
    }
    const damage = verifySnapshot(s, a.key)
    a.integrity(damage, record, file)
    // Even a snapshot whose seal holds is checked: without a key, anyone can seal anything.
    const malformed = schemaFindings('snapshot', s, record, file)
    for (const f of malformed) a.problem(f)
    // Only a well-formed snapshot is handed on (to the step kinds, for the keys it delivered).
    if (malformed.length === 0) snapshots.push(s)
    if (s.run_id !== runId) a.problem({record, file, field: 'run_id', message: `names run ${String(s.run_id)}`})
    if (s.step?.seq !== seq) a.problem({record, file, field: 'step.seq', message: `is ${String(s.step?.seq)}, but the file is seq ${seq}`})
    if (expectedPrev !== undefined && s.meta?.prev_hash !== expectedPrev) {
      a.problem({record, file, field: 'meta.prev_hash', message: 'does not match the record hash of the snapshot before it (the chain is broken)'})
    }
    expectedPrev = s.meta?.record_hash
    if (head && seq === head.seq) {
      headSeen = true
      if (s.meta?.record_hash !== head.snapshot_hash)
        a.problem({record, file, field: 'meta.record_hash', message: "is not the snapshot the run record's head names (rewritten or re-sealed)"})
    }
    if (head && run && seq > head.seq && SETTLED.has(run.status)) {
      a.problem({record, file, field: '(file)', message: `was written after the run record was sealed, yet the run is ${run.status} (added after the fact)`})
    }
    for (const version of [s.spec_version_in, s.spec_version_out])
      if (typeof version === 'string' && ID_PATTERNS.spec.test(version)) a.bound(version, 'spec', s, record, file)
    const links: unknown = s.evidence_links
    for (const link of Array.isArray(links) ? links : []) {
      if (isObject(link) && typeof link.evidence_id === 'string' && ID_PATTERNS.evidence.test(link.evidence_id))
        a.bound(link.evidence_id, 'evidence', s, record, file)
    }
  }
  if (head && head.seq > 0 && !headSeen) {
    const last = snapshots.at(-1)?.step.seq ?? 0
    a.problem({
      record: `${runId}#${head.seq}`,
      file: a.store.snapshotFile(runId, head.seq),
      field: '(file)',
      message: `the run record's head names snapshot #${head.seq}, but ${last ? `the last is #${last}` : 'there are none'} (snapshots were removed)`,
    })
  }
  if (names.includes('state')) stepStates(a, runId, path.join(dir, 'state'))
  if (names.includes('commits.jsonl'))
    commitLog(
      a,
      runId,
      a.report.problems.length > problemsBefore,
      new Set(files),
      head && run && SETTLED.has(run.status) ? {seq: head.seq, status: run.status} : null,
    )
  return snapshots
}

/**
 * The working state of the run's paused or interrupted steps (an agent's conversation): each file
 * sealed, since a resumed step acts on it. It is not chained to the trail (it changes as the step
 * goes), so a file re-sealed with pipe's own functions passes unless keyed mode is on.
 */
function stepStates(a: Auditor, runId: string, stateDir: string): void {
  for (const name of listDir(stateDir)) {
    if (a.tidyTemp(stateDir, name) || !/^\d{6}-[a-z][a-z0-9_]*\.json$/.test(name)) continue
    const file = path.join(stateDir, name)
    const parsed = parseFile<unknown>(file)
    const record = `${runId} state ${name.slice(0, -5)}`
    if (!parsed.ok) {
      a.problem({record, file, field: '(file)', message: parsed.message})
      continue
    }
    const sealed = parsed.value !== null && typeof parsed.value === 'object' && 'seal' in parsed.value ? checkRecord(parsed.value, a.key) : null
    if (sealed === 'ok') continue
    if (sealed === 'no-key') {
      a.report.unverifiable++
      continue
    }
    a.problem({record, file, field: 'seal', message: sealed === null ? 'the step state is not sealed' : sealMessage(sealed)})
  }
}

/**
 * The run's commit log (see commit.ts): its last line without a snapshot is a commit a crash
 * interrupted. When the run has damage, each record or snapshot the log can rebuild byte for byte
 * (missing, empty or not JSON: what a power failure leaves of an unsynced write) is named, since
 * pipe resume rewrites it. Only the last line is read when the run is intact.
 */
/** `settled`: the run's status and last snapshot when it is not running, so that no commit can be in flight past it. */
function commitLog(a: Auditor, runId: string, damaged: boolean, snapshotNames: ReadonlySet<string>, settled: {seq: number; status: string} | null): void {
  const file = a.store.commitLogFile(runId)
  const text = damaged ? readBytes(file) : readTail(file)
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
    const snapshotFile = a.store.snapshotFile(runId, line.seq)
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
      const recordFile = ID_PATTERNS.spec.test(id) ? a.store.specFile(id) : ID_PATTERNS.evidence.test(id) ? a.store.evidenceFile(id) : null
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
