/**
 * Whether a run's pending confirmation has a deadline that passed and a policy action for it
 * (confirm.on_timeout, fixed in the pending record when the run paused). Pure: the sessions that
 * touch a run (resume, confirm, runs show, pipe worker) ask it, and ./confirm-deadline.ts acts.
 */
import type {RunRecord} from '../../types/run.js'

export interface DueTimeout {
  step: string
  deadline: string
  /** absent: the run keeps waiting (on_timeout: wait), and only says so. */
  action?: 'deny' | 'cancel'
}

export function dueTimeout(record: RunRecord, now: Date): DueTimeout | null {
  const pending = record.pending
  if (record.status !== 'awaiting_input' || pending?.kind !== 'confirm' || pending.deadline === undefined) return null
  if (pending.deadline > now.toISOString()) return null
  return {step: pending.step, deadline: pending.deadline, ...(pending.on_timeout ? {action: pending.on_timeout} : {})}
}

/** Who a policy's decision is recorded as (the `by` of its confirm_given or cancel line). */
export const POLICY_ACTOR = 'policy (confirm.on_timeout)'

/** The run's status reason and timeline line once its deadline passed. */
export function deadlineReason(runId: string, due: DueTimeout): string {
  if (due.action === 'deny') return `confirmation deadline passed at ${due.deadline}; the policy's confirm.on_timeout: deny refused it`
  if (due.action === 'cancel') return `confirmation deadline passed at ${due.deadline}; the policy's confirm.on_timeout: cancel cancelled the run`
  return `confirmation deadline passed at ${due.deadline}; the run stays paused: pipe confirm ${runId} --yes|--no`
}
