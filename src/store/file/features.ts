/** Feature registrations (features/F-YYYY-NNN.json): created once, never rewritten; the run index binds each file's hash. */
import {createFileExclusive} from '../../util/fs.js'
import {readFile} from '../../util/fs-async.js'
import {faultPoint} from '../../util/faults.js'
import type {FileLayout} from './files.js'
import {allocateId, allocationDay} from './ids.js'
import {fileHash} from '../trail/integrity.js'
import {featureText} from '../trail/records.js'

export async function createFeature(layout: FileLayout, now: Date, title: string): Promise<string> {
  const id = await allocateId(layout.idsDir, 'F', await allocationDay(layout.idsDir, 'F', now), (id) =>
    createFileExclusive(layout.featureFile(id), featureText(id, now, title)),
  )
  // Between the feature and its run: what pipe audit verify notes when a run creation stops here.
  faultPoint('feature-recorded')
  return id
}

export async function ensureFeature(layout: FileLayout, id: string, now: Date): Promise<void> {
  await createFileExclusive(layout.featureFile(id), featureText(id, now))
}

/** The hash of a feature's file as the run index binds it, null when it has none; read once per store (files are never rewritten). */
export class FeatureHashes {
  private readonly known = new Map<string, string>()

  constructor(private readonly layout: FileLayout) {}

  async of(featureId: string): Promise<string | null> {
    const known = this.known.get(featureId)
    if (known) return known
    const bytes = await readFile(this.layout.featureFile(featureId)).catch(() => null)
    if (!bytes) return null
    const hash = fileHash(bytes)
    this.known.set(featureId, hash)
    return hash
  }
}
