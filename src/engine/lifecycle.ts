/**
 * The one run lifecycle that unifies the seeds' state machines: pending -> running, which ends in
 * succeeded, failed or cancelled, or pauses in awaiting_input (answers, a review), or stops as
 * interrupted (a signal, a crash) or blocked (needs a person to intervene). Paused, interrupted
 * and blocked runs resume into running. A failed run stays failed unless a person redrives it
 * (pipe resume): failed -> running is legal only as a redrive; succeeded and cancelled are final.
 */
import {PipeError} from '../errors.js'
import type {RunStatus} from '../types/run.js'

const allowed: Record<RunStatus, readonly RunStatus[]> = {
  pending: ['running', 'cancelled', 'failed'],
  running: ['awaiting_input', 'succeeded', 'failed', 'cancelled', 'interrupted', 'blocked'],
  awaiting_input: ['running', 'cancelled'],
  interrupted: ['running', 'cancelled'],
  blocked: ['running', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
}

/** Statuses a person can redrive from: the step that stopped the run runs again. */
export const REDRIVABLE_STATUSES: readonly RunStatus[] = ['failed', 'blocked']

/** Transitions that only a redrive may take. */
const onlyByRedrive: Partial<Record<RunStatus, readonly RunStatus[]>> = {failed: ['running']}

export const FINAL_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled']

export function isFinal(status: RunStatus): boolean {
  return FINAL_STATUSES.includes(status)
}

export function isRedrivable(status: RunStatus): boolean {
  return REDRIVABLE_STATUSES.includes(status)
}

export function canTransition(from: RunStatus, to: RunStatus, redrive = false): boolean {
  return allowed[from].includes(to) || (redrive && (onlyByRedrive[from] ?? []).includes(to))
}

export function assertTransition(runId: string, from: RunStatus, to: RunStatus, redrive = false): void {
  if (!canTransition(from, to, redrive)) {
    throw new PipeError('E_STATE', `run ${runId} cannot go from ${from} to ${to}`, {
      hint:
        from === 'failed'
          ? `Redrive it from the failed step with pipe resume ${runId}, start a new one with pipe run, or pipe replay it.`
          : isFinal(from)
            ? `The run has ended (${from}); start a new one with pipe run, or pipe replay it.`
            : 'pipe runs show RUN shows what the run is waiting for.',
    })
  }
}
