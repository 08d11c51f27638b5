/** pipe review: a decision given to a run that waits at a review, and what the reviewer sees first. */
import {views} from '../../steps/registry.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunOutcome} from '../../engine/engine.js'
import {waitingFor, type Decision, type SessionOptions} from './shared.js'
import {resumeSession} from './resume.js'
import {applyPassedDeadline, tooLate} from './confirm-deadline.js'
import {castVote} from './vote.js'

export interface ReviewSession extends SessionOptions {
  runId: string
  decision: Decision
  note?: string
  /** Go on with a replayed cassette that changed since the run started (recorded). */
  acceptCassette?: boolean
  /** Decide under the name of a key the run's policy trusts (--as NAME): only with that key as one's signing key. */
  as?: string
}

export async function reviewSession(options: ReviewSession): Promise<RunOutcome> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  // A decision after a deadline the policy acts on comes too late: the policy decided.
  const applied = await applyPassedDeadline(options)
  if (applied?.due.action) throw tooLate(options.runId, applied)
  const record = await store.readRun(options.runId)
  waitingFor(record, 'review')
  const ballot = {kind: 'review' as const, decision: options.decision, approve: options.decision === 'go', ...(options.note ? {note: options.note} : {})}
  const {as: _as, ...rest} = options
  return castVote(options, ballot, (user, signed) =>
    resumeSession({
      ...rest,
      ...(user !== undefined ? {user} : {}),
      ...(signed ? {signed} : {}),
      gateDecided: true,
      command: `pipe review ${options.runId} --decision ${options.decision}`,
    }),
  )
}

/** What a reviewer sees before deciding: the spec under review and its latest gate result. */
export async function reviewSummary(
  options: SessionOptions & {runId: string},
): Promise<{spec: import('../../types/spec.js').CanonicalSpec | null; gate: import('../../gates/evaluate.js').GateResult | null; reason: string}> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const gate = views.gate.result.latest(snapshots) ?? null
  const spec = record.spec_version ? await store.readSpec(record.spec_version) : null
  return {spec, gate, reason: record.pending?.reason ?? ''}
}
