/**
 * What a person gives a waiting run when resuming it: answers, a review decision, a yes or no to
 * a tool call, or the acceptance of a changed cassette. Each is one record change with its own
 * timeline line, taken under the run's lock; a confirmation is refused unless the call the person
 * was shown is still exactly the call that would run.
 */
import {PipeError} from '../errors.js'
import {actionHash, type ConfirmAction} from '../steps/registry.js'
import type {StepHandler, StepKind, StepRegistry} from '../steps/types.js'
import type {RunStore} from '../store/types.js'
import type {RunRecord} from '../types/run.js'
import type {ResumeOptions} from './engine-types.js'
import {plannedSkips, skipReason, type TaskSkip} from './tasks.js'
import {recordBudgetGrant} from './budget.js'

export interface InputEnvironment {
  store: RunStore
  now: () => Date
  user: string
  /** Where the person gave it, when not on the command line (pipe view's page): recorded beside `by` on each decision and its timeline line. */
  via?: 'view'
  registry: StepRegistry
}

/** What was taken in that asks more of the caller: the tasks skipped, whose child runs it ends. */
export interface TakenInput {
  skipped: TaskSkip[]
}

export async function takeInput(env: InputEnvironment, runId: string, record: RunRecord, options: ResumeOptions): Promise<TakenInput> {
  const skipped: TaskSkip[] = []
  const {store} = env
  const at = env.now().toISOString()
  const via = env.via ? {via: env.via} : {}
  // The person's signed decision goes on the line that records it (one decision a call).
  const signed = options.signed ? {signed: options.signed} : {}
  if (options.acceptCassette) {
    const {file, previous_sha256, sha256} = options.acceptCassette
    await store.updateRun(
      runId,
      (r) => {
        r.cassette_accepted = {sha256, previous_sha256, by: env.user, at}
        r.updated_at = at
      },
      {at, event: 'cassette_accepted', reason: `the replayed cassette ${file} changed (${previous_sha256} -> ${sha256}); accepted as it is now`, by: env.user},
    )
  }
  if (options.skip) {
    // Checked again under the lock: a task may have been skipped or finished since the command looked.
    for (const skip of await plannedSkips(store, record, options.skip, {by: env.user, at})) {
      await store.updateRun(
        runId,
        (r) => {
          r.skips = [...(r.skips ?? []), skip]
          r.updated_at = at
        },
        {at, event: 'task_skipped', step: skip.step, reason: skipReason(skip), by: env.user},
      )
      skipped.push(skip)
    }
  }
  if (options.confirm) {
    const action = record.pending?.kind === 'confirm' ? record.pending.action : undefined
    if (!action) throw new PipeError('E_STATE', `run ${runId} is not waiting for a confirmation`, {hint: `pipe runs show ${runId} shows its state.`})
    if (options.confirm.call_id !== undefined && options.confirm.call_id !== action.call_id) {
      throw new PipeError(
        'E_STATE',
        `run ${runId} now waits for a confirmation of another call (${action.tool}, ${action.call_id}), not of ${options.confirm.call_id} this answer was for; nothing was decided`,
        {hint: `pipe runs show ${runId} shows the call it waits at now; answer it with pipe confirm ${runId} --yes or --no.`},
      )
    }
    const stepId = record.pending!.step
    await assertShownAction(env, runId, stepId, action, options)
    const {decision, note} = options.confirm
    const scope = options.confirm.scope ?? 'call'
    const confirmation = {
      call_id: action.call_id,
      decision,
      by: env.user,
      ...via,
      at,
      ...(action.sha256 !== undefined ? {action_sha256: action.sha256} : {}),
      ...(note ? {note} : {}),
      ...(scope !== 'call' ? {scope} : {}),
      step: stepId,
    }
    // Given after the policy's deadline: still taken (the run only waited), and the timeline says it came late.
    const deadline = record.pending?.deadline
    const late = deadline !== undefined && deadline < at ? ` (after its deadline ${deadline})` : ''
    const covers =
      scope === 'call'
        ? ''
        : scope === 'step'
          ? `, and to every later confirmation of step ${stepId} in this run`
          : ', and to every later confirmation in this run'
    await store.updateRun(
      runId,
      (r) => {
        r.confirmation = confirmation
        // An answer for the step or the run stands for what comes later, across a pause, a crash and a resume.
        if (scope !== 'call')
          r.standing_confirmations = [
            ...(r.standing_confirmations ?? []),
            {scope, ...(scope === 'step' ? {step: stepId} : {}), decision, by: env.user, ...via, at, ...(note ? {note} : {})},
          ]
        r.updated_at = at
      },
      {
        at,
        event: 'confirm_given',
        step: stepId,
        reason: `${decision} to ${action.tool} (${action.call_id})${covers}${late}${note ? `: ${note}` : ''}`,
        by: env.user,
        ...via,
        ...signed,
      },
    )
  }
  if (options.budgetGrant) {
    const pending = record.pending?.kind === 'budget' ? record.pending : undefined
    if (!pending?.budget)
      throw new PipeError(
        'E_STATE',
        `run ${runId} is not paused at a budget (${record.status === 'awaiting_input' ? `it waits for ${record.pending?.kind ?? 'input'}` : `it is ${record.status}`}); nothing was granted`,
        {
          hint: `pipe runs show ${runId} shows its state.`,
        },
      )
    const {tokens, usd, note} = options.budgetGrant
    const {scope, unrecorded} = pending.budget
    const grant = {
      scope,
      ...(tokens !== undefined ? {tokens} : {}),
      ...(usd !== undefined ? {usd} : {}),
      by: env.user,
      at,
      ...(note ? {note} : {}),
      // What the step spent before it paused is in no snapshot (it runs again): the grant keeps it on the record.
      ...(unrecorded ? {unrecorded} : {}),
    }
    await recordBudgetGrant(store, runId, grant, {step: pending.step, extra: signed})
  }
  if (options.answers || options.review) {
    // Answers keyed by field answer the questions the run is waiting on now, so key them by those ids.
    const answers = options.answers ? answersForPending(options.answers, record.pending) : undefined
    // One record change per timeline line, so each line binds the state it left.
    if (options.answers && answers) {
      await store.updateRun(
        runId,
        (r) => {
          r.answers = {...(r.answers ?? {}), ...answers}
          r.updated_at = at
        },
        {at, event: 'answers_given', reason: `answers to ${Object.keys(options.answers).join(', ')}`, by: env.user, ...via, ...signed},
      )
    }
    if (options.review) {
      const review = {decision: options.review.decision, by: env.user, ...via, at, ...(options.review.note ? {note: options.review.note} : {})}
      await store.updateRun(
        runId,
        (r) => {
          r.review = review
          r.updated_at = at
        },
        {
          at,
          event: 'review_given',
          reason: `decision ${options.review.decision}${options.review.note ? `: ${options.review.note}` : ''}`,
          by: env.user,
          ...via,
          ...signed,
        },
      )
    }
  }
  return {skipped}
}

/**
 * A confirmation is for the action the person was shown: the run record must still hold it as it
 * was hashed at the pause, and the step's sealed state must still run exactly it. Otherwise
 * nothing is decided and nothing runs (E_INTEGRITY); the run stays waiting.
 */
async function assertShownAction(env: InputEnvironment, runId: string, stepId: string, action: ConfirmAction, options: ResumeOptions): Promise<void> {
  // A pause written before actions were hashed is matched by call id, as it was then.
  if (action.sha256 === undefined) return
  const hint = `Nothing was decided or run. pipe audit verify ${runId} names what was changed; pipe cancel ${runId} ends the run, and a new run asks again.`
  const shown = `${action.tool} ${action.argv ? action.argv.map((a) => a.join(' ')).join(' ; ') : JSON.stringify(action.arguments)} (${action.call_id})`
  if (actionHash(action) !== action.sha256) {
    throw new PipeError(
      'E_INTEGRITY',
      `run ${runId} waits at a call that is not the one it paused with: ${shown} does not hash to the ${action.sha256} recorded when it was shown`,
      {hint},
    )
  }
  const step = options.pipeline.pipeline.steps.find((s) => s.id === stepId)
  const handler = step ? (env.registry[step.kind] as StepHandler<StepKind>) : undefined
  // A step's own confirmation (action.rule) is checked by the step as it runs again: the action it would run must hash the same, or it asks again.
  if (!handler?.pendingAction || action.rule !== undefined) return
  const {store} = env
  const seq = await store.latestStepStateSeq(runId, stepId)
  // A state file whose seal does not hold is E_INTEGRITY here, naming it.
  const state = seq === null ? undefined : await store.readStepState(runId, stepId, seq)
  const now = state === undefined ? null : await handler.pendingAction(state, {policy: options.policy, cwd: options.cwd})
  if (now && actionHash(now) === action.sha256) return
  const file = store.stepStateLocation(runId, stepId, seq)
  const would = now ? `${now.tool} ${now.argv ? now.argv.map((a) => a.join(' ')).join(' ; ') : JSON.stringify(now.arguments)} (${now.call_id})` : 'no call'
  throw new PipeError(
    'E_INTEGRITY',
    `step ${stepId} of run ${runId} would run ${would}, not the call the person was shown: ${shown}; its saved state ${file} was changed after the pause`,
    {hint},
  )
}

function answersForPending(answers: Record<string, string>, pending: RunRecord['pending']): Record<string, string> {
  if (pending?.kind !== 'answers') return answers
  const out: Record<string, string> = {}
  for (const [key, text] of Object.entries(answers)) {
    const asked = (pending.questions ?? []).filter((q) => q.field === key)
    if (asked.length === 0) out[key] = text
    for (const q of asked) out[q.id] ??= text
  }
  return out
}
