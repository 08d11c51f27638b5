/**
 * A person's decision at a gate under the policy's approvals rules (issue 40): who may vote, each
 * vote recorded, and the gate opened once `required` distinct people approved. pipe review, pipe
 * confirm and pipe answer go through it, and so may the view's buttons and a budget grant: the
 * checks live here and in policy/approvals.ts, never in a command.
 */
import {PipeError} from '../../errors.js'
import type {RunOutcome} from '../../engine/engine.js'
import {approvalRule, checkApproval, stillToVote, type AppliedRule, type GateKind, type Person} from '../../policy/approvals.js'
import {defaultPolicy} from '../../policy/policy.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord, SignedDecision} from '../../types/run.js'
import {signDecision} from '../../util/decision-signature.js'
import {hashJson} from '../../util/hash.js'
import {redactDeep} from '../../util/redact.js'
import {decisionKey, type DecisionKey} from '../attest/keys.js'
import {currentPerson} from '../identity.js'
import {holdRunPatiently} from './hold-run.js'
import {policyOrThrow, waitingFor, type SessionOptions} from './shared.js'

type Pending = NonNullable<RunRecord['pending']>
export type Vote = NonNullable<Pending['votes']>[number]

export interface Ballot {
  /** A budget pause is no gate of the approvals rules: its grant is only signed here. */
  kind: GateKind | 'budget'
  /** What the person says, as recorded: go, hold, drop, yes, no, answered. */
  decision: string
  /** Whether it counts toward opening the gate; a refusal decides at once. */
  approve: boolean
  note?: string
}

/** The hash of the gate as a person is shown it: what they vote on, not who voted before them. */
export function shownHash(pending: Pending): string {
  const {kind, step, since, reason, questions, action} = pending
  return hashJson({kind, step, since, reason, ...(questions ? {questions} : {}), ...(action ? {action} : {})})
}

/** The approvals rule of the gate a run waits at, under the policy the run runs with; null when none applies. */
export async function gateRule(record: RunRecord, cwd: string): Promise<AppliedRule | null> {
  const pending = record.status === 'awaiting_input' ? record.pending : undefined
  if (!pending) return null
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, cwd) : defaultPolicy()
  // Votes are counted under the rules the run started with, as its resume would check them: never under an edited file's.
  if (policy.version !== record.policy_version)
    throw new PipeError(
      'E_CONFLICT',
      `the policy changed since run ${record.run_id} started (${record.policy_version} -> ${policy.version}); its approvals rules are the ones it started with`,
      {
        hint: 'Restore the policy as it was, or start a new run under the new policy.',
      },
    )
  return approvalRule(policy, {step: pending.step, kind: pending.kind})
}

/**
 * `go` (the decision that continues the run, recorded as by `user`) when the gate has no rule, when
 * the vote is a refusal, or when it is the approval that meets the rule; otherwise the vote is
 * recorded and the run stays paused, saying who may still vote. Every decision a person makes
 * passes here, so here it is signed when they have a signing key (`signed`, for the line that
 * records it): from the command line, the view and a budget grant alike.
 */
export async function castVote(
  options: SessionOptions & {runId: string; opened?: RunStore; env?: NodeJS.ProcessEnv; as?: string},
  ballot: Ballot,
  go: (user?: string, signed?: SignedDecision) => Promise<RunOutcome>,
): Promise<RunOutcome> {
  const store = options.opened ?? (await openStore(storeLocation(options.cwd, options.store), 'existing'))
  const first = await store.readRun(options.runId)
  const shown = waitingFor(first, ballot.kind)
  const env = options.env ?? process.env
  // Read before anything is recorded: a key that is named but unreadable stops the decision.
  const signer = await decisionKey(env)
  const person = currentPerson(options.cwd, env)
  if (options.as !== undefined) person.name = await decidingAs(first, options, signer, options.as)
  const sign = (at: string): SignedDecision | undefined =>
    signer ? signed(signer, {run_id: options.runId, step: shown.step, ballot, shown_sha256: shownHash(shown), by: person, at}) : undefined
  const rule = await gateRule(first, options.cwd)
  if (!rule) return go(undefined, sign((options.now ?? (() => new Date()))().toISOString()))
  // The gate met its rule but its opener failed (an unset secret, a changed cassette): the hint says to run the same vote again, so one who approved may open it (recordVote checks it under the lock).
  const cast = first.pending?.votes ?? []
  const reopening = ballot.approve && approvalsOf(cast) >= rule.required && cast.some((v) => v.by.id === person.id && approving(v.decision))
  const refused = reopening ? null : checkApproval(rule, person, first, ballot.approve)
  if (refused) throw refusal(options.runId, rule, refused)
  const at = (options.now ?? (() => new Date()))()
  const vote: Vote = {
    by: person,
    at: at.toISOString(),
    decision: ballot.decision,
    ...(ballot.note ? {note: ballot.note} : {}),
    shown_sha256: shownHash(shown),
  }
  const after = await recordVote(store, options.runId, rule, shown, vote, ballot.approve, sign(vote.at))
  if (after === 'opens' || !ballot.approve) return go(person.id)
  const approvals = approvalsOf(after.pending?.votes ?? [])
  return {
    run_id: after.run_id,
    feature_id: after.feature_id,
    status: after.status,
    spec_version: after.spec_version ?? null,
    steps_run: 0,
    reason: `${approvals} of ${rule.required} approvals under the policy's approvals.${rule.name}; may still approve: ${stillToVote(rule, after.pending?.votes ?? [], after.started_by?.id).join(', ')}`,
    ...(after.pending ? {pending: after.pending} : {}),
  }
}

/**
 * A decision given to a waiting run outside a vote (pipe resume --decision or --answers, at a gate
 * no approvals rule governs), signed as castVote signs one; undefined without a key, or when the
 * run waits for something else (a redrive's decision decides no gate).
 */
export async function signOutsideVote(
  record: RunRecord,
  ballot: Ballot,
  options: {cwd: string; env?: NodeJS.ProcessEnv | undefined; now?: (() => Date) | undefined},
): Promise<SignedDecision | undefined> {
  const pending = record.status === 'awaiting_input' ? record.pending : undefined
  if (!pending || pending.kind !== ballot.kind) return undefined
  const env = options.env ?? process.env
  const signer = await decisionKey(env)
  if (!signer) return undefined
  const at = (options.now ?? (() => new Date()))().toISOString()
  return signed(signer, {run_id: record.run_id, step: pending.step, ballot, shown_sha256: shownHash(pending), by: currentPerson(options.cwd, env), at})
}

/**
 * The decision as signed: its note redacted first, as the store redacts every line it writes, so
 * that the line keeps exactly the text the signature covers.
 */
function signed(signer: DecisionKey, d: {run_id: string; step: string; ballot: Ballot; shown_sha256: string; by: Person; at: string}): SignedDecision {
  const body = redactDeep({
    run_id: d.run_id,
    step: d.step,
    decision: d.ballot.decision,
    ...(d.ballot.note ? {note: d.ballot.note} : {}),
    shown_sha256: d.shown_sha256,
    by: {...d.by},
    at: d.at,
  })
  return signDecision(body, signer.key)
}

/**
 * --as NAME: the person decides under the name of a key the run's policy trusts, and only when
 * the key they sign with is that key; the name is recorded beside their identity.
 */
async function decidingAs(record: RunRecord, options: SessionOptions, signer: DecisionKey | null, name: string): Promise<string> {
  const refuse = (why: string, hint: string): PipeError => new PipeError('E_INVALID_ARGS', `--as ${name}: ${why}; nothing was recorded`, {hint})
  if (!signer)
    throw refuse(
      'you have no signing key to prove it (PIPE_SIGNING_KEY is not set and pipe keys generate made no default key)',
      `Make one with pipe keys generate, have its entry added to the policy's attestation.trusted_keys as name: ${name}, then decide again with --as ${name}.`,
    )
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
  const trusted = policy.policy.attestation?.trusted_keys ?? []
  const entry = trusted.find((k) => k.name === name)
  const where = record.policy_path ?? 'the built-in default policy'
  if (!entry)
    throw refuse(
      `no key of ${where} is named ${name} (attestation.trusted_keys names ${trusted.length > 0 ? trusted.map((k) => k.name).join(', ') : 'none'})`,
      `Decide without --as, or have your key (pipe keys list --json) added to ${where} under attestation.trusted_keys as name: ${name}.`,
    )
  if (entry.id !== signer.id)
    throw refuse(
      `the key named ${name} in ${where} is ${entry.id}, but you sign with ${signer.id} (${signer.file})`,
      `Sign with the key ${name} holds (PIPE_SIGNING_KEY=PATH), or decide without --as.`,
    )
  if (entry.revoked === true)
    throw refuse(`the key named ${name} is revoked in ${where}`, `Decide without --as, or with a key ${where} trusts and has not revoked.`)
  return name
}

const approvalsOf = (votes: readonly Vote[]): number => votes.filter((v) => approving(v.decision)).length
const APPROVING = new Set(['go', 'yes', 'answered'])
/** Whether a recorded decision counts toward opening its gate: a budget grant's names its amount (`grant +20000 tokens`). */
const approving = (decision: string): boolean => APPROVING.has(decision) || decision.startsWith('grant ')

function refusal(runId: string, rule: AppliedRule, why: string): PipeError {
  return new PipeError('E_POLICY_DENIED', why, {
    hint: `pipe runs show ${runId} says who has voted and who may still; the rule is approvals.${rule.name} in the policy the run started with.`,
  })
}

/**
 * The vote on the run's record and timeline, under the run's lock, checked again there (another
 * person's vote, or the run moving on, may have come between): the record after it, or 'opens'
 * when this approval met the rule, so that exactly one voter continues the run.
 */
async function recordVote(
  store: RunStore,
  runId: string,
  rule: AppliedRule,
  shown: Pending,
  vote: Vote,
  approve: boolean,
  signature: SignedDecision | undefined,
): Promise<RunRecord | 'opens'> {
  // Another voter holds the run only for a read and a write: wait for it, briefly.
  const release = await holdRunPatiently(store, runId, {waitMs: 5000})
  try {
    const record = await store.readRun(runId)
    const pending = record.status === 'awaiting_input' ? record.pending : undefined
    if (!pending || pending.kind !== shown.kind || pending.step !== shown.step || pending.since !== shown.since)
      throw new PipeError(
        'E_STATE',
        `run ${runId} moved on since ${vote.by.id} was shown its ${shown.kind} at step ${shown.step} (it is now ${record.status}); the vote was not taken`,
        {
          hint: `pipe runs show ${runId} shows where it is now.`,
        },
      )
    const votes = pending.votes ?? []
    const met = approvalsOf(votes) >= rule.required
    // The gate met its rule but was not opened (the opener failed): one who approved may open it again.
    if (met && approve && votes.some((v) => v.by.id === vote.by.id && approving(v.decision))) return 'opens'
    if (met)
      throw new PipeError(
        'E_STATE',
        `run ${runId}'s ${shown.kind} at step ${shown.step} already has its ${rule.required} approval(s) and is going on; the vote was not taken`,
        {
          hint: `pipe runs show ${runId} shows where it is now.`,
        },
      )
    const refused = checkApproval(rule, vote.by, record, approve)
    if (refused) throw refusal(runId, rule, refused)
    // The approvals that open a gate approve one thing: a budget grant's amount, which the first approval proposed.
    const proposed = votes.find((v) => approving(v.decision))
    if (approve && proposed && proposed.decision !== vote.decision)
      throw new PipeError(
        'E_CONFLICT',
        `${proposed.by.id} approved "${proposed.decision}" at run ${runId}'s ${shown.kind} of step ${shown.step}, and the approvals under the policy's approvals.${rule.name} must agree; "${vote.decision}" was not taken`,
        {hint: `Approve the same (pipe runs show ${runId} shows each vote), or refuse it.`},
      )
    const count = approvalsOf(votes) + (approve ? 1 : 0)
    const note = vote.note ? `; note: ${vote.note}` : ''
    const updated = await store.updateRun(
      runId,
      (r) => {
        r.pending = {...r.pending!, votes: [...(r.pending!.votes ?? []), vote]}
        r.updated_at = vote.at
      },
      {
        at: vote.at,
        event: 'vote_cast',
        step: shown.step,
        by: vote.by.id,
        decision: vote.decision,
        reason: `${vote.by.id} (${vote.by.user}@${vote.by.host}) voted ${vote.decision} under the policy's approvals.${rule.name}: ${count} of ${rule.required} approvals${note}; shown ${vote.shown_sha256}`,
        ...(signature ? {signed: signature} : {}),
      },
    )
    return approve && count === rule.required ? 'opens' : updated
  } finally {
    await release()
  }
}

/** Who has voted at the gate a run waits at, and who may still, for runs show and the view; null without a rule. */
export async function gateVotes(record: RunRecord, cwd: string): Promise<{rule: string; required: number; votes: Vote[]; may_still: string[]} | null> {
  const rule = await gateRule(record, cwd).catch(() => null)
  if (!rule) return null
  const votes = record.pending?.votes ?? []
  return {rule: rule.name, required: rule.required, votes, may_still: stillToVote(rule, votes, record.started_by?.id)}
}

export type {Person}
