/**
 * A step's committed snapshot, as every store assembles it from a StepCommit: the ids the store
 * gave its spec version and evidence filled in, the records it names bound by the hash of their
 * stored text, sealed. And the commit hash that tells a redriven commit from another one.
 */
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {canonicalJson, sha256} from '../../util/hash.js'
import {sealSnapshot} from './integrity.js'
import type {StepCommit} from '../types.js'

/** The snapshot of a commit with the ids its records took: spec_version_out (in its outputs too) and the evidence links. */
export function committedSnapshot(base: Snapshot, spec: CanonicalSpec | null, links: Snapshot['evidence_links']): Snapshot {
  const version = spec?.meta.spec_version ?? null
  return {
    ...base,
    spec_version_out: version,
    outputs: version ? {...base.outputs, spec_version_out: version} : base.outputs,
    evidence_links: [...base.evidence_links, ...links],
  }
}

/** The ids a snapshot binds, in the order its binds list them: the spec versions in and out, then each evidence link. */
export function boundIds(snapshot: Snapshot): string[] {
  const ids: string[] = []
  for (const id of [snapshot.spec_version_in, snapshot.spec_version_out, ...snapshot.evidence_links.map((l) => l.evidence_id)])
    if (id && !ids.includes(id)) ids.push(id)
  return ids
}

/** The snapshot as stored: binding each record it names (`hashOf`: the hash of its stored text), sealed (not checked again: see records.ts). */
export function sealCommitted(snapshot: Snapshot, hashOf: (id: string) => string): Snapshot {
  const binds: Record<string, string> = {}
  for (const id of boundIds(snapshot)) binds[id] = hashOf(id)
  const stored = sealSnapshot({...snapshot, meta: {...snapshot.meta, binds}})
  return stored
}

/** What a commit records, without the ids its records took: two commits of one step are the same commit when these are equal. */
export function commitHash(commit: StepCommit): string {
  return sha256(
    canonicalJson({
      run_id: commit.run_id,
      seq: commit.seq,
      step: commit.step,
      recorded_at: commit.recorded_at,
      snapshot: commit.snapshot,
      spec: commit.spec ? {draft: commit.spec.draft} : null,
      evidence: commit.evidence.map((item) => ({draft: item.draft, link: item.link})),
    }),
  )
}
