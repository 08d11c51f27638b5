/** pipe confirm: a person's yes or no to the tool call (or the step) a run waits at, and the run continued. */
import {openStore, storeLocation} from '../../store/open.js'
import {faultPoint} from '../../util/faults.js'
import type {RunOutcome} from '../../engine/engine.js'
import {waitingFor, type SessionOptions} from './shared.js'
import {resumeSession} from './resume.js'
import {applyPassedDeadline, tooLate} from './confirm-deadline.js'
import {castVote} from './vote.js'

export interface ConfirmSession extends SessionOptions {
  runId: string
  decision: 'yes' | 'no'
  note?: string
  /** What the answer covers: this call or run of a step (default), every confirmation of the step in this run, or every one in this run. */
  scope?: 'call' | 'step' | 'run'
  /** Go on with a replayed cassette that changed since the run started (recorded). */
  acceptCassette?: boolean
  /** Decide under the name of a key the run's policy trusts (--as NAME): only with that key as one's signing key. */
  as?: string
}

export async function confirmSession(options: ConfirmSession): Promise<RunOutcome> {
  // An answer after a deadline the policy acts on (confirm.on_timeout) comes too late: the policy decided.
  const applied = await applyPassedDeadline(options)
  if (applied?.due.action) throw tooLate(options.runId, applied)
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  const pending = waitingFor(record, 'confirm')
  // The answer is for the call the person was shown: should the run have moved on to another call
  // meanwhile (a second pipe confirm got there first), it must not decide that one.
  const callId = pending.action?.call_id
  faultPoint('confirm-checked')
  const {decision, note, scope, as: _as, ...rest} = options
  const ballot = {kind: 'confirm' as const, decision, approve: decision === 'yes', ...(note ? {note} : {})}
  return castVote(options, ballot, (user, signed) =>
    resumeSession({
      ...rest,
      ...(user !== undefined ? {user} : {}),
      ...(signed ? {signed} : {}),
      gateDecided: true,
      command: `pipe confirm ${options.runId} --${decision}`,
      confirm: {decision, ...(callId !== undefined ? {call_id: callId} : {}), ...(note ? {note} : {}), ...(scope ? {scope} : {})},
    }),
  )
}
