/**
 * Sealing records with hashes, and checking them. A record carries the hash of each top-level field
 * and a hash of the whole (which covers the field hashes too), so a check can say which field was
 * changed after the fact, and an edit of the field hashes themselves is caught by the whole-record
 * hash.
 */
import type {Evidence} from '../types/evidence.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {hashJson} from '../util/hash.js'

export interface IntegrityProblem {
  field: string
  message: string
}

type Plain = Record<string, unknown>

function fieldHashesOf(record: Plain, strip: (meta: Plain) => Plain, metaKey: string | null): Record<string, string> {
  const out: Record<string, string> = {}
  for (const key of Object.keys(record).sort()) {
    if (key === 'field_hashes' || key === 'record_hash') continue
    const value = key === metaKey ? strip(record[key] as Plain) : record[key]
    out[key] = hashJson(value)
  }
  return out
}

/** Compares stored field hashes with recomputed ones, naming each field that differs. */
function compareFields(stored: Record<string, string | undefined>, actual: Record<string, string>): IntegrityProblem[] {
  const problems: IntegrityProblem[] = []
  for (const key of new Set([...Object.keys(stored), ...Object.keys(actual)])) {
    if (stored[key] === actual[key]) continue
    problems.push({field: key, message: stored[key] === undefined ? 'field was added' : actual[key] === undefined ? 'field was removed' : 'field changed (hash mismatch)'})
  }
  return problems
}

function withoutKeys(object: Plain, keys: string[]): Plain {
  const copy = {...object}
  for (const key of keys) delete copy[key]
  return copy
}

// Snapshots: meta.field_hashes, meta.record_hash

const stripSnapshotMeta = (meta: Plain): Plain => withoutKeys(meta, ['field_hashes', 'record_hash'])

export function sealSnapshot(snapshot: Snapshot): Snapshot {
  const sealed = structuredClone(snapshot)
  sealed.meta = stripSnapshotMeta(sealed.meta) as Snapshot['meta']
  sealed.meta.field_hashes = fieldHashesOf(sealed as unknown as Plain, stripSnapshotMeta, 'meta')
  sealed.meta.record_hash = snapshotHash(sealed)
  return sealed
}

export function snapshotHash(snapshot: Snapshot): string {
  return hashJson({...snapshot, meta: withoutKeys(snapshot.meta, ['record_hash'])})
}

export function verifySnapshot(snapshot: Snapshot): IntegrityProblem[] {
  const problems = compareFields(snapshot.meta?.field_hashes ?? {}, fieldHashesOf(snapshot as unknown as Plain, stripSnapshotMeta, 'meta'))
  if (snapshot.meta?.record_hash !== snapshotHash(snapshot)) {
    if (problems.length === 0) problems.push({field: 'meta.field_hashes', message: 'the record hash does not match (field hashes were edited)'})
  }
  return problems
}

// Spec versions: meta.field_hashes, meta.content_hash

const stripSpecMeta = (meta: Plain): Plain => withoutKeys(meta, ['field_hashes', 'content_hash'])

export function specContentHash(spec: CanonicalSpec): string {
  return hashJson({...spec, meta: withoutKeys(spec.meta, ['content_hash'])})
}

export function sealSpec(spec: CanonicalSpec): CanonicalSpec {
  const sealed = structuredClone(spec)
  const {field_hashes: _f, content_hash: _c, ...meta} = sealed.meta
  sealed.meta = {...meta, content_hash: ''}
  sealed.meta.field_hashes = fieldHashesOf(sealed as unknown as Plain, stripSpecMeta, 'meta')
  sealed.meta.content_hash = specContentHash(sealed)
  return sealed
}

export function verifySpec(spec: CanonicalSpec): IntegrityProblem[] {
  const problems = compareFields(spec.meta?.field_hashes ?? {}, fieldHashesOf(spec as unknown as Plain, stripSpecMeta, 'meta'))
  if (spec.meta?.content_hash !== specContentHash(spec) && problems.length === 0) {
    problems.push({field: 'meta.content_hash', message: 'the content hash does not match'})
  }
  return problems
}

// Evidence: field_hashes, record_hash

const identity = (meta: Plain): Plain => meta

export function evidenceHash(evidence: Evidence): string {
  return hashJson(withoutKeys(evidence as unknown as Plain, ['record_hash']))
}

export function sealEvidence(evidence: Evidence): Evidence {
  const sealed = withoutKeys(structuredClone(evidence) as unknown as Plain, ['record_hash', 'field_hashes']) as unknown as Evidence
  sealed.field_hashes = fieldHashesOf(sealed as unknown as Plain, identity, null)
  sealed.record_hash = evidenceHash(sealed)
  return sealed
}

export function verifyEvidence(evidence: Evidence): IntegrityProblem[] {
  const problems = compareFields(evidence.field_hashes ?? {}, fieldHashesOf(evidence as unknown as Plain, identity, null))
  if (evidence.record_hash !== evidenceHash(evidence) && problems.length === 0) problems.push({field: 'field_hashes', message: 'the record hash does not match (field hashes were edited)'})
  return problems
}
