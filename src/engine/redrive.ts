/**
 * Whether a stopped run can go on, and from where. A person's redrive (pipe resume of a failed or
 * blocked run) runs again the step whose snapshot stopped it; everything else that would only fail
 * the same way is refused before anything is written.
 */
import {PipeError} from '../errors.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {isFinal, isRedrivable} from './lifecycle.js'

export function assertResumable(record: RunRecord): void {
  if (isFinal(record.status) && !isRedrivable(record.status)) {
    throw new PipeError('E_STATE', `run ${record.run_id} has ended (${record.status}) and cannot be resumed`, {
      hint: `Start a new run, or pipe replay ${record.run_id} --from STEP.`,
    })
  }
}

/**
 * Where a redrive starts: the step of the snapshot that failed or blocked the run. A run that
 * failed with no such snapshot (a loop bound, a step missing from the pipeline), ended failed by an
 * end step, or ended on a failure it handled would fail again the same way, so it is refused.
 */
export function redrivePoint(record: RunRecord, own: readonly Snapshot[]): {seq: number; step: string} {
  const last = own.at(-1)
  const status = last?.decisions.at(-1)?.run_status
  const carried = (last?.errors.at(-1)?.details as {failed_step?: unknown} | undefined)?.failed_step
  if (last && status === 'failed' && typeof carried === 'string') {
    // Running the handling step again (a rollback) cannot undo a failure it only handled.
    throw new PipeError(
      'E_STATE',
      `run ${record.run_id} failed at step ${carried}, and the pipeline handled that at step ${last.step.name} and ended; running ${last.step.name} again would change nothing`,
      {
        hint: `Fix the cause and start a new run, or fork this one from the failed step: pipe replay ${record.run_id} --from ${carried}.`,
      },
    )
  }
  const ended = (last?.errors.at(-1)?.details as {ended_by?: unknown} | undefined)?.ended_by
  if (last && status === 'failed' && typeof ended === 'string') {
    throw new PipeError('E_STATE', `run ${record.run_id} was ended failed by its end step ${ended}; running it again would end it the same way`, {
      hint: `Fix what the end step's reason names and start a new run, or fork this one: pipe replay ${record.run_id} --from STEP.`,
    })
  }
  const retried = last !== undefined && (record.redrives ?? []).some((r) => r.seq === last.step.seq)
  if (last && !retried && (status === 'failed' || status === 'blocked')) return {seq: last.step.seq, step: last.step.name}
  const why = record.error ? ` (${record.error.code}: ${record.error.message})` : ''
  const loop = record.error?.code === 'E_LOOP_LIMIT'
  throw new PipeError(
    'E_STATE',
    `run ${record.run_id} ${record.status} before ${record.error?.step ? `step ${record.error.step}` : 'a step'} ran${why}; there is no failed step to run again`,
    {
      hint: loop
        ? `The bound is part of the pipeline, which a resumed run keeps. Start a new run, or fork this one with more answers: pipe replay ${record.run_id} --from STEP --answers FILE.`
        : `Start a new run, or fork this one: pipe replay ${record.run_id} --from STEP.`,
    },
  )
}

/** Whether pipe resume would redrive the run: the same judgement resume makes, without throwing. */
export function canRedrive(record: RunRecord, own: readonly Snapshot[]): boolean {
  try {
    redrivePoint(record, own)
    return true
  } catch {
    return false
  }
}
