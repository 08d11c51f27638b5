/**
 * Snapshots (runs/R/snapshots/NNNNNN.json): one write-once file per step, sealed, chained to the
 * one before, binding the files of the spec versions and evidence it names.
 */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import type {Snapshot} from '../../types/snapshot.js'
import {readFile} from '../../util/fs-async.js'
import {readJson, seqName, snapshotNames, wellFormed, within, writeOnce, type FileLayout, type WriteOptions} from './files.js'
import {fileHash} from '../trail/integrity.js'
import {recordText} from '../trail/records.js'
import {sealCommitted} from '../trail/snapshots.js'

/**
 * Writes a snapshot once. Writing the very same snapshot again (finishing a commit after a crash)
 * returns it; a different snapshot under the same seq is E_CONFLICT.
 */
export async function writeSnapshot(layout: FileLayout, snapshot: Snapshot, options: WriteOptions & {repair?: boolean} = {}): Promise<Snapshot> {
  const binds: Record<string, string> = {}
  for (const version of [snapshot.spec_version_in, snapshot.spec_version_out])
    if (version) binds[version] = await boundHash(layout, version, layout.specFile(version))
  for (const link of snapshot.evidence_links) binds[link.evidence_id] = await boundHash(layout, link.evidence_id, layout.evidenceFile(link.evidence_id))
  const stored = sealCommitted(snapshot, (id) => binds[id]!)
  const file = layout.snapshotFile(snapshot.run_id, snapshot.step.seq)
  const text = recordText(stored)
  if (await writeOnce(file, text, {sync: options.sync ?? true, repair: options.repair === true})) {
    noteSnapshot(layout, stored)
    return stored
  }
  throw new PipeError('E_CONFLICT', `snapshot ${snapshot.step.seq} of ${snapshot.run_id} already exists`, {
    hint: 'Snapshots are written once; another process may be driving this run.',
  })
}

/** A snapshot written under the run's lock right after the last one known moves the known head (see FileLayout.owned). */
function noteSnapshot(layout: FileLayout, stored: Snapshot): void {
  const owned = layout.owned.get(stored.run_id)
  if (owned?.head && stored.step.seq === owned.head.seq + 1) owned.head = {seq: stored.step.seq, snapshot_hash: stored.meta.record_hash ?? null}
  else if (owned) delete owned.head
}

export async function readSnapshots(layout: FileLayout, runId: string): Promise<Snapshot[]> {
  const dir = within(layout.runDir(runId), 'snapshots')
  const names = snapshotNames(dir)
  const out: Snapshot[] = []
  for (const name of names) {
    const file = path.join(dir, name)
    const snapshot = wellFormed<Snapshot>('snapshot', await readJson<unknown>(file, `snapshot ${runId}/${name}`), `snapshot ${runId}/${name}`, file)
    if (snapshot.run_id !== runId || `${seqName(snapshot.step.seq)}` !== name) {
      throw new PipeError('E_INTEGRITY', `snapshot ${runId}/${name} names ${snapshot.run_id}#${snapshot.step.seq} (${file})`, {
        hint: 'It was moved or changed outside pipe; run pipe audit verify to see all damage.',
      })
    }
    out.push(snapshot)
  }
  return out
}

/** The run's last snapshot as the run record's head names it. */
export async function snapshotHead(layout: FileLayout, runId: string): Promise<{seq: number; snapshot_hash: string | null}> {
  const names = snapshotNames(within(layout.runDir(runId), 'snapshots'))
  const last = names.at(-1)
  if (!last) return {seq: 0, snapshot_hash: null}
  const file = within(layout.runDir(runId), 'snapshots', last)
  const snapshot = wellFormed<Snapshot>('snapshot', await readJson<unknown>(file, `snapshot ${runId}/${last}`), `snapshot ${runId}/${last}`, file)
  return {seq: Number(last.slice(0, -5)), snapshot_hash: snapshot.meta.record_hash ?? null}
}

async function boundHash(layout: FileLayout, id: string, file: string): Promise<string> {
  let hash = layout.fileHashes.get(id)
  if (!hash) {
    const bytes = await readFile(file).catch(() => null)
    if (!bytes)
      throw new PipeError('E_NOT_FOUND', `${id} is named by a snapshot but its file is missing (${file})`, {hint: 'Run pipe audit verify to see all damage.'})
    hash = fileHash(bytes)
    layout.fileHashes.set(id, hash)
  }
  return hash
}
