/** Evidence records (evidence/E-NNNN.json): write-once, sealed, numbered over the whole store. */
import {PipeError} from '../../errors.js'
import type {Evidence} from '../../types/evidence.js'
import {readdir} from '../../util/fs-async.js'
import {builder, createSealed, readJson, wellFormed, type FileLayout, type WriteIntent, type WriteOptions} from './files.js'
import {compareIds, ID_PATTERNS} from './ids.js'
import {fileHash} from '../trail/integrity.js'
import type {EvidenceDraft} from '../types.js'
import {buildEvidence, evidenceText} from '../trail/records.js'

export async function writeEvidence(layout: FileLayout, draft: EvidenceDraft, now: Date, intent?: WriteIntent, options: WriteOptions = {}): Promise<Evidence> {
  const built = builder((id) => buildEvidence(draft, now, id))
  const id = await createSealed(
    layout.idsDir,
    'E',
    async () => '',
    (v) => layout.evidenceFile(v),
    (v) => built(v).text,
    intent,
    options,
  )
  layout.fileHashes.set(id, fileHash(built(id).text))
  return built(id).record
}

export {evidenceText}

export async function readEvidence(layout: FileLayout, id: string): Promise<Evidence> {
  const file = layout.evidenceFile(id)
  const evidence = wellFormed<Evidence>('evidence', await readJson<unknown>(file, `evidence ${id}`), `evidence ${id}`, file)
  if (evidence.evidence_id !== id)
    throw new PipeError('E_INTEGRITY', `evidence ${id} names ${evidence.evidence_id} (${file})`, {
      hint: 'It was moved or changed outside pipe; run pipe audit verify to see all damage.',
    })
  return evidence
}

export async function listEvidenceIds(layout: FileLayout): Promise<string[]> {
  const names = await readdir(layout.evidenceDir).catch(() => [] as string[])
  return names
    .filter((n) => n.endsWith('.json'))
    .map((n) => n.slice(0, -5))
    .filter((n) => ID_PATTERNS.evidence.test(n))
    .sort(compareIds)
}
