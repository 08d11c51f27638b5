import path from 'node:path'
import {declaredOutputsOfFile, outputsObjectSchema} from '../config/declared-outputs.js'
import {childFailure, childFile, childReason, childStopped} from './child-runs.js'
import {kindOutputsSchema, narrowed} from './output-schemas.js'
import type {KindOutputs, StepHandler} from './types.js'

export const pipeline: StepHandler<'pipeline'> = {
  kind: 'pipeline',
  summary: 'run another pipeline as one step: a child run whose status is the outcome',
  outcomes: () => ['success', 'fail', 'blocked'],
  failures: {fail: childFailure},
  changesSpec: false,
  // Running it again finds the child it started and continues it; a finished child is never run twice.
  safeToRetry: true,
  waitsForChildren: true,
  // outputs.outputs is typed from the child's own outputs: declaration (null unless the child succeeded).
  outputsSchema(step, pipeline) {
    const declared = declaredOutputsOfFile(path.resolve(pipeline.dir, step.file))
    return declared === undefined ? kindOutputsSchema('pipeline') : narrowed('pipeline', {outputs: outputsObjectSchema(declared, true)})
  },
  childPipelines: (step) => [{at: ['file'], file: step.file, ...(step.with ? {with: step.with, withAt: ['with']} : {})}],
  graph: {details: (step) => [`pipeline ${step.file}`]},
  async run({step, pipeline: loaded, children, signal}) {
    // `with:` was resolved by the engine: its values are the child's inputs.
    const child = await children.run({file: childFile(loaded, step.id, step.file), inputs: (step.with ?? {}) as never, signal})
    const reason = childReason(child)
    const outputs = {
      run_id: child.run_id,
      status: child.status,
      reason: child.reason ?? child.error?.message ?? child.status,
      last_step: child.last_step ?? null,
      spec_version: child.spec_version ?? null,
      outputs: child.status === 'succeeded' ? (child.outputs ?? null) : null,
    } satisfies KindOutputs<'pipeline'>
    if (child.status === 'succeeded') return {type: 'done', outcome: 'success', reason, outputs}
    if (childStopped(child)) {
      return {
        type: 'done',
        outcome: 'blocked',
        reason,
        outputs,
        end: {
          status: 'blocked',
          reason,
          code: 'E_ENDED',
          hint: `Deal with the child run (pipe runs show ${child.run_id}); pipe resume of this run then continues it.`,
        },
      }
    }
    return {type: 'done', outcome: 'fail', reason, outputs}
  },
}
