/**
 * The engine's side of recording a step: one call to the store's atomic commit (RunStore.commitStep).
 * How a store keeps a commit whole across crashes, and finishes one a crash interrupted, is the
 * store's business (the file store's protocol is in store/commit.ts).
 */
import type {CommitHook, Committed, RunStore, StepCommit} from '../store/types.js'

export type {Committed} from '../store/types.js'
export type Hook = CommitHook

/** What a step records, as the engine assembles it (see RunStore.commitStep). */
export type Journal = StepCommit

/** Records a step: its snapshot, spec version, evidence and timeline line, all or nothing. */
export async function commitStep(store: RunStore, journal: Journal, hook?: Hook): Promise<Committed> {
  return store.commitStep(journal, hook)
}

/** Finishes the commit a crash interrupted, if any (the caller holds the run). Whether anything changed. */
export async function recoverCommit(store: RunStore, runId: string, hook?: Hook, options: {lastSeq?: number} = {}): Promise<boolean> {
  return store.recover(runId, hook, options)
}

/** For a run that has ended: the same repair as a resume's, under the run's lock. */
export async function repairEndedRun(store: RunStore, runId: string): Promise<boolean> {
  return store.repairEndedRun(runId)
}
