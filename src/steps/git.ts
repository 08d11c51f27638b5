import {PipeError} from '../errors.js'
import type {KindFinding} from '../config/kind-contract.js'
import type {CheckpointResult, RollbackResult} from '../vcs/git.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler} from './types.js'

// git itself is run code: loaded on a git step's first run, never to validate a pipeline.
const vcs = () => import('../vcs/git.js')

/** A checkpoint records `checkpoint`, a rollback `rollback`. */
export type GitOutputs = {checkpoint: CheckpointResult; rollback: RollbackResult}

const field = outputsOf<GitOutputs>()
export const checkpointMade = field('checkpoint')
export const rolledBack = field('rollback')

export const git: StepHandler<'git'> = {
  kind: 'git',
  summary: 'checkpoint: commit the workspace; rollback: return to a checkpoint',
  outcomes: () => ['success'],
  changesSpec: false,
  safeToRetry: false,
  references: (step) => (step.to !== undefined ? [{at: ['to'], target: step.to, what: 'rollback target'}] : []),
  // Both actions settle the working tree: a checkpoint commits it, a rollback returns it to one.
  workingTree: (step) => ({settles: true, ...(step.action === 'rollback' && step.to !== undefined ? {rollbackTo: step.to} : {})}),
  check(step, {pipeline}) {
    const out: KindFinding[] = []
    if (step.action === 'rollback' && step.to !== undefined) {
      const target = pipeline.steps.find((s) => s.id === step.to)
      if (target && !(target.kind === 'git' && target.action === 'checkpoint'))
        out.push({rule: 'rollback-target', at: ['to'], message: `rollback target "${step.to}" is not a git checkpoint step`})
    }
    for (const key of ['message', 'allow_dirty', 'branch'] as const) {
      if (step.action === 'rollback' && step[key] !== undefined)
        out.push({rule: 'rollback-target', at: [key], message: `${key} applies to checkpoint, not rollback`, key: true})
    }
    if (step.action === 'checkpoint' && step.to !== undefined)
      out.push({rule: 'rollback-target', at: ['to'], message: 'to applies to rollback, not checkpoint', key: true})
    return out
  },
  attestSubjects: (snapshot) => {
    const commit = checkpointMade.of(snapshot)?.commit
    return commit ? [{name: `git-commit/${snapshot.step.name}/${snapshot.step.seq}`, digest: {gitCommit: commit}}] : []
  },
  exportRole: {
    commit: (snapshot) => checkpointMade.of(snapshot)?.commit ?? rolledBack.of(snapshot)?.to,
  },
  async run({step, run, cwd, history}) {
    if (step.action === 'checkpoint') {
      const {checkpoint} = await vcs()
      const result = await checkpoint(cwd, {
        message: step.message ?? `pipe: ${run.run_id} ${step.id}`,
        allowDirty: step.allow_dirty ?? false,
        ...(step.branch ? {branch: `pipe/${run.run_id}`} : {}),
        repository: run.workspace_git,
        // `git log` leads from the commit to the run that made it (and pipe attest adds its statement as a note).
        trailers: [`Pipe-Run: ${run.run_id}`],
      })
      return {
        type: 'done',
        outcome: 'success',
        reason: `checkpoint ${result.commit.slice(0, 12)} on ${result.branch || 'HEAD'} (${result.files.length} file(s) changed)`,
        outputs: {checkpoint: result} satisfies Partial<GitOutputs> & KindOutputs<'git'>,
      }
    }
    const target = step.to
      ? [...history.snapshots].reverse().find((s) => s.step.name === step.to && checkpointMade.of(s))
      : [...history.snapshots].reverse().find((s) => checkpointMade.of(s))
    const commit = target ? checkpointMade.of(target)?.commit : undefined
    if (!commit) {
      throw new PipeError('E_STATE', step.to ? `step "${step.to}" has made no checkpoint in this run` : 'this run has made no checkpoint to roll back to', {
        hint: 'Put a git step with action: checkpoint before the rollback.',
      })
    }
    const {rollback} = await vcs()
    const result = await rollback(cwd, commit, run.workspace_git)
    return {
      type: 'done',
      outcome: 'success',
      reason: `rolled back to ${commit.slice(0, 12)} (${result.files.length} file(s) restored)`,
      inputs: {checkpoint_step: target!.step.name, checkpoint_seq: target!.step.seq},
      outputs: {rollback: result} satisfies Partial<GitOutputs> & KindOutputs<'git'>,
    }
  },
}
