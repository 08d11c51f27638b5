/** pipe rollback: undoing an applied edit step, or returning a blocked run's workspace to its checkpoint, by hand. */
import {PipeError} from '../../errors.js'
import {defaultPolicy} from '../../policy/policy.js'
import {views} from '../../steps/registry.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunRecord} from '../../types/run.js'
import {currentUser} from '../../util/user.js'
import {type SessionOptions, policyOrThrow, guarding} from './shared.js'

export interface RollbackResult {
  run_id: string
  step: string
  seq: number
  files: Array<{path: string; restored: 'deleted' | 'reverted'}>
}

export async function rollbackEditSession(options: SessionOptions & {runId: string; step?: string; seq?: number}): Promise<RollbackResult> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const appliedEdit = views.edit.applied
  const edits = snapshots.filter((s) => appliedEdit.of(s) !== undefined)
  const target = [...edits]
    .reverse()
    .find((s) => (options.seq !== undefined ? s.step.seq === options.seq : options.step === undefined || s.step.name === options.step))
  if (!target) {
    throw new PipeError(
      'E_INVALID_ARGS',
      `run ${options.runId} has no applied edit${options.step ? ` from step "${options.step}"` : options.seq !== undefined ? ` with seq ${options.seq}` : ''}`,
      {
        hint: `${edits.length ? `Its edits: ${edits.map((s) => `${s.step.name} (#${s.step.seq})`).join(', ')}.` : 'Only edit steps that applied can be undone.'}${
          snapshots.some((s) => views.git.checkpoint.of(s) !== undefined)
            ? ` An agent's changes are undone by returning the blocked run to its checkpoint: pipe rollback ${options.runId} --checkpoint --note TEXT`
            : ''
        }`,
      },
    )
  }
  const already = (await store.readEvents(options.runId)).some((e) => e.event === 'edit_reverted' && e.seq === target.step.seq)
  if (already)
    throw new PipeError('E_STATE', `the edit of step "${target.step.name}" (#${target.step.seq}) was already undone`, {
      hint: `pipe runs show ${options.runId} shows when.`,
    })
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
  const release = await store.acquireRun(options.runId)
  try {
    const {revertEdit} = await import('../../edit/workspace.js')
    const files = appliedEdit.of(target)!.files
    const restored = await revertEdit(guarding(policy, store), record.workspace ?? options.cwd, files)
    await store.appendEvent(options.runId, {
      at: new Date().toISOString(),
      event: 'edit_reverted',
      step: target.step.name,
      seq: target.step.seq,
      by: currentUser(),
      reason: `restored ${restored.map((r) => `${r.path} (${r.restored})`).join(', ')}`,
    })
    return {run_id: options.runId, step: target.step.name, seq: target.step.seq, files: restored}
  } finally {
    await release()
  }
}

export interface CheckpointRollbackResult {
  run_id: string
  /** The checkpoint step and its snapshot. */
  step: string
  seq: number
  from: string | null
  to: string
  files: string[]
  /** The stash commit holding what the working tree had (changed and untracked files), kept before it was discarded. */
  saved?: string
  /** The commands that continue: the parent's skip of this task, else a redrive of the run. */
  next: string[]
}

/**
 * pipe rollback RUN --checkpoint: a person returns a blocked run's workspace to the commit its last
 * git checkpoint made (seed 001: BLOCKED -> ROLLBACK -> idle). The run stays blocked, its working
 * tree clean at the checkpoint, ready to be skipped (a task: pipe resume PARENT --skip KEY) or run
 * again; who, why and from which commit to which go into its record and timeline.
 */
export async function rollbackToCheckpointSession(options: SessionOptions & {runId: string; note: string}): Promise<CheckpointRollbackResult> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const runId = options.runId
  const record = await store.readRun(runId)
  const made = views.git.checkpoint
  const target = (await store.readSnapshots(runId)).findLast((s) => s.run_id === runId && made.of(s) !== undefined)
  if (!target) {
    throw new PipeError('E_INVALID_ARGS', `run ${runId} has made no checkpoint to roll back to`, {
      hint: `Only a run whose git step (action: checkpoint) made one can return to it; for a foreach, name the task's own run (pipe runs show ${runId} lists its child runs).`,
    })
  }
  const commit = made.of(target)!.commit
  const assertBlocked = (r: typeof record): void => {
    if (r.status !== 'blocked')
      throw new PipeError('E_STATE', `run ${runId} is ${r.status}, not blocked; only a blocked run is rolled back to its checkpoint by hand`, {
        hint: `pipe runs show ${runId} shows its state.`,
      })
    const done = (r.rollbacks ?? []).find((b) => b.seq === target.step.seq)
    if (done)
      throw new PipeError('E_STATE', `run ${runId} was rolled back to checkpoint ${commit} already (by ${done.by} at ${done.at})`, {
        hint: `Nothing was changed. ${continueCommands(r, done.note).join(', or ')} goes on.`,
      })
  }
  assertBlocked(record)
  if (options.note.trim() === '')
    throw new PipeError('E_INVALID_ARGS', 'a rollback needs a reason: --note TEXT is recorded with it', {
      hint: `pipe rollback ${runId} --checkpoint --note "why"`,
    })
  const release = await store.acquireRun(runId)
  try {
    const current = await store.readRun(runId)
    assertBlocked(current)
    const {rollback} = await import('../../vcs/git.js')
    // What the person (or anyone) left in the working tree since is kept in a stash, never discarded unasked.
    const result = await rollback(current.workspace ?? options.cwd, commit, current.workspace_git, {save: `pipe: before the rollback of ${runId} to ${commit}`})
    const at = new Date().toISOString()
    const by = currentUser()
    const entry = {
      step: target.step.name,
      seq: target.step.seq,
      from: result.from,
      to: result.to,
      files: result.files,
      ...(result.saved ? {saved: result.saved} : {}),
      by,
      at,
      note: options.note,
    }
    await store.updateRun(
      runId,
      (r) => {
        r.rollbacks = [...(r.rollbacks ?? []), entry]
        r.updated_at = at
      },
      {
        at,
        event: 'rolled_back',
        step: target.step.name,
        seq: target.step.seq,
        by,
        reason: `workspace rolled back from ${result.from ?? 'no commit'} to checkpoint ${result.to} (${result.files.length} file(s) restored${result.saved ? `; what was discarded is saved in stash ${result.saved}` : ''}): ${options.note}`,
      },
    )
    const {by: _by, at: _at, note: _note, ...what} = entry
    return {run_id: runId, ...what, next: continueCommands(current, options.note)}
  } finally {
    await release()
  }
}

/** What goes on after a task was rolled back: its parent, without it; a run of its own, redriven. */
function continueCommands(record: RunRecord, note: string): string[] {
  const link = record.parent
  if (!link) return [`pipe resume ${record.run_id}`]
  return [`pipe resume ${link.run_id} --skip ${shellWord(link.key ?? String(link.index ?? 0))} --note ${shellWord(note)}`]
}

/** One shell word, as a person would paste it. */
function shellWord(text: string): string {
  return /^[\w.:@/-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`
}
