/**
 * pipe audit verify: the one walk over a store's records (TrailRows: the file store's files, the
 * PostgreSQL store's tables, the in-memory store's maps) that recomputes every seal and link and
 * names each record that was changed, removed, reordered or re-sealed after the fact, with where the
 * store keeps it. What only one store has (a file store's leftovers of crashes, torn writes, its
 * commit log) the store checks itself, beside this walk (see TrailRows.afterRun).
 *
 * What anchors what: the run index chains every run and binds the facts fixed at its creation and
 * its feature record; a run's timeline chains its lines, and each line binds the run record's state;
 * the run record seals the head (timeline length and last hash, last snapshot seq and hash);
 * snapshots chain to each other and bind the spec versions and evidence they name; the ledger log
 * chains every ledger write. So an edit shows at its own seal, and an edit re-sealed with pipe's own
 * functions shows at the next link; only a rewrite of everything after it goes unseen, which keyed
 * mode (PIPE_AUDIT_KEY) prevents and the printed head digest, anchored elsewhere, reveals.
 */
import {hashJson} from '../../util/hash.js'
import type {AuditKinds, AuditReport} from '../types.js'
import {anchorLineProblem, isAnchorLine} from './archive.js'
import {auditLedger} from './audit-ledger.js'
import {ORPHAN_FEATURE, runIndexOrder} from './audit-notes.js'
import {auditRun, RecordChecks} from './audit-run.js'
import {checkChain, Findings, parseBody, type Loc, type TrailRows} from './audit-walk.js'
import {compareIds, ID_PATTERNS} from './ids.js'
import {checkRecord, fileHash} from './integrity.js'
import {indexLineProblem, type Plain} from './shapes.js'

export type {Body, Loc, RunContext, TrailRows} from './audit-walk.js'
export {Findings} from './audit-walk.js'

/** Features: sealed, present for every run that names one, and as the run index bound them. */
async function auditFeatures(
  rows: TrailRows,
  out: Findings,
  referenced: Map<string, string[]>,
  bound: Map<string, string>,
): Promise<Map<string, string | null>> {
  const seals = new Map<string, string | null>()
  const present = new Set<string>()
  for (const {id, body} of await rows.features()) {
    present.add(id)
    out.report.features++
    const loc: Loc = {kind: 'feature', id}
    const parsed = parseBody(body)
    const feature = out.object(parsed, id, loc)
    if (!feature || !parsed.ok) continue
    seals.set(id, typeof feature.seal === 'string' ? feature.seal : null)
    if (feature.seal === undefined) out.problem(id, loc, 'seal', 'the feature record is not sealed')
    else out.seal(checkRecord(feature, out.key), id, loc, 'seal')
    if (feature.feature_id !== id) out.problem(id, loc, 'feature_id', `names ${String(feature.feature_id)}, not the feature it is stored as`)
    const expected = bound.get(id)
    if (expected && expected !== fileHash(parsed.bytes))
      out.problem(id, loc, '(file)', 'is not the feature record the run index bound (changed or re-sealed after the fact)')
  }
  // A feature is recorded just before the run that names it: one no run names is a creation that was interrupted between the two.
  for (const id of present) if (!referenced.has(id)) out.note(id, {kind: 'feature', id}, '(file)', ORPHAN_FEATURE)
  for (const [id, runs] of referenced)
    if (!present.has(id)) out.problem(id, {kind: 'feature', id}, '(file)', `feature record is missing (named by ${runs.join(', ')})`)
  return seals
}

/** `kinds` tells which snapshots name deliveries (the step kinds know; the store does not). */
/** `out`: what the store found before the walk (the file store: leftovers of crashes it tidied), added to. */
export async function auditRows(
  rows: TrailRows,
  runId?: string,
  kinds: AuditKinds = {deliveredKeys: () => []},
  out: Findings = new Findings(rows),
): Promise<AuditReport> {
  const checks = new RecordChecks(rows, out)
  const index = await rows.runIndex()
  // With a run: only the index lines of its runs and their neighbours (a line removed or rewritten
  // before the run's shows at its link, or is where its link goes).
  let near: Set<number> | undefined
  let runs: string[] = []
  if (runId) {
    runs = [runId]
    // Its children (pipeline and foreach steps) and theirs.
    for (let i = 0; i < runs.length; i++) for (const child of await rows.children(runs[i]!)) runs.push(child)
    near = new Set()
    const wanted = new Set(runs)
    for (const {pos, line} of index) {
      let named: unknown
      try {
        named = (JSON.parse(line) as Plain | null)?.run_id
      } catch {
        named = undefined
      }
      if (typeof named === 'string' && wanted.has(named)) for (const n of [-1, 0, 1]) near.add(pos + n)
      // A line that names no run may be one of these runs' lines, damaged.
      else if (typeof named !== 'string' || !ID_PATTERNS.run.test(named)) near.add(pos)
    }
  }
  const lines = checkChain(
    index,
    out,
    (pos) => ({kind: 'index', pos}),
    (pos, line) => (typeof line?.run_id === 'string' ? line.run_id : `run index line ${pos}`),
    // A run moved out to an archive leaves an anchor line in the index (pipe store archive).
    (line) => (isAnchorLine(line) ? anchorLineProblem(line) : indexLineProblem(line)),
    (pos) => near === undefined || near.has(pos),
  )
  // A malformed line is reported with the index; one that still names a run is that run's line.
  const indexed = new Map<string, Plain>()
  for (const {value} of lines) if (typeof value.run_id === 'string' && ID_PATTERNS.run.test(value.run_id)) indexed.set(value.run_id, value)
  const archived = new Map<string, Plain>()
  for (const {value} of lines) if (isAnchorLine(value) && anchorLineProblem(value) === null) archived.set(value.archived as string, value)
  const delivered = new Map<string, string>()
  const deliveries = (found: Array<[string, string]>): void => {
    for (const [key, where] of found) if (!delivered.has(key)) delivered.set(key, where)
  }

  if (runId) {
    for (const id of runs) {
      if (!indexed.has(id)) out.problem(id, {kind: 'run-place', id}, '(index)', 'the run is not in the run index')
      deliveries(await auditRun(rows, out, checks, id, indexed.get(id), kinds))
    }
    await auditLedger(rows, out, delivered, new Set(runs))
    return out.report
  }

  const ids = (await rows.runIds()).sort(compareIds)
  const present = new Set(ids)
  const created = new Map<string, unknown>()
  for (const id of ids) {
    if (!indexed.has(id))
      out.problem(id, {kind: 'run-place', id}, '(index)', 'the run is not in the run index (added after the fact, or the index was cut short)')
    deliveries(await auditRun(rows, out, checks, id, indexed.get(id), kinds, created))
  }
  const featureRuns = new Map<string, string[]>()
  const featureBound = new Map<string, string>()
  for (const [id, line] of indexed) {
    // A feature id the index names must be one before it names a record (the line is reported above).
    if (indexLineProblem(line) === null) {
      const feature = line.feature_id as string
      featureRuns.set(feature, [...(featureRuns.get(feature) ?? []), id])
      if (typeof line.feature_hash === 'string' && !featureBound.has(feature)) featureBound.set(feature, line.feature_hash)
    }
    if (present.has(id) || archived.has(id)) continue
    out.problem(id, {kind: 'run-place', id}, '(folder)', 'the run is missing (the run index names it, and no archive anchor: deleted after the fact)')
  }
  for (const [id, anchor] of archived) {
    // The app checks each archive against its anchor (app/archive.ts): the walk knows no files.
    out.report.archives = [
      ...(out.report.archives ?? []),
      {run_id: id, archive: anchor.archive as string, digest: anchor.digest as string, index_hash: anchor.index_hash as string},
    ]
    if (indexed.get(id)?.hash !== anchor.index_hash)
      out.problem(id, {kind: 'run-place', id}, '(index)', 'the archive anchor names a run index line the index does not hold')
    if (present.has(id))
      out.note(
        id,
        {kind: 'run-place', id},
        '(folder)',
        `the run was archived to ${String(anchor.archive)} but its records were not removed yet (interrupted): pipe store archive finishes it`,
      )
  }
  const order = lines.flatMap(({pos, value}) => (typeof value.run_id === 'string' ? [{runId: value.run_id, pos, created: created.get(value.run_id)}] : []))
  for (const n of runIndexOrder(
    order.map((r) => ({runId: r.runId, field: `pos ${r.pos}`, created: r.created})),
    '',
  )) {
    const pos = Number(n.field.slice(4))
    out.report.notes.push({...n, ...rows.locate({kind: 'index', pos}, `line ${pos}`)})
  }
  await checks.unreferenced(new Set(archived.keys()))
  const features = await auditFeatures(rows, out, featureRuns, featureBound)
  const ledger = await auditLedger(rows, out, delivered)
  const byId = ([a]: [string, unknown], [b]: [string, unknown]): number => (a < b ? -1 : a > b ? 1 : 0)
  out.report.head = hashJson({
    index: (lines.at(-1)?.value.hash as string | undefined) ?? null,
    runs: [...checks.runSeals].sort(byId),
    ledger: ledger.head,
    // In the order of the file store's entry files (KEY.json), whatever a database's collation says.
    ledger_entries: ledger.seals.sort(([a], [b]) => byId([`${a}.json`, a], [`${b}.json`, b])),
    features: [...features].sort(byId),
  })
  return out.report
}
