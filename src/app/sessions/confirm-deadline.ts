/**
 * A gate's deadline that passed (policy confirm.timeout_s, or the timeout_s of the gate's approvals
 * rule) acts as the policy said when the run paused (on_timeout, kept in the pending record): `wait`
 * leaves the run paused and says so, `deny` refuses as a person would (a confirmation as
 * `pipe confirm RUN --no`, a review as `--decision drop`; answers have no refusal, so the run is
 * cancelled), `cancel` cancels the run through the one cancel use case. Whoever touches the run first applies it — the
 * prompt at the terminal, pipe confirm, resume, runs show, or a pipe worker serving the store — and
 * the timeline says who decided (the policy), when, and which deadline.
 */
import {PipeError} from '../../errors.js'
import type {RunOutcome} from '../../engine/engine.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {pipeNow} from '../../util/clock.js'
import {cancelSession} from './cancel.js'
import {deadlineReason, dueTimeout, gateName, policyActor, timeoutKey, type DueTimeout} from './deadline-due.js'
import {resumeSession} from './resume.js'
import {mayRemind, remindIfDue} from './remind.js'
import {appendLog} from '../../log.js'
import type {SessionOptions} from './shared.js'

export interface DeadlineOptions extends SessionOptions {
  runId: string
  /** A store the caller opened already (pipe worker). */
  opened?: RunStore
  /** Where a file the run recorded is on this machine (pipe worker). */
  relocate?: (file: string) => string
}

/**
 * What a passed deadline did to the run, or null when none is due (not waiting for a confirmation,
 * no deadline, not yet passed, or another process holds the run and applies it).
 */
export async function applyPassedDeadline(options: DeadlineOptions): Promise<{due: DueTimeout; outcome: RunOutcome} | null> {
  const store = options.opened ?? (await openStore(storeLocation(options.cwd, options.store), 'existing'))
  // The policy's clock (PIPE_NOW when set) is the one its decision and what follows are recorded at: a timeline never goes back.
  const clock = options.now ?? pipeNow
  const now = clock()
  // A reminder due before the deadline goes first; one that cannot be sent now never keeps the deadline from acting.
  await remindIfDue(store, options.runId, now, options.cwd).catch((error: unknown) => {
    const e = error as {code?: string; message?: string}
    appendLog('WARN', `run ${options.runId}: its gate's reminder could not be sent: [${e.code ?? 'E_INTERNAL'}] ${e.message ?? String(error)}`)
  })
  const due = dueTimeout(await store.readRun(options.runId), now)
  if (!due) return null
  let record: RunRecord
  try {
    const noted = await noteDeadline(store, options.runId, now)
    if (!noted) return null
    record = noted
  } catch (error) {
    // Held by another process (the one prompting, a worker): that one applies it.
    if ((error as {code?: string}).code === 'E_CONFLICT') return null
    throw error
  }
  if (due.action === undefined) return {due, outcome: outcomeOf(record)}
  const {opened, relocate, ...rest} = options
  const session = {...rest, now: clock}
  const actor = policyActor(due)
  const drive = {...session, ...(opened ? {opened} : {}), ...(relocate ? {relocate} : {}), user: actor, gateDecided: true}
  if (due.action === 'deny' && due.kind === 'review') {
    const outcome = await resumeSession({
      ...drive,
      command: `pipe review ${options.runId} --decision drop`,
      decision: 'drop',
      note: `no decision by the deadline ${due.deadline}: the policy's ${timeoutKey(due)}: deny`,
    })
    return {due, outcome}
  }
  if (due.action === 'deny' && due.kind === 'confirm') {
    const callId = record.pending?.action?.call_id
    const outcome = await resumeSession({
      ...drive,
      command: `pipe confirm ${options.runId} --no`,
      confirm: {decision: 'no', ...(callId !== undefined ? {call_id: callId} : {}), note: `no answer by the deadline ${due.deadline}`},
    })
    return {due, outcome}
  }
  const reason = `no answer to the ${gateName(due)} of step ${due.step} by its deadline ${due.deadline}: the policy's ${timeoutKey(due)}${due.action === 'deny' ? `: deny (${due.kind === 'budget' ? 'a budget has' : 'answers have'} no refusal)` : ''} cancels the run`
  const outcome = await cancelSession({...session, user: actor, reason})
  return {due, outcome}
}

/** The deadline on the run's record and timeline (once), under the run's lock; null when it is no longer due. */
async function noteDeadline(store: RunStore, runId: string, now: Date): Promise<RunRecord | null> {
  const release = await store.acquireRun(runId)
  try {
    const record = await store.readRun(runId)
    // Answered meanwhile (another terminal, a worker): there is nothing to do.
    const due = dueTimeout(record, now)
    if (!due) return null
    const reason = deadlineReason(runId, due)
    if (record.status_reason === reason) return record
    const at = now.toISOString()
    return await store.updateRun(
      runId,
      (r) => {
        r.status_reason = reason
        r.updated_at = at
      },
      {at, event: `${due.kind}_deadline_passed`, step: due.step, reason, ...(due.action ? {by: policyActor(due)} : {})},
    )
  } finally {
    await release()
  }
}

/**
 * Every run of the store that waits for a person past its deadline, applied as pipe runs show
 * applies one (pipe runs list): a listing never shows as waiting a run the policy already decided.
 * What could not be applied is returned with why, for the caller to say; the rest goes on.
 */
export async function applyPassedDeadlines(options: SessionOptions & {opened?: RunStore}): Promise<Array<{run_id: string; code: string; message: string}>> {
  const store = options.opened ?? (await openStore(storeLocation(options.cwd, options.store), 'existing'))
  const now = (options.now ?? pipeNow)()
  const failed: Array<{run_id: string; code: string; message: string}> = []
  let cursor: string | null = null
  do {
    const page = await store.listRuns({status: 'awaiting_input', ...(cursor ? {cursor} : {})})
    cursor = page.cursor
    for (const record of page.runs) {
      if (!dueTimeout(record, now) && !mayRemind(record)) continue
      try {
        await applyPassedDeadline({...options, opened: store, runId: record.run_id})
      } catch (error) {
        const e = error as {code?: string; message?: string}
        failed.push({run_id: record.run_id, code: e.code ?? 'E_INTERNAL', message: e.message ?? String(error)})
      }
    }
  } while (cursor !== null)
  return failed
}

/** The prompt at the terminal ran out: the policy's action, or the run as it stays paused. */
export async function confirmDeadlinePassed(options: DeadlineOptions): Promise<RunOutcome> {
  const applied = await applyPassedDeadline(options)
  if (applied) return applied.outcome
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  return outcomeOf(await store.readRun(options.runId))
}

/** A person's answer that came after the policy acted on the deadline: refused, saying what the policy did. */
export function tooLate(runId: string, applied: {due: DueTimeout; outcome: RunOutcome}): PipeError {
  const {due} = applied
  const did = due.action === 'deny' && (due.kind === 'review' || due.kind === 'confirm') ? 'refused the step' : 'cancelled the run'
  const key = timeoutKey(due)
  return new PipeError(
    'E_STATE',
    `run ${runId}'s ${gateName(due)} of step ${due.step} had a deadline, ${due.deadline}, which passed: the policy's ${key}: ${due.action} ${did} (the run is now ${applied.outcome.status}); this answer was not taken`,
    {
      hint: `pipe runs show ${runId} shows what happened. To give a person more time, raise ${key.replace('on_timeout', 'timeout_s')} or set ${key}: wait in the policy.`,
    },
  )
}

function outcomeOf(record: RunRecord): RunOutcome {
  return {
    run_id: record.run_id,
    feature_id: record.feature_id,
    status: record.status,
    spec_version: record.spec_version ?? null,
    steps_run: 0,
    ...(record.status_reason ? {reason: record.status_reason} : {}),
    ...(record.pending ? {pending: record.pending} : {}),
  }
}

/** `go` (a resume), unless a passed deadline the policy acts on decided the run first: then what it did. */
export async function unlessDeadlineActed(options: DeadlineOptions, go: () => Promise<RunOutcome>): Promise<RunOutcome> {
  const applied = await applyPassedDeadline(options)
  return applied?.due.action ? applied.outcome : go()
}
