/**
 * A gate's reminder (issue 40): remind_after_s after a run paused at a gate under an approvals
 * rule, the people who may still vote are reminded through the policy's webhook target
 * (remind_target), once per run, gate and pause: its key is the run, the step, the time the gate
 * paused and `reminder`. Whoever touches the run first sends it — a pipe worker's sweep, pipe runs
 * list, runs show, or a vote — under the run's lock, and records `reminder_sent` on its timeline; a
 * send that fails records nothing and is tried again by the next one.
 */
import {approvalRule, stillToVote} from '../../policy/approvals.js'
import {defaultPolicy} from '../../policy/policy.js'
import {notify} from '../../publish/notify.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {policyOrThrow} from './shared.js'

const keyOf = (record: RunRecord, pending: NonNullable<RunRecord['pending']>): string => `${record.run_id}:${pending.step}:${pending.since}:reminder`

/** Whether a run's gate may be due a reminder: the cheap part of the check, before its policy is read. */
export const mayRemind = (record: RunRecord): boolean => record.status === 'awaiting_input' && record.pending?.rule !== undefined

/** Sends the reminder of the gate `runId` waits at when it is due and not yet sent; true when this call sent it. */
export async function remindIfDue(store: RunStore, runId: string, now: Date, cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  const first = await store.readRun(runId)
  if (!mayRemind(first)) return false
  const pending = first.pending!
  const policy = first.policy_path ? await policyOrThrow(first.policy_path, cwd) : defaultPolicy()
  // The rules the run started with, or none: an edited policy reminds nobody of this run.
  if (policy.version !== first.policy_version) return false
  const rule = approvalRule(policy, {step: pending.step, kind: pending.kind})
  if (rule?.remind_after_s === undefined || rule.remind_target === undefined) return false
  const target = policy.policy.targets?.[rule.remind_target]
  if (!target) return false
  const due = new Date(new Date(pending.since).getTime() + Math.round(rule.remind_after_s * 1000))
  if (due > now) return false
  const key = keyOf(first, pending)
  let release: () => Promise<void>
  try {
    release = await store.acquireRun(runId)
  } catch (error) {
    // Held by another process (a vote, a worker): it, or the next one to touch the run, sends it.
    if ((error as {code?: string}).code === 'E_CONFLICT') return false
    throw error
  }
  try {
    const record = await store.readRun(runId)
    if (record.status !== 'awaiting_input' || record.pending?.since !== pending.since || record.pending.step !== pending.step) return false
    if ((await store.readEvents(runId)).some((e) => e.event === 'reminder_sent' && e.reason?.endsWith(`key ${key}`))) return false
    const votes = record.pending.votes ?? []
    const still = stillToVote(rule, votes, record.started_by?.id)
    const deadline = record.pending.deadline
    await notify(
      rule.remind_target,
      target,
      {
        key,
        title: `Run ${runId} waits at the ${pending.kind} of step ${pending.step}`,
        lines: [
          `${rule.required} approval(s) needed under the policy's approvals.${rule.name}; voted: ${votes.map((v) => v.by.id).join(', ') || 'nobody yet'}; may still vote: ${still.join(', ') || 'nobody'}`,
          ...(deadline ? [`Deadline: ${deadline}${record.pending.on_timeout ? ` (then: ${record.pending.on_timeout})` : ''}`] : []),
          `Waiting since ${pending.since}: ${pending.reason}`,
        ],
        fields: {
          run_id: runId,
          step: pending.step,
          gate: pending.kind,
          rule: rule.name,
          since: pending.since,
          ...(deadline ? {deadline} : {}),
          required: rule.required,
          voted: votes.map((v) => v.by.id),
          may_still_vote: still,
        },
      },
      env,
    )
    const at = now.toISOString()
    await store.appendEvent(runId, {
      at,
      event: 'reminder_sent',
      step: pending.step,
      by: `policy (approvals.${rule.name}.remind_after_s)`,
      reason: `reminded ${still.join(', ') || 'nobody'} through the policy's targets.${rule.remind_target}, ${rule.remind_after_s} s after the ${pending.kind} paused; key ${key}`,
    })
    return true
  } finally {
    await release()
  }
}
