/**
 * Recording a finished step so that a crash at any moment loses nothing and writes nothing twice.
 *
 * A step that writes more than its snapshot (a spec version, evidence) first writes a journal of
 * everything it is about to record, then each record, noting in the journal each id it tries
 * before trying it, then the snapshot, then drops the journal. The snapshot is the commit point.
 * On resume a journal whose snapshot is missing is finished from where it stopped: an id it tried
 * whose file holds exactly the record is reused, so no version is lost or written twice, and the
 * step itself is not run again.
 */
import type {EvidenceDraft, SpecDraft, Store, WriteIntent} from '../store/store.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'

export interface Journal {
  version: 1
  run_id: string
  seq: number
  step: string
  /** The time the records are stamped with, fixed so that a finished commit writes the same bytes. */
  recorded_at: string
  snapshot: Snapshot
  spec: {draft: SpecDraft; candidate?: string} | null
  evidence: Array<{draft: EvidenceDraft; link: Snapshot['evidence_links'][number]['type']; candidate?: string}>
}

export type Hook = (point: string) => Promise<void> | void

export interface Committed {
  snapshot: Snapshot
  spec: CanonicalSpec | null
}

export async function commitStep(store: Store, journal: Journal, hook: Hook = () => undefined): Promise<Committed> {
  const {run_id: runId, step} = journal
  const at = new Date(journal.recorded_at)
  const journaled = journal.spec !== null || journal.evidence.length > 0
  const intent = (item: {candidate?: string}): WriteIntent => ({
    ...(item.candidate ? {candidate: item.candidate} : {}),
    onCandidate: async (id) => {
      item.candidate = id
      await store.writeJournal(runId, journal)
      await hook(`id-reserved:${step}`)
    },
  })
  if (journaled) {
    // Name every id before taking any, so one journal write covers them all in the usual case.
    const needEvidence = journal.evidence.filter((item) => !item.candidate)
    if (needEvidence.length > 0) (await store.candidateIds('evidence', at, needEvidence.length)).forEach((id, i) => (needEvidence[i]!.candidate = id))
    if (journal.spec && !journal.spec.candidate) journal.spec.candidate = (await store.candidateIds('spec', at, 1))[0]!
    await store.writeJournal(runId, journal)
    await hook(`journal-written:${step}`)
  }
  const links: Snapshot['evidence_links'] = []
  for (const item of journal.evidence) {
    const evidence = await store.writeEvidence(item.draft, at, intent(item))
    links.push({type: item.link, evidence_id: evidence.evidence_id})
    await hook(`evidence-written:${step}`)
  }
  let spec: CanonicalSpec | null = null
  if (journal.spec) {
    spec = await store.writeSpec(journal.spec.draft, at, intent(journal.spec))
    await hook(`spec-written:${step}`)
  }
  const version = spec?.meta.spec_version ?? null
  const snapshot: Snapshot = {
    ...journal.snapshot,
    spec_version_out: version,
    outputs: version ? {...journal.snapshot.outputs, spec_version_out: version} : journal.snapshot.outputs,
    evidence_links: [...journal.snapshot.evidence_links, ...links],
  }
  await hook(`before-snapshot:${step}`)
  const stored = await store.writeSnapshot(snapshot)
  await hook(`snapshot-written:${step}`)
  if (journaled) await store.deleteJournal(runId)
  return {snapshot: stored, spec}
}

/** Finishes the commit a crash interrupted, if any. Returns whether there was one to finish. */
export async function recoverCommit(store: Store, runId: string, hook?: Hook): Promise<boolean> {
  const journal = (await store.readJournal(runId)) as Journal | null
  if (!journal) return false
  if (journal.version !== 1 || journal.run_id !== runId) {
    await store.deleteJournal(runId)
    return false
  }
  await commitStep(store, journal, hook)
  return true
}
