/**
 * The one run lifecycle that unifies the seeds' state machines: pending -> running, which ends in
 * succeeded, failed or cancelled, or pauses in awaiting_input (answers, a review), or stops as
 * interrupted (a signal, a crash) or blocked (needs a person to intervene). Paused, interrupted
 * and blocked runs resume into running.
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

export const FINAL_STATUSES: readonly RunStatus[] = ['succeeded', 'failed', 'cancelled']

export function isFinal(status: RunStatus): boolean {
  return FINAL_STATUSES.includes(status)
}

export function canTransition(from: RunStatus, to: RunStatus): boolean {
  return allowed[from].includes(to)
}

export function assertTransition(runId: string, from: RunStatus, to: RunStatus): void {
  if (!canTransition(from, to)) {
    throw new PipeError('E_STATE', `run ${runId} cannot go from ${from} to ${to}`, {
      hint: isFinal(from) ? `The run has ended (${from}); start a new one with pipe run, or pipe replay it.` : 'pipe runs show RUN shows what the run is waiting for.',
    })
  }
}
