import {PipeError} from '../errors.js'
import {checkpoint, rollback} from '../vcs/git.js'
import type {StepHandler} from './types.js'
import {bool, list, nullable, obj, str} from './outputs.js'

interface CheckpointOutput {
  commit: string
}

export const git: StepHandler<'git'> = {
  kind: 'git',
  summary: 'checkpoint: commit the workspace; rollback: return to a checkpoint',
  outcomes: () => ['success'],
  changesSpec: false,
  safeToRetry: false,
  outputsSchema: () => obj({checkpoint: obj({commit: str, parent: nullable(str), branch: str, files: list(str), empty: bool}), rollback: obj({from: nullable(str), to: str, files: list(str)})}),
  async run({step, run, cwd, history}) {
    if (step.action === 'checkpoint') {
      const result = await checkpoint(cwd, {
        message: step.message ?? `pipe: ${run.run_id} ${step.id}`,
        allowDirty: step.allow_dirty ?? false,
        ...(step.branch ? {branch: `pipe/${run.run_id}`} : {}),
      })
      return {
        type: 'done',
        outcome: 'success',
        reason: `checkpoint ${result.commit.slice(0, 12)} on ${result.branch || 'HEAD'} (${result.files.length} file(s) changed)`,
        outputs: {checkpoint: result},
      }
    }
    const target = step.to
      ? [...history.snapshots].reverse().find((s) => s.step.name === step.to && (s.outputs as {checkpoint?: CheckpointOutput}).checkpoint)
      : [...history.snapshots].reverse().find((s) => (s.outputs as {checkpoint?: CheckpointOutput}).checkpoint)
    const commit = (target?.outputs as {checkpoint?: CheckpointOutput} | undefined)?.checkpoint?.commit
    if (!commit) {
      throw new PipeError('E_STATE', step.to ? `step "${step.to}" has made no checkpoint in this run` : 'this run has made no checkpoint to roll back to', {
        hint: 'Put a git step with action: checkpoint before the rollback.',
      })
    }
    const result = await rollback(cwd, commit)
    return {
      type: 'done',
      outcome: 'success',
      reason: `rolled back to ${commit.slice(0, 12)} (${result.files.length} file(s) restored)`,
      inputs: {checkpoint_step: target!.step.name, checkpoint_seq: target!.step.seq},
      outputs: {rollback: result},
    }
  },
}
