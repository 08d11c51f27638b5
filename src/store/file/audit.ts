/**
 * pipe audit verify on the file store: its files read into the rows of the trail's one walk
 * (../trail/audit.ts), each finding named by its file and line. What only files have is checked
 * here, beside the walk (audit-extras.ts): leftovers of crashes, tidied and reported as cleaned;
 * torn last lines of the append-only logs; names that are no record's; a run's commit log and step
 * states; the reply cache.
 *
 * Reads are synchronous on purpose: a whole-store check reads thousands of small files one after
 * another, and the promise-based reads cost several times the CPU of the reads themselves.
 */
import path from 'node:path'
import {auditRows, Findings, type Body, type Loc, type TrailRows} from '../trail/audit.js'
import {isObject} from '../trail/shapes.js'
import type {AuditKinds, AuditReport} from '../types.js'
import {hashOfFile, listDir, parseFile, readBytes, readText} from './audit-read.js'
import {auditReplies, commitLog, stepStates, tidyDir, tidyStagedRuns, tidyTemp} from './audit-extras.js'
import type {FileLayout} from './files.js'
import {compareIds, ID_PATTERNS} from './ids.js'
import {SETTLED} from '../trail/audit-run.js'

export type {AuditFinding, AuditKinds, AuditReport} from '../types.js'

/** What the audit reads of a file store: its layout and its runs. */
export type AuditedStore = FileLayout & {listRunIds(): Promise<string[]>}

const body = (bytes: Buffer | string): Body => (typeof bytes === 'string' ? {unreadable: bytes} : bytes)
/** A record the walk only parses (what binds it is its seal over the parsed value, not its bytes). */
const textBody = (file: string): Body => {
  const read = readText(file)
  return typeof read === 'string' ? {unreadable: read} : read.text
}

const TORN = 'torn last line (a crash while appending); earlier lines are intact'

/** A log's lines with their numbers; a torn last line (no newline, not JSON) is left out and noted. */
function logLines(file: string, out: Findings, record: string | null): Array<{pos: number; line: string}> {
  const bytes = readBytes(file)
  const text = typeof bytes === 'string' ? '' : bytes.toString('utf8')
  const raw = text.split('\n')
  if (raw.at(-1) === '') raw.pop()
  const lines = raw.map((line, i) => ({pos: i + 1, line}))
  const last = lines.at(-1)
  if (last && !text.endsWith('\n')) {
    try {
      JSON.parse(last.line)
    } catch {
      lines.pop()
      if (record !== null) out.report.notes.push({record, file, field: `line ${last.pos}`, message: TORN})
    }
  }
  return lines
}

/** The names of `dir` that are ID.json for an id of `pattern`, temp files tidied. */
function recordNames(out: Findings, dir: string, pattern: RegExp): string[] {
  const ids: string[] = []
  for (const name of listDir(dir)) {
    if (tidyTemp(out, dir, name)) continue
    const id = name.endsWith('.json') ? name.slice(0, -5) : ''
    if (pattern.test(id)) ids.push(id)
  }
  return ids
}

/**
 * The runs started by `runId` (pipeline and foreach steps): records that name it as their parent.
 * Children are created after their parent, so only later run ids are read.
 */
function childRuns(store: AuditedStore, runId: string): string[] {
  return listDir(store.runsDir)
    .filter((name) => ID_PATTERNS.run.test(name) && compareIds(name, runId) > 0)
    .sort(compareIds)
    .filter((id) => {
      const parsed = parseFile<unknown>(path.join(store.runsDir, id, 'run.json'))
      return parsed.ok && isObject(parsed.value) && isObject(parsed.value.parent) && parsed.value.parent.run_id === runId
    })
}

function fileRows(store: AuditedStore, out: () => Findings, whole: boolean): TrailRows {
  // The names in the run folder last read (by run()), for afterRun() of the same run: one listing a run.
  let listed: {id: string; names: string[]} | null = null
  const ledgerDir = path.join(store.root, 'ledger')
  const ledgerLog = path.join(store.auditDir, 'ledger.jsonl')
  const recordFile = (id: string): string => (ID_PATTERNS.spec.test(id) ? store.specFile(id) : store.evidenceFile(id))
  return {
    runIndex: () => logLines(store.runIndexFile, out(), whole ? 'run index' : null),
    runIds: () => store.listRunIds(),
    children: (id) => childRuns(store, id),
    run: (id) => {
      const dir = store.runDir(id)
      const names = listDir(dir).filter((name) => !tidyTemp(out(), dir, name))
      listed = {id, names}
      return {body: textBody(path.join(dir, 'run.json'))}
    },
    events: (id) => logLines(path.join(store.runDir(id), 'events.jsonl'), out(), id),
    snapshots: (id) => {
      const dir = path.join(store.runDir(id), 'snapshots')
      const found: Array<{seq: number; body: Body}> = []
      for (const name of listDir(dir).sort()) {
        if (tidyTemp(out(), dir, name)) continue
        const seq = /^(\d{6,})\.json$/.exec(name)?.[1]
        if (seq) found.push({seq: Number(seq), body: textBody(path.join(dir, name))})
        else out().add({record: `${id}/${name}`, file: path.join(dir, name), field: '(file)', message: 'not a snapshot file name'})
      }
      return found
    },
    snapshot: (id, seq) => textBody(store.snapshotFile(id, seq)),
    record: (id) => body(readBytes(recordFile(id))),
    recordHash: (id) => hashOfFile(recordFile(id)),
    specIds: () => recordNames(out(), store.specsDir, ID_PATTERNS.spec),
    evidenceIds: () => recordNames(out(), store.evidenceDir, ID_PATTERNS.evidence),
    features: () => recordNames(out(), store.featuresDir, ID_PATTERNS.feature).map((id) => ({id, body: body(readBytes(store.featureFile(id)))})),
    ledgerLog: () => logLines(ledgerLog, out(), 'ledger log'),
    ledger: () =>
      listDir(ledgerDir)
        .sort()
        .filter((name) => !tidyTemp(out(), ledgerDir, name) && name.endsWith('.json'))
        .map((name) => ({key: name.slice(0, -5), body: textBody(path.join(ledgerDir, name))})),
    locate: (loc: Loc, field: string) => {
      switch (loc.kind) {
        case 'run':
          return {file: path.join(store.runDir(loc.id), 'run.json'), field}
        case 'run-place':
          return {file: store.runDir(loc.id), field}
        case 'events':
          return {file: path.join(store.runDir(loc.run), 'events.jsonl'), field: `line ${loc.n}`}
        case 'snapshot':
          return {file: store.snapshotFile(loc.run, loc.seq), field}
        case 'spec':
          return {file: store.specFile(loc.id), field}
        case 'evidence':
          return {file: store.evidenceFile(loc.id), field}
        case 'feature':
          return {file: store.featureFile(loc.id), field}
        case 'index':
          return {file: store.runIndexFile, field: `line ${loc.pos}`}
        case 'ledger-log':
          return {file: ledgerLog, field: `line ${loc.pos}`}
        case 'ledger':
          return {file: path.join(ledgerDir, `${loc.key}.json`), field}
      }
    },
    afterRun: (id, run, found) => {
      const dir = store.runDir(id)
      const names = listed?.id === id ? listed.names : listDir(dir)
      if (names.includes('journal.json'))
        found.report.notes.push({record: id, file: store.journalFile(id), field: '(file)', message: 'a step commit was interrupted; pipe resume finishes it'})
      if (!names.includes('snapshots') && (run.head?.seq ?? 0) > 0)
        found.add({record: id, file: path.join(dir, 'snapshots'), field: '(folder)', message: 'the snapshots folder is missing'})
      if (names.includes('state')) stepStates(found, id, path.join(dir, 'state'))
      if (names.includes('commits.jsonl'))
        commitLog(
          found,
          store,
          id,
          run.damaged,
          new Set([...run.seqs].map((seq) => path.basename(store.snapshotFile(id, seq)))),
          run.head && run.status !== null && SETTLED.has(run.status) ? {seq: run.head.seq, status: run.status} : null,
        )
    },
  }
}

/** `kinds` tells which snapshots name deliveries (the step kinds know; the store does not). */
export async function auditStore(store: AuditedStore, runId?: string, kinds?: AuditKinds): Promise<AuditReport> {
  const rows = fileRows(store, () => out, runId === undefined)
  const out = new Findings(rows)
  if (runId === undefined) {
    tidyStagedRuns(out, store.runsDir, () => {
      const ids = new Set<string>()
      for (const {line} of logLines(store.runIndexFile, out, null)) {
        const id = /"run_id":"(R-[^"]+)"/.exec(line)?.[1]
        if (id) ids.add(id)
      }
      return ids
    })
    for (const dir of [store.root, store.auditDir, store.idsDir]) tidyDir(out, dir)
  }
  const report = await auditRows(rows, runId, kinds, out)
  if (runId === undefined) auditReplies(out, store.root)
  return report
}
