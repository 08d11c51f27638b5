/** What every session shares: the options a command passes, loading the pipeline and the policy or failing with their errors, the engine with its hooks, and the checks answers go through. */
import {existsSync} from 'node:fs'
import path from 'node:path'
import type {Readable} from 'node:stream'
import {answerableFields} from '../../config/answers.js'
import {formatDiagnostic} from '../../config/diagnostics.js'
import {loadInlinePipeline, loadPipeline, type LoadedPipeline} from '../../config/pipeline.js'
import {resolvePolicy} from '../../config/policy.js'
import {PipeError} from '../../errors.js'
import {defaultPolicy, type LoadedPolicy} from '../../policy/policy.js'
import type {CassetteOptions} from '../../providers/cassette.js'
import type {ProviderChoice, ReplySources} from '../../providers/select.js'
import {KEY_FIELDS} from '../../providers/spec-build.js'
import {kindCatalog} from '../../steps/registry.js'
import {localRoot} from '../../store/open.js'
import {ReplyCache} from '../../store/replies.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {faultPoint, faultsEnabled} from '../../util/faults.js'
import {addSecretsNamedIn} from '../../util/redact.js'
import type {InputDeclaration} from '../../expr/inputs.js'
import {Engine, type EngineDeps} from '../../engine/engine.js'
import type {RunSettings} from '../../engine/engine-types.js'

export type Decision = 'go' | 'hold' | 'drop'

export interface SessionOptions {
  cwd: string
  store: string
  onProgress?: EngineDeps['onProgress']
  signal?: AbortSignal
  hook?: EngineDeps['hook']
  /** Who records decisions (default: the user running pipe); pipe test fixes it so its records do not depend on who runs them. */
  user?: string
  /** Where the person gave what this session records, when not on the command line: `view` from pipe view's page (recorded beside the user). */
  via?: 'view'
  /** The clock records and ids are made from (default: the system's); pipe test gives one of its own, so its runs do not depend on the day. */
  now?: EngineDeps['now']
  /** Who drives child runs when not this process (pipe worker: each child a job of the queue). */
  children?: EngineDeps['children']
}

/** Where model replies come from, for the sessions that run steps (run, resume, replay). */
export interface ReplyOptions {
  /** Model replies: record each request and reply to a cassette file, or answer from one (`--record`, `--replay`, `--replay-missing`). */
  cassette?: CassetteOptions
  /** `reuse`: a request the store's reply cache has answered before is answered from it (`--cache`). */
  cache?: 'off' | 'reuse'
  /** The environment provider selection reads (OPENAI_API_KEY, OPENAI_BASE_URL); process.env when absent. */
  env?: NodeJS.ProcessEnv
}

/**
 * A continued run's reply sources: what the command gave, else what the run started with. A run
 * that was recording goes on recording into the same file without dropping what it recorded
 * before (it replays that and records the rest live), so its cassette ends up whole.
 */
export function continuedReplies(
  options: ReplyOptions,
  provider: RunRecord['provider'],
  defaults: {cache: 'off' | 'reuse'; cassette: 'as-recorded' | 'replayed-only'},
): Pick<ReplyOptions, 'cassette' | 'cache'> {
  const recorded = provider.cassette
  let inherited: CassetteOptions | undefined
  if (recorded?.mode === 'replay')
    inherited = {file: recorded.file, mode: 'replay', ...(recorded.missing ? {missing: recorded.missing} : {}), ...(recorded.append ? {append: true} : {})}
  else if (recorded?.mode === 'record' && defaults.cassette === 'as-recorded') inherited = {file: recorded.file, mode: 'replay', missing: 'live', append: true}
  const cassette = options.cassette ?? inherited
  return {...(cassette ? {cassette} : {}), cache: options.cache ?? (provider.cache === 'reuse' ? 'reuse' : defaults.cache)}
}

export interface StartSession extends SessionOptions {
  pipeline: string
  input?: string
  text?: string
  /** Standard input, asked for only when the input is `-`. */
  stdin?: () => Readable
  feature?: string
  /** Seed 002's Project Context Ref as given: PROJECT@VERSION (`--context-ref`). */
  contextRef?: string
  answers?: string
  decision?: Decision
  note?: string
  policy?: string
  /** The last folder searched for a policy.yaml when policy is not given (default: up to the repository root). */
  policyCeiling?: string
  provider?: ProviderChoice
  /** `-i name=value` pairs for the pipeline's typed inputs, in the order given. */
  inputValues?: string[]
  /** A YAML file of input values (`--inputs FILE`). */
  inputsFile?: string
  /** Input values given as data instead of a file (a schedule's inputs:), named for messages. */
  inputsGiven?: {name: string; data: Record<string, unknown>}
  /** Model replies: record each request and reply to a cassette file, or answer from one (`--record`, `--replay`, `--replay-missing`). */
  cassette?: CassetteOptions
  /** `reuse`: a request the store's reply cache has answered before is answered from it (`--cache`). */
  cache?: 'off' | 'reuse'
  /** The environment provider selection reads (OPENAI_API_KEY, OPENAI_BASE_URL); process.env when absent. */
  env?: NodeJS.ProcessEnv
  /** Asks a person for required inputs nobody gave (on a terminal); null when they gave none. */
  askInputs?: (missing: Array<{name: string; declaration: InputDeclaration}>) => Promise<Record<string, string> | null>
}

export async function loadPipelineOrThrow(file: string): Promise<LoadedPipeline> {
  // FILE#STEP names the inline steps of a step of FILE (a foreach's anonymous child pipeline).
  const inline = /^(.*)#([^#/]+)$/.exec(file)
  if (inline && !existsSync(file) && existsSync(inline[1]!)) {
    const parent = await loadPipelineOrThrow(inline[1]!)
    const index = parent.pipeline.steps.findIndex((s) => s.id === inline[2])
    if (index < 0)
      throw new PipeError('E_CONFIG', `${inline[1]} has no step ${inline[2]} whose inline steps ${file} names`, {
        hint: 'Restore the pipeline as the run started with it.',
      })
    const result = await loadInlinePipeline(parent, index, kindCatalog)
    if (!result.ok)
      throw new PipeError('E_CONFIG', `${file} is not a valid pipeline:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {
        hint: `Fix the errors above (pipe validate ${inline[1]} lists them).`,
      })
    return result.loaded
  }
  const result = await loadPipeline(file, kindCatalog)
  if (!result.ok) {
    throw new PipeError('E_CONFIG', `${file} is not a valid pipeline:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {
      hint: `Fix the errors above (pipe validate ${file} lists them).`,
    })
  }
  // The values of the variables it names (webhook URLs, signing secrets) never reach a record.
  addSecretsNamedIn(result.loaded.pipeline)
  return result.loaded
}

/**
 * The cassette (read and checked now, so a bad one fails before anything is written) and the reply
 * cache of the store a session's provider may answer from. A relative cassette path is taken from
 * the working directory.
 */
export async function replySources(options: {cwd: string; store: string; cassette?: CassetteOptions; cache?: 'off' | 'reuse'}): Promise<ReplySources> {
  const replyCache = new ReplyCache(localRoot(options.cwd, options.store))
  if (!options.cassette) return {replyCache, ...(options.cache ? {cache: options.cache} : {})}
  const {Cassette} = await import('../../providers/cassette.js')
  const cassette = await Cassette.open({...options.cassette, file: path.resolve(options.cwd, options.cassette.file)})
  return {replyCache, cassette, ...(options.cache ? {cache: options.cache} : {})}
}

export async function policyOrThrow(explicit: string | undefined, cwd: string, ceiling?: string): Promise<LoadedPolicy> {
  const result = await resolvePolicy(explicit, cwd, ceiling)
  if (!result.ok)
    throw new PipeError('E_CONFIG', `invalid policy:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {
      hint: 'Fix the policy file (pipe validate policy.yaml).',
    })
  return result.loaded
}

export function engineFor(store: RunStore, options: SessionOptions, createProvider: EngineDeps['provider'], replies?: EngineDeps['replies']): Engine {
  return new Engine({
    store,
    provider: createProvider,
    ...(replies ? {replies} : {}),
    ...(options.onProgress ? {onProgress: options.onProgress} : {}),
    ...(options.signal ? {signal: options.signal} : {}),
    ...(options.hook ? {hook: options.hook} : faultsEnabled ? {hook: faultPoint} : {}),
    ...(options.user !== undefined ? {user: options.user} : {}),
    ...(options.via !== undefined ? {via: options.via} : {}),
    ...(options.now ? {now: options.now} : {}),
    ...(options.children ? {children: options.children} : {}),
    waitingSettings: (record) => waitingSettings(record, options.cwd),
  })
}

/**
 * The settings a run paused for a person runs with, so that a cancel (of it, of its parent, by
 * fail_fast) records the step it waits at as cancelled. A pipeline or policy that cannot be read as
 * the run recorded it leaves that snapshot out: what was asked, ending the run, never waits on a
 * file a person may have moved.
 */
async function waitingSettings(record: RunRecord, cwd: string): Promise<RunSettings | undefined> {
  if (record.status !== 'awaiting_input' || !record.pending) return undefined
  try {
    const pipeline = await loadPipelineOrThrow(record.pipeline.path)
    const policy = record.policy_path ? await policyOrThrow(record.policy_path, cwd) : defaultPolicy()
    if (pipeline.hash !== record.pipeline.hash || policy.version !== record.policy_version) return undefined
    return {pipeline, policy, cwd: record.workspace ?? cwd}
  } catch {
    return undefined
  }
}

/** The policy as steps see it: the store is off limits however the policy file reads. */
export function guarding(policy: LoadedPolicy, store: RunStore): LoadedPolicy {
  return {...policy, protected: [...(policy.protected ?? []), store.root]}
}

export function compact(map: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(map).filter((entry): entry is [string, string] => entry[1] !== undefined))
}

// People in the loop: answers and reviews given to a paused run.

type PendingKind = NonNullable<RunRecord['pending']>['kind']

/** The command that gives a paused run what it waits for. */
const GIVE: Record<PendingKind, {what: string; how: (runId: string) => string}> = {
  answers: {what: 'answers', how: (id) => `Answer its questions: pipe answer ${id} --file answers.yaml`},
  review: {what: 'a review', how: (id) => `Give a decision: pipe review ${id} --decision go|hold|drop`},
  confirm: {what: 'a confirmation', how: (id) => `Confirm or refuse what it waits at: pipe confirm ${id} --yes|--no`},
  budget: {what: 'a larger budget', how: (id) => `Raise its budget: pipe budget ${id} --add-tokens N (or --add-usd X) --note TEXT`},
}

/** The run's pending input when it waits for `kind`; otherwise E_STATE saying what it waits for, and the command that gives it. */
export function waitingFor<K extends PendingKind>(record: RunRecord, kind: K): NonNullable<RunRecord['pending']> & {kind: K} {
  const pending = record.status === 'awaiting_input' ? record.pending : undefined
  if (pending?.kind === kind) return pending as NonNullable<RunRecord['pending']> & {kind: K}
  const what = pending ? `it waits for ${GIVE[pending.kind].what}` : `it is ${record.status}`
  throw new PipeError('E_STATE', `run ${record.run_id} is not waiting for ${GIVE[kind].what} (${what})`, {
    hint: pending ? GIVE[pending.kind].how(record.run_id) : `pipe runs show ${record.run_id} shows its state.`,
  })
}

/** What answers to a run are checked against: the questions it waits for; a run waiting for none takes no answers. */
export function openQuestions(record: RunRecord): {
  run_id: string
  questions: NonNullable<NonNullable<RunRecord['pending']>['questions']>
  given: Record<string, string>
} {
  const pending = waitingFor(record, 'answers')
  return {run_id: record.run_id, questions: pending.questions ?? [], given: compact(record.answers ?? {})}
}

/** Answers given before a run has asked anything are checked against what its pipeline can ask about. */
export function upFront(pipeline: LoadedPipeline): {pipeline: string; fields: string[]} {
  return {pipeline: pipeline.pipeline.name, fields: answerableFields(pipeline.pipeline, KEY_FIELDS)}
}
