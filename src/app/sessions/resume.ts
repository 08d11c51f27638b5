/** pipe resume: a paused, interrupted, failed or blocked run continued from its last snapshot, under the policy it ran with unless a redrive names another. */
import path from 'node:path'
import {answersOf, checkAnswers, loadAnswersFile} from '../../config/answers.js'
import {PipeError} from '../../errors.js'
import {defaultPolicy} from '../../policy/policy.js'
import {planProvider} from '../../providers/select.js'
import {openStore, storeLocation} from '../../store/open.js'
import {readSecrets} from '../../engine/expressions.js'
import type {ResumeOptions, RunOutcome} from '../../engine/engine.js'
import type {RunRecord} from '../../types/run.js'
import type {RunStore} from '../../store/types.js'
import {isFinal, isRedrivable} from '../../engine/lifecycle.js'
import {gateRule, signOutsideVote} from './vote.js'
import {budgetParentsOf} from './budget-parents.js'
import {
  type Decision,
  type ReplyOptions,
  type SessionOptions,
  continuedReplies,
  loadPipelineOrThrow,
  policyOrThrow,
  engineFor,
  guarding,
  openQuestions,
  replySources,
} from './shared.js'

/**
 * Model replies of a resumed run: its cassette unless another is given; a redriven (failed or
 * blocked) run reuses the store's cached replies unless --cache off, so calls that already
 * succeeded are not paid for again.
 */
export interface ResumeSession extends SessionOptions, ReplyOptions {
  runId: string
  /** A changed policy for a redrive of a failed or blocked run. */
  policy?: string
  answers?: string
  answerMap?: Record<string, string>
  decision?: Decision
  note?: string
  /** A yes or no to the tool call the run waits at (pipe confirm). */
  confirm?: NonNullable<ResumeOptions['confirm']>
  /** A raise of the budget the run paused at (pipe budget). */
  budgetGrant?: NonNullable<ResumeOptions['budgetGrant']>
  /** The person's signature over the decision, made by castVote: it goes on the decision's timeline line. */
  signed?: NonNullable<ResumeOptions['signed']>
  /** Tasks of the blocked run a person leaves out (pipe resume --skip). */
  skip?: NonNullable<ResumeOptions['skip']>
  /** Go on with the run's replayed cassette although it changed since the run recorded its sha256 (--accept-cassette); recorded on the timeline. */
  acceptCassette?: boolean
  /** The decision, answers or confirmation was counted under the gate's approvals rule (castVote) or is the policy's own at a deadline. */
  gateDecided?: boolean
  /** The command line that continued the run, for the hint of an error (default: pipe resume RUN). */
  command?: string
  /** A store the caller opened already (pipe worker drives many runs on one connection pool). */
  opened?: RunStore
  /** Where a file the run recorded (its pipeline, policy, workspace) is on this machine (pipe worker: another checkout of the same repository). */
  relocate?: (file: string) => string
}

export async function resumeSession(options: ResumeSession): Promise<RunOutcome> {
  const store = options.opened ?? (await openStore(storeLocation(options.cwd, options.store), 'existing'))
  // Before anything of it is executed or sealed again: a worker (and a person's answer, review or
  // confirmation) goes on only with what the trail vouches for, never with a row as it reads now.
  const record = (await store.vouch?.(options.runId)) ?? (await store.readRun(options.runId))
  const here = options.relocate ?? ((file: string) => file)
  // A run that has ended is never walked again: records a power failure lost are rewritten here (RunStore.repairEndedRun).
  if (isFinal(record.status) && !isRedrivable(record.status)) await store.repairEndedRun(options.runId)
  const pipeline = await loadPipelineOrThrow(here(record.pipeline.path))
  // The run keeps the policy it runs under (the same file, or the built-in default) unless a
  // redrive names another; the engine allows that only for a failed or blocked run.
  const policy = options.policy
    ? await policyOrThrow(options.policy, options.cwd)
    : record.policy_path
      ? await policyOrThrow(here(record.policy_path), options.cwd)
      : defaultPolicy()
  if (!options.policy && policy.version !== record.policy_version) {
    throw new PipeError('E_CONFLICT', `the policy changed since run ${options.runId} started (${record.policy_version} -> ${policy.version})`, {
      hint: isRedrivable(record.status)
        ? `To redrive the ${record.status} run under the changed policy, name it: pipe resume ${options.runId} --policy ${record.policy_path ?? 'FILE'}`
        : 'Restore the policy as it was, or start a new run under the new policy.',
    })
  }
  let answers = options.answerMap
  if (options.answers) {
    const file = await loadAnswersFile(path.resolve(options.cwd, options.answers))
    if (file.run_id && file.run_id !== options.runId)
      throw new PipeError('E_INVALID_ARGS', `the answers file is for run ${file.run_id}, not ${options.runId}`, {
        hint: 'Use the answers file written for this run.',
      })
    answers = {...(answers ?? {}), ...answersOf(file)}
  }
  if (answers) checkAnswers(answers, openQuestions(record))
  // pipe resume --decision/--answers would decide a gate its approvals rule says who may decide and how many must: only a vote opens it.
  if ((answers || options.decision || options.confirm) && !options.gateDecided) await refuseRuledGate(record, options.cwd)
  // A person's decision given here rather than through castVote (pipe resume --decision, --answers) is signed the same way.
  const signed =
    options.signed ??
    (options.gateDecided
      ? undefined
      : options.decision
        ? await signOutsideVote(
            record,
            {kind: 'review', decision: options.decision, approve: options.decision === 'go', ...(options.note ? {note: options.note} : {})},
            options,
          )
        : answers
          ? await signOutsideVote(record, {kind: 'answers', decision: 'answered', approve: true, note: `answers ${JSON.stringify(answers)}`}, options)
          : undefined)
  readSecrets(pipeline.pipeline, options.env)
  const replies = continuedReplies(options, record.provider, {cache: isRedrivable(record.status) ? 'reuse' : 'off', cassette: 'as-recorded'})
  const sources = await replySources({cwd: options.cwd, store: options.store, ...replies})
  const acceptCassette = options.cassette ? null : changedCassette(record, sources.cassette?.sha256 ?? null, options)
  const provider = planProvider(record.provider.kind === 'openai' ? 'openai' : 'offline', pipeline.pipeline.provider, options.env ?? process.env, sources)
  const engine = engineFor(store, options, provider.create, provider.replies)
  const resume = {
    pipeline,
    // A child continued on its own (a worker's job) spends its parents' money as one its parent drives does.
    ...(record.parent ? await budgetParentsOf(store, record, here) : {}),
    policy: guarding(policy, store),
    // Steps act in the workspace the run started in, wherever resume is called from.
    cwd: record.workspace ? here(record.workspace) : options.cwd,
    ...(options.env ? {env: options.env} : {}),
    ...(answers ? {answers} : {}),
    ...(acceptCassette ? {acceptCassette} : {}),
    ...(options.confirm ? {confirm: options.confirm} : {}),
    ...(options.skip ? {skip: options.skip} : {}),
    ...(options.budgetGrant ? {budgetGrant: options.budgetGrant} : {}),
    ...(signed ? {signed} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  }
  const queue = await handBackTo(
    store,
    record,
    options,
    Boolean(answers || options.confirm || options.decision || options.skip || options.budgetGrant || acceptCassette),
  )
  if (queue === null || !store.team) return engine.resume(options.runId, resume)
  await engine.takeIn(options.runId, resume)
  await store.team.enqueue(options.runId, queue)
  const after = await store.readRun(options.runId)
  return {
    run_id: options.runId,
    feature_id: after.feature_id,
    status: after.status,
    spec_version: after.spec_version ?? null,
    steps_run: 0,
    reason: `queued on ${queue}: a pipe worker continues it`,
    queued: queue,
  }
}

/**
 * The queue a detached run goes back to instead of being driven here (null: drive it here). A run
 * pipe run --detach put on a shared store's queue is the workers' for its whole life: what a person
 * gives it is recorded under its lock, and a worker goes on with it. A run still queued with nothing
 * given is left to its worker; a redrive that names a policy or a reply source is driven here, since
 * a worker would not know them.
 */
async function handBackTo(store: RunStore, record: RunRecord, options: ResumeSession, given: boolean): Promise<string | null> {
  if (!store.holding || options.policy || options.cassette || options.cache) return null
  const holding = await store.holding(record.run_id)
  if (!holding?.detached_queue) return null
  if (!given && (holding.queue !== null || record.status === 'awaiting_input')) return null
  return holding.detached_queue
}

/**
 * A run that replays a cassette goes on with the file it recorded the sha256 of (or the one a person
 * accepted since): replies edited after it started would otherwise answer the rest of it unnoticed.
 * A changed file is E_INTEGRITY unless --accept-cassette; then the acceptance is returned, for the
 * engine to record. A cassette that grows as the run goes (replay-missing live with record) is not
 * compared: its hash changes by design.
 */
function changedCassette(record: RunRecord, actual: string | null, options: ResumeSession): NonNullable<ResumeOptions['acceptCassette']> | null {
  const recorded = record.provider.cassette
  if (recorded?.mode !== 'replay' || !recorded.sha256 || recorded.append) return null
  const expected = record.cassette_accepted?.sha256 ?? recorded.sha256
  if (actual === expected || actual === null) return null
  if (options.acceptCassette) return {file: recorded.file, previous_sha256: expected, sha256: actual}
  const again = options.command ?? `pipe resume ${record.run_id}`
  throw new PipeError(
    'E_INTEGRITY',
    `the cassette ${recorded.file} changed since run ${record.run_id} ${record.cassette_accepted ? 'accepted it' : 'started replaying it'}: it was ${expected}, it is ${actual}`,
    {
      hint: `Nothing was run. Put the cassette back as it was, or, if the change is deliberate, go on with it as it is now: ${again} --accept-cassette (the acceptance is recorded on the run's timeline).`,
    },
  )
}

/** A gate under an approvals rule is decided by votes (pipe review, confirm, answer), never by pipe resume's input. */
async function refuseRuledGate(record: RunRecord, cwd: string): Promise<void> {
  const rule = await gateRule(record, cwd)
  if (!rule || !record.pending) return
  const how: Record<string, string> = {
    review: 'pipe review RUN --decision go|hold|drop',
    confirm: 'pipe confirm RUN --yes|--no',
    answers: 'pipe answer RUN --file FILE',
  }
  throw new PipeError(
    'E_POLICY_DENIED',
    `run ${record.run_id} waits at a ${record.pending.kind} of step ${record.pending.step} under the policy's approvals.${rule.name} (${rule.required} of: ${rule.people.join(', ')}); it is decided by each person's vote, not by pipe resume; nothing was recorded`,
    {hint: `${(how[record.pending.kind] ?? how['review']!).replace('RUN', record.run_id)}, as one of the people the rule names.`},
  )
}
