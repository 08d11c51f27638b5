/**
 * The file store's part of pipe store archive (app/archive.ts has the logic, trail/archive.ts the
 * format): it reads a run's records as kept, appends anchors to the run index, and removes a run
 * that its anchor says has left. Persistence only.
 */
import {existsSync, readFileSync, renameSync, rmSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {faultPoint} from '../../util/faults.js'
import {syncDir} from '../../util/fs.js'
import {acquireLock} from '../../util/lock.js'
import {isAnchorLine, referencedIds, type ArchiveAnchor, type ArchiveSource} from '../trail/archive.js'
import {isObject} from '../trail/shapes.js'
import type {ArchiveStore} from '../types.js'
import {FileLayout, within} from './files.js'
import {ID_PATTERNS} from './ids.js'
import {appendChained} from './trail.js'
import {artifactFiles, lines, list, text} from './as-kept.js'

export class FileArchive implements ArchiveStore {
  constructor(private readonly layout: FileLayout) {}

  get defaultFolder(): string {
    return path.join(this.layout.root, 'archive')
  }

  private get artifactsDir(): string {
    return path.join(this.layout.root, 'artifacts', 'runs')
  }

  async source(runIds: readonly string[]): Promise<ArchiveSource> {
    const layout = this.layout
    const runs = runIds.flatMap((runId) => {
      const dir = layout.runDir(runId)
      const body = text(within(dir, 'run.json'))
      if (body === null) return []
      const snapshotsDir = within(dir, 'snapshots')
      const stateDir = within(dir, 'state')
      return [
        {
          run_id: runId,
          body,
          events: lines(text(within(dir, 'events.jsonl'))),
          snapshots: list(snapshotsDir)
            .filter((n) => /^\d{6,}\.json$/.test(n))
            .sort()
            .map((n) => ({seq: Number(n.slice(0, -5)), body: readFileSync(path.join(snapshotsDir, n), 'utf8')})),
          states: list(stateDir)
            .map((n) => /^(\d{6,})-([a-z][a-z0-9_]*)\.json$/.exec(n))
            .filter((m): m is RegExpExecArray => m !== null)
            .map((m) => ({step: m[2]!, seq: Number(m[1]), body: readFileSync(path.join(stateDir, m[0]), 'utf8')})),
        },
      ]
    })
    const named = referencedIds(runs)
    const read = (ids: string[], file: (id: string) => string): Array<{id: string; body: string}> =>
      ids.flatMap((id) => {
        const body = text(file(id))
        return body === null ? [] : [{id, body}]
      })
    const ledgerDir = path.join(layout.root, 'ledger')
    return {
      runs,
      specs: read(
        named.records.filter((id) => ID_PATTERNS.spec.test(id)),
        (id) => layout.specFile(id),
      ),
      evidence: read(
        named.records.filter((id) => ID_PATTERNS.evidence.test(id)),
        (id) => layout.evidenceFile(id),
      ),
      features: read(
        named.features.filter((id) => ID_PATTERNS.feature.test(id)),
        (id) => layout.featureFile(id),
      ),
      runIndex: lines(text(layout.runIndexFile)),
      ledger: list(ledgerDir)
        .filter((n) => n.endsWith('.json') && !n.startsWith('.'))
        .sort()
        .map((n) => ({key: n.slice(0, -5), body: readFileSync(path.join(ledgerDir, n), 'utf8')})),
      ledgerLog: lines(text(path.join(layout.auditDir, 'ledger.jsonl'))),
      artifacts: runIds.flatMap((runId) => artifactFiles(this.artifactsDir, runId)),
    }
  }

  async anchors(): Promise<ArchiveAnchor[]> {
    return lines(text(this.layout.runIndexFile)).flatMap((line) => {
      try {
        const value: unknown = JSON.parse(line)
        return isObject(value) && isAnchorLine(value) ? [value as unknown as ArchiveAnchor] : []
      } catch {
        return []
      }
    })
  }

  async anchor(anchors: readonly ArchiveAnchor[]): Promise<void> {
    // The index's lock: run creations append to the same chain.
    const release = await acquireLock(path.join(this.layout.auditDir, 'runs.lock'), {
      waitMs: 60000,
      busy: (holder) => `another pipe process (pid ${holder.pid}) is creating a run and holds the run index`,
      hint: 'Try again in a moment.',
    })
    try {
      const done = new Set((await this.anchors()).map((a) => a.archived))
      for (const a of anchors) if (!done.has(a.archived)) await appendChained(this.layout.runIndexFile, {...a})
    } finally {
      await release()
    }
  }

  async remove(runId: string): Promise<void> {
    if (!(await this.anchors()).some((a) => a.archived === runId))
      throw new PipeError('E_INTERNAL', `${runId} has no archive anchor: its records are not removed`)
    // Renamed out of the runs first, in one step: a crash mid-removal leaves a folder no listing
    // reads as a run (finished by the next pipe store archive), never a run with some records gone.
    const gone = within(this.layout.runsDir, `.archived-${runId}`)
    const dir = this.layout.runDir(runId)
    if (existsSync(dir)) {
      rmSync(gone, {recursive: true, force: true})
      try {
        renameSync(dir, gone)
        syncDir(this.layout.runsDir)
      } catch (error) {
        // Another pipe store archive finishing the same anchored run renamed it first: it is leaving either way.
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error
      }
      faultPoint('archive-renamed')
    }
    rmSync(gone, {recursive: true, force: true})
    rmSync(path.join(this.artifactsDir, runId), {recursive: true, force: true})
  }

  async leftovers(): Promise<string[]> {
    return list(this.layout.runsDir).flatMap((n) => {
      const id = /^\.archived-(.+)$/.exec(n)?.[1]
      return id && ID_PATTERNS.run.test(id) ? [id] : []
    })
  }
}

/** Where a run that left the store was archived, by its anchor in the run index; null for a run never archived. */
export function archivedTo(layout: FileLayout, runId: string): string | null {
  const mark = `"archived":${JSON.stringify(runId)}`
  for (const line of lines(text(layout.runIndexFile))) {
    if (!line.includes(mark)) continue
    try {
      const value: unknown = JSON.parse(line)
      if (isObject(value) && value.archived === runId && typeof value.archive === 'string')
        return path.isAbsolute(value.archive) ? value.archive : path.join(layout.root, value.archive)
    } catch {
      // A damaged line is audit verify's to name.
    }
  }
  return null
}

/** The error for a run id that names no run: one that was archived says where it went. */
export function runNotFound(layout: FileLayout, runId: string): PipeError {
  const archive = archivedTo(layout, runId)
  if (archive === null) return new PipeError('E_NOT_FOUND', `run ${runId} not found in ${layout.root}`, {hint: 'pipe runs list shows the runs of this store.'})
  return new PipeError('E_NOT_FOUND', `run ${runId} was archived (pipe store archive): its records left this store for ${archive}`, {
    hint: `pipe audit verify --archive ${archive} checks the archive; its records are read there.`,
  })
}
