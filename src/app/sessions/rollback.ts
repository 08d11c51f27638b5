/** pipe rollback: undoing an applied edit step by hand. */
import {PipeError} from '../../errors.js'
import {defaultPolicy} from '../../policy/policy.js'
import {views} from '../../steps/registry.js'
import {openStore, storeLocation} from '../../store/open.js'
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
        hint: edits.length ? `Its edits: ${edits.map((s) => `${s.step.name} (#${s.step.seq})`).join(', ')}.` : 'Only edit steps that applied can be undone.',
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
