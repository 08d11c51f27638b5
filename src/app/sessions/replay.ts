/** pipe replay: a new run from one snapshot of an old run, with its pipeline, policy, input and answers. */
import path from 'node:path'
import {answersOf, checkAnswers, loadAnswersFile} from '../../config/answers.js'
import {PipeError} from '../../errors.js'
import {defaultPolicy} from '../../policy/policy.js'
import {planProvider} from '../../providers/select.js'
import {openStore, storeLocation} from '../../store/open.js'
import {readSecrets} from '../../engine/expressions.js'
import type {RunOutcome, StartOptions} from '../../engine/engine.js'
import {
  type Decision,
  type ReplyOptions,
  type SessionOptions,
  continuedReplies,
  loadPipelineOrThrow,
  policyOrThrow,
  engineFor,
  compact,
  upFront,
  replySources,
} from './shared.js'
import {refuseRuledUpFront, storeSettings} from './prepare.js'
import {currentPerson} from '../identity.js'

/** Model replies of a replay: the store's reply cache is reused unless --cache off; a cassette the original replayed is replayed again. */
export interface ReplaySession extends SessionOptions, ReplyOptions {
  runId: string
  from?: string
  seq?: number
  answers?: string
  decision?: Decision
  note?: string
}

export async function replaySession(options: ReplaySession): Promise<RunOutcome> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const original = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const fork = options.seq !== undefined ? snapshots.find((s) => s.step.seq === options.seq) : snapshots.find((s) => s.step.name === options.from)
  if (!fork) {
    const steps = [...new Set(snapshots.map((s) => s.step.name))]
    throw new PipeError(
      'E_INVALID_ARGS',
      `run ${options.runId} has no snapshot ${options.seq !== undefined ? `with seq ${options.seq}` : `of step "${options.from}"`}`,
      {
        hint: steps.length ? `Replay from one of its steps: ${steps.join(', ')}.` : 'The run has not recorded a step yet.',
      },
    )
  }
  const pipeline = await loadPipelineOrThrow(original.pipeline.path)
  if (pipeline.hash !== original.pipeline.hash) {
    throw new PipeError('E_CONFLICT', `the pipeline ${original.pipeline.path} changed since run ${options.runId}`, {
      hint: 'Replay needs the pipeline as it was; restore it first.',
    })
  }
  const policy = original.policy_path ? await policyOrThrow(original.policy_path, options.cwd) : defaultPolicy()
  readSecrets(pipeline.pipeline)
  let answers = compact(original.answers ?? {})
  if (options.answers) {
    const given = answersOf(await loadAnswersFile(path.resolve(options.cwd, options.answers)))
    checkAnswers(given, upFront(pipeline))
    refuseRuledUpFront(pipeline, policy, 'answers')
    answers = {...answers, ...given}
  }
  if (options.decision) refuseRuledUpFront(pipeline, policy, 'review')
  const replies = continuedReplies(options, original.provider, {cache: 'reuse', cassette: 'replayed-only'})
  const provider = planProvider(
    original.provider.kind === 'openai' ? 'openai' : 'offline',
    pipeline.pipeline.provider,
    options.env ?? process.env,
    await replySources({cwd: options.cwd, store: options.store, ...replies}),
  )
  const settings: StartOptions = {
    pipeline,
    policy,
    cwd: original.workspace ?? options.cwd,
    input: original.input,
    ...(original.inputs ? {inputs: original.inputs} : {}),
    ...(original.context_ref ? {contextRef: original.context_ref} : {}),
    provider: provider.record,
    featureId: original.feature_id,
    answers,
    replayOf: {run_id: options.runId, seq: fork.step.seq, step: fork.step.name},
    // The replay is a new run started by whoever replays it: self_approval: false refuses their approval, as at pipe run.
    ...(policy.policy.approvals && Object.keys(policy.policy.approvals).length > 0 ? {startedBy: currentPerson(options.cwd, options.env ?? process.env)} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  }
  // A replay is a new run on this machine: what runs now is measured, not what ran then.
  return engineFor(store, options, provider.create, provider.replies).start(await storeSettings(settings, store, options.signal))
}
