/**
 * What the two composite kinds (pipeline, foreach) share: where a child pipeline's file is, and
 * what a child run's status means for the step that started it.
 */
import path from 'node:path'
import type {LoadedPipeline} from '../config/loaded.js'
import {stepDir} from '../config/positions.js'
import type {ChildResult, FailureOutcome} from './types.js'

/** The child pipeline's file: relative to the file that holds the step (like prompt and output_schema). */
export function childFile(loaded: LoadedPipeline, stepId: string, file: string): string {
  return path.resolve(stepDir(loaded, stepId), file)
}

/** Whether a child stopped for a person (or a signal) rather than finished: the parent stops at the step too. */
export function childStopped(result: {status: string}): boolean {
  return (
    result.status === 'blocked' ||
    result.status === 'awaiting_input' ||
    result.status === 'interrupted' ||
    result.status === 'running' ||
    result.status === 'pending'
  )
}

/** Why a child ended as it did, in one line. */
export function childReason(result: ChildResult): string {
  const why = result.error ? `${result.error.code}: ${result.error.message}` : (result.reason ?? result.status)
  // The child's id is in the item's run_id: a reason reaches prompts and goldens, and an id carries the date and the store's counter.
  return `child run ${result.status}${why === result.status ? '' : `: ${why}`}`
}

export const childFailure: FailureOutcome = {
  code: 'E_ENDED',
  hint: ({run_id, step}) =>
    `Read the child runs with pipe runs show ${run_id} (and pipe snapshot show ${run_id} --step ${step}); route the outcome with on: {fail: STEP} in the pipeline.`,
}
