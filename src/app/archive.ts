/**
 * pipe store archive and pipe audit verify --archive: the one place that decides which runs leave a
 * store and in what order their records move, whatever the store (it only reads, anchors and
 * removes, store/types.ts ArchiveStore; the format is store/trail/archive.ts).
 *
 * A run that has ended (succeeded, failed, cancelled) passes through archiving: seed 001's ARCHIVING
 * state is this move, after which the run is no longer in the store but in its archive, and the store
 * keeps an anchor line for it in the run index. The order makes a crash harmless: the archive is
 * written and synced first, then the anchors are appended (chained, synced), then the records are
 * removed. A crash before the anchors leaves the run in the store (its archive is written again, the
 * same bytes); after them, the next pipe store archive finishes the removal, and audit verify notes
 * the run as archived but not yet removed.
 */
import {existsSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {FINAL_STATUSES} from '../engine/lifecycle.js'
import {PipeError} from '../errors.js'
import {buildArchive, archiveDigest, verifyArchive, type ArchiveAnchor} from '../store/trail/archive.js'
import type {AuditKinds, AuditReport, Release, RunStore} from '../store/types.js'
import type {RunRecord} from '../types/run.js'
import {faultPoint} from '../util/faults.js'
import {makeDirs, syncDir, writeFileAtomicSync} from '../util/fs.js'

export const ARCHIVE_SUFFIX = '.pipe-archive.jsonl'

export interface ArchivedRun {
  /** The top-level run; `runs` are it and the runs it started, archived together. */
  run_id: string
  runs: string[]
  status: string
  archive: string
}

export interface ArchiveReport {
  before: string
  to: string
  dry_run: boolean
  archived: ArchivedRun[]
  /** Runs whose removal an earlier, interrupted pipe store archive left unfinished: finished now. */
  finished: string[]
}

/** DATE of --before: a day (YYYY-MM-DD, midnight UTC) or an ISO time with its zone. */
export function parseBefore(value: string): Date {
  const day = /^\d{4}-\d{2}-\d{2}$/.test(value)
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value)
  const date = new Date(day ? `${value}T00:00:00Z` : value)
  if ((!day && !iso) || Number.isNaN(date.getTime()) || (day && date.toISOString().slice(0, 10) !== value))
    throw new PipeError('E_INVALID_ARGS', `--before ${JSON.stringify(value)} is not a date`, {
      hint: 'Give a day as YYYY-MM-DD (midnight UTC), or a time as 2026-11-21T09:00:00Z: runs that ended before it are archived.',
    })
  return date
}

/** The store's archiving, or a clear refusal for a store that has none yet. */
function archivingOf(store: RunStore): NonNullable<RunStore['archiving']> {
  if (!store.archiving)
    throw new PipeError('E_INVALID_ARGS', 'this store cannot archive runs', {
      hint: 'Copy the store into a folder with pipe store copy and archive there.',
    })
  return store.archiving
}

/** The run and every run it started, parents before children. */
async function treeOf(store: RunStore, runId: string): Promise<RunRecord[]> {
  const out = [await store.readRun(runId)]
  for (let i = 0; i < out.length; i++) out.push(...(await store.listChildren(out[i]!.run_id)))
  return out
}

const endedAt = (r: RunRecord): string => r.ended_at ?? r.updated_at

/** Whether a run tree may leave: every run of it ended, the top one before `before`. */
function ready(tree: readonly RunRecord[], before: Date): boolean {
  return tree.every((r) => FINAL_STATUSES.includes(r.status)) && new Date(endedAt(tree[0]!)).getTime() < before.getTime()
}

/** Moves the top-level runs that ended before `before` (with the runs they started) into archives in `to`. */
export async function archiveRuns(store: RunStore, options: {before: Date; to?: string | undefined; dryRun?: boolean}): Promise<ArchiveReport> {
  const archiving = archivingOf(store)
  const folder = options.to ?? archiving.defaultFolder
  if (folder === null)
    throw new PipeError('E_INVALID_ARGS', 'say where the archives go: this store keeps its records in a database, not in a folder of its own', {
      hint: 'Give --to DIR, a folder the team keeps (a backup volume), e.g. pipe store archive --before 2026-11-01 --to /backups/pipe-archive.',
    })
  const to = path.resolve(folder)
  const dryRun = options.dryRun === true
  const report: ArchiveReport = {before: options.before.toISOString(), to, dry_run: dryRun, archived: [], finished: []}
  // What a crash left: runs anchored (they left) whose records are still here.
  const present = new Set(await store.listRunIds())
  const leftovers = new Set(await archiving.leftovers())
  for (const a of await archiving.anchors()) {
    if (!present.has(a.archived) && !leftovers.has(a.archived)) continue
    if (!dryRun) await archiving.remove(a.archived)
    present.delete(a.archived)
    report.finished.push(a.archived)
  }
  const ids = [...present].reverse()
  for (const id of ids) {
    let top: RunRecord
    try {
      top = await store.readRun(id)
    } catch {
      // A damaged record is audit verify's to name, and never archived.
      continue
    }
    if (top.parent !== undefined || !FINAL_STATUSES.includes(top.status)) continue
    const tree = await treeOf(store, id)
    if (!ready(tree, options.before)) continue
    const runIds = tree.map((r) => r.run_id)
    const file = path.join(to, `${id}${ARCHIVE_SUFFIX}`)
    if (dryRun) {
      report.archived.push({run_id: id, runs: runIds, status: top.status, archive: file})
      continue
    }
    // Held while they move, so that no pipe resume starts one of them again meanwhile.
    const held: Release[] = []
    try {
      let again: RunRecord[]
      try {
        faultPoint('archive-locking')
        for (const r of runIds) held.push(await store.acquireRun(r))
        again = await treeOf(store, id)
      } catch (error) {
        // Another process holds one of them (a resume, another pipe store archive) or just moved it: left to it.
        if (error instanceof PipeError && (error.code === 'E_CONFLICT' || error.code === 'E_NOT_FOUND')) continue
        throw error
      }
      if (!ready(again, options.before) || again.length !== tree.length) continue
      await moveOut(store, archiving, runIds, file)
      report.archived.push({run_id: id, runs: runIds, status: top.status, archive: file})
    } finally {
      // A removed run's lock went with its folder: nothing is left to release.
      for (const release of held.reverse()) await release().catch(() => undefined)
    }
  }
  return report
}

async function moveOut(store: RunStore, archiving: NonNullable<RunStore['archiving']>, runIds: string[], file: string): Promise<void> {
  const source = await archiving.source(runIds)
  const text = buildArchive(source, runIds)
  makeDirs(path.dirname(file))
  writeFileAtomicSync(file, text, {sync: true})
  syncDir(path.dirname(file))
  faultPoint('archive-written')
  const digest = archiveDigest(text)!
  const relative = path.relative(store.root, file)
  const named = relative.startsWith('..') || path.isAbsolute(relative) ? file : relative.split(path.sep).join('/')
  const anchors: ArchiveAnchor[] = runIds.map((runId) => ({archived: runId, archive: named, digest, index_hash: indexHash(source.runIndex, runId)}))
  await archiving.anchor(anchors)
  faultPoint('archive-anchored')
  // Children first: a parent is never gone while a child of it is still here.
  for (const runId of [...runIds].reverse()) {
    await archiving.remove(runId)
    faultPoint('archive-removed')
  }
}

function indexHash(runIndex: readonly string[], runId: string): string {
  for (const line of runIndex) {
    try {
      const value = JSON.parse(line) as {run_id?: unknown; hash?: unknown}
      if (value.run_id === runId && typeof value.hash === 'string') return value.hash
    } catch {
      // Not this run's line.
    }
  }
  throw new PipeError('E_INTEGRITY', `run ${runId} is not in the run index: it is not archived`, {hint: 'Run pipe audit verify to see all damage.'})
}

/** Checks an archive file on its own (pipe audit verify --archive FILE). */
export async function verifyArchiveFile(file: string, kinds?: AuditKinds): Promise<AuditReport> {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    throw new PipeError('E_IO', `cannot read the archive ${file}: ${(error as Error).message}`, {
      hint: 'Give the path of a .pipe-archive.jsonl file that pipe store archive wrote.',
    })
  }
  return verifyArchive(file, text, kinds)
}

/**
 * The whole-store audit's findings about what left: each anchored archive must exist, be the one
 * written (its digest is the anchor's) and pass its own checks. Added to `report`.
 */
export async function auditArchives(store: RunStore, report: AuditReport, kinds?: AuditKinds, options: {archives?: string} = {}): Promise<void> {
  const checked = new Set<string>()
  for (const a of report.archives ?? []) {
    const anchored = path.isAbsolute(a.archive) ? a.archive : path.join(store.root, a.archive)
    // Archives moved to a backup volume, or kept on another machine than the one auditing, are looked for by name in --archives.
    const file = options.archives !== undefined ? path.join(options.archives, path.basename(a.archive)) : anchored
    const problem = (message: string): void => {
      report.problems.push({record: a.run_id, file, field: '(file)', message})
      report.ok = false
    }
    if (!existsSync(file)) {
      problem(`the archive is missing (the run left the store for it): restore it from a backup`)
      continue
    }
    const text = readFileSync(file, 'utf8')
    if (archiveDigest(text) !== a.digest) {
      problem('is not the archive the run left for: its digest is not the one the run index anchored')
      continue
    }
    if (checked.has(file)) continue
    checked.add(file)
    const inner = await verifyArchive(file, text, kinds)
    for (const p of inner.problems) report.problems.push(p)
    if (!inner.ok) report.ok = false
    report.unverifiable += inner.unverifiable
  }
}
