/**
 * Whether a run's pending gate has a deadline that passed and a policy action for it (confirm's
 * on_timeout, or the gate's approvals rule's, fixed in the pending record when the run paused).
 * Pure: the sessions that touch a run (resume, confirm, review, answer, runs show, pipe worker) ask
 * it, and ./confirm-deadline.ts acts.
 */
import type {RunRecord} from '../../types/run.js'

export interface DueTimeout {
  kind: 'confirm' | 'review' | 'answers' | 'budget'
  step: string
  deadline: string
  /** The approvals rule that set the deadline; absent: the policy's confirm.timeout_s. */
  rule?: string
  /** absent: the run keeps waiting (on_timeout: wait), and only says so. */
  action?: 'deny' | 'cancel'
}

export function dueTimeout(record: RunRecord, now: Date): DueTimeout | null {
  const pending = record.status === 'awaiting_input' ? record.pending : undefined
  if (!pending || pending.deadline === undefined) return null
  if (pending.deadline > now.toISOString()) return null
  return {
    kind: pending.kind,
    step: pending.step,
    deadline: pending.deadline,
    ...(pending.rule !== undefined ? {rule: pending.rule} : {}),
    ...(pending.on_timeout ? {action: pending.on_timeout} : {}),
  }
}

/** Who a policy's decision on a confirmation is recorded as (the `by` of its confirm_given or cancel line). */
export const POLICY_ACTOR = 'policy (confirm.on_timeout)'

/** Who the policy's decision is recorded as: pipe, naming the rule that fired. */
export function policyActor(due: Pick<DueTimeout, 'rule'>): string {
  return due.rule === undefined ? POLICY_ACTOR : `policy (approvals.${due.rule}.on_timeout)`
}

/** The policy key whose on_timeout acted, as errors and reasons name it. */
export function timeoutKey(due: Pick<DueTimeout, 'rule'>): string {
  return due.rule === undefined ? 'confirm.on_timeout' : `approvals.${due.rule}.on_timeout`
}

const GATE = {confirm: 'confirmation', review: 'review', answers: 'answers', budget: 'budget'} as const
const COMMAND = {
  confirm: 'pipe confirm RUN --yes|--no',
  review: 'pipe review RUN --decision go|hold|drop',
  answers: 'pipe answer RUN --file FILE',
  budget: 'pipe budget RUN --add-tokens N --note TEXT',
} as const

/** What the gate is called in reasons ("confirmation", "review", "answers"). */
export const gateName = (due: Pick<DueTimeout, 'kind'>): string => GATE[due.kind]

/** The run's status reason and timeline line once its deadline passed. */
export function deadlineReason(runId: string, due: DueTimeout): string {
  const head = `${gateName(due)} deadline passed at ${due.deadline}`
  if (due.action === 'deny') return `${head}; the policy's ${timeoutKey(due)}: deny refused it`
  if (due.action === 'cancel') return `${head}; the policy's ${timeoutKey(due)}: cancel cancelled the run`
  return `${head}; the run stays paused: ${COMMAND[due.kind].replace('RUN', runId)}`
}
