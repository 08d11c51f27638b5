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
import path from 'node:path'
import type {Snapshot} from '../../types/snapshot.js'
import {hashJson} from '../../util/hash.js'
import {listDir, parseFile, readBytes} from './audit-read.js'
import {auditRun} from './audit-run.js'
import {auditLedger, auditReplies} from './audit-trails.js'
import {runIndexOrder} from '../trail/audit-notes.js'
import {Auditor, type AuditedStore} from './auditor.js'
import {compareIds, ID_PATTERNS} from './ids.js'
import {indexLineProblem, isObject} from '../trail/shapes.js'
import {readChain, type ChainedLine} from './trail.js'
import type {AuditKinds, AuditReport} from '../types.js'

export type {AuditFinding, AuditKinds, AuditReport} from '../types.js'
export {Auditor} from './auditor.js'

/** The ledger keys snapshots recorded as delivered, with the snapshot that says so. */
function deliveredKeys(snapshots: readonly Snapshot[], kinds: AuditKinds): Array<[string, string]> {
  return snapshots.flatMap((s) => kinds.deliveredKeys(s).map((key): [string, string] => [key, `${s.run_id}#${s.step.seq}`]))
}

/**
 * The runs started by `runId` (pipeline and foreach steps), theirs in turn: records that name it as
 * their parent. Children are created after their parent, so only later run ids are read.
 */
function childRuns(store: AuditedStore, runId: string): string[] {
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
export async function auditStore(store: AuditedStore, runId?: string, kinds: AuditKinds = {deliveredKeys: () => []}): Promise<AuditReport> {
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
      for (const [key, where] of deliveredKeys(auditRun(auditor, id, line), kinds)) if (!delivered.has(key)) delivered.set(key, where)
    }
    auditLedger(auditor, delivered, new Set(runs))
    return auditor.report
  }

  auditor.tidyStagedRuns(new Set(indexed.keys()))
  for (const dir of [store.root, store.auditDir, store.idsDir]) auditor.tidyDir(dir)
  reportIndex()
  if (index.torn)
    auditor.report.notes.push({
      record: 'run index',
      file: indexFile,
      field: `line ${index.lines.length + 1}`,
      message: 'torn last line (a crash while appending); earlier lines are intact',
    })

  const ids = await store.listRunIds()
  const present = new Set(ids)
  const featureRuns = new Map<string, string[]>()
  const featureBound = new Map<string, string>()
  const publishedKeys = new Map<string, string>()
  for (const id of [...ids].sort()) {
    const line = indexed.get(id)
    if (!line)
      auditor.problem({
        record: id,
        file: store.runDir(id),
        field: '(index)',
        message: 'the run is not in the run index (added after the fact, or the index was cut short)',
      })
    for (const [key, where] of deliveredKeys(auditRun(auditor, id, line), kinds)) if (!publishedKeys.has(key)) publishedKeys.set(key, where)
  }
  for (const [id, line] of indexed) {
    // A feature id the index names must be one before it names a file (the line is reported above).
    if (indexLineProblem(line) === null) {
      const feature = line.feature_id as string
      featureRuns.set(feature, [...(featureRuns.get(feature) ?? []), id])
      if (typeof line.feature_hash === 'string' && !featureBound.has(feature)) featureBound.set(feature, line.feature_hash)
    }
    if (!present.has(id))
      auditor.problem({
        record: id,
        file: path.join(store.runsDir, id),
        field: '(folder)',
        message: 'the run folder is missing (the run index names it: deleted after the fact)',
      })
  }
  const order = index.lines.flatMap((line, i) =>
    typeof line.run_id === 'string' ? [{runId: line.run_id, field: `line ${index.at[i]}`, created: auditor.runCreated.get(line.run_id)}] : [],
  )
  auditor.report.notes.push(...runIndexOrder(order, indexFile))
  auditor.unreferenced()
  const features = auditor.features(featureRuns, featureBound)
  const ledger = auditLedger(auditor, publishedKeys)
  auditReplies(auditor)
  auditor.report.head = hashJson({
    index: index.lines.at(-1)?.hash ?? null,
    runs: [...auditor.runSeals].sort(([a], [b]) => (a < b ? -1 : 1)),
    ledger: ledger.head,
    ledger_entries: ledger.seals,
    features: [...features].sort(([a], [b]) => (a < b ? -1 : 1)),
  })
  return auditor.report
}
