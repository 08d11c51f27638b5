/**
 * Everything between a command's flags and the engine: load and check the pipeline, the policy,
 * the answers and the input before anything is written, so bad input leaves the store unchanged.
 */
import path from 'node:path'
import type {Readable} from 'node:stream'
import {answerableFields, answersOf, checkAnswers, loadAnswersFile} from '../config/answers.js'
import {formatDiagnostic, type Diagnostic} from '../config/diagnostics.js'
import {diag, loadInlinePipeline, loadPipeline, pipelineWarnings, type LoadedPipeline} from '../config/pipeline.js'
import {existsSync} from 'node:fs'
import {resolvePolicy} from '../config/policy.js'
import {PipeError} from '../errors.js'
import {defaultPolicy, type LoadedPolicy} from '../policy/policy.js'
import {planProvider, type ProviderChoice} from '../providers/select.js'
import {KEY_FIELDS} from '../providers/spec-build.js'
import {handlerFor, kindCatalog} from '../steps/registry.js'
import {changesSpec, type StepHandler, type StepKind, type StepRegistry} from '../steps/types.js'
import {assertId} from '../store/ids.js'
import {Store} from '../store/store.js'
import type {RunRecord} from '../types/run.js'
import {faultPoint, faultsEnabled} from '../util/faults.js'
import {sameProcessAlive} from '../util/lock.js'
import {currentUser} from '../util/user.js'
import {addSecretsNamedIn} from '../util/redact.js'
import {decodeText, readInputFile, readStream} from '../util/text-input.js'
import {readYamlFile} from '../config/yaml-source.js'
import {resolveInputs, type InputDeclaration, type InputValue} from '../expr/inputs.js'
import {evaluatorFor, readSecrets, usesExpressions} from './expressions.js'
import {templatedStrings} from '../config/expressions.js'
import type {BoundExpressions, JsonValue} from '../expr/index.js'
import {Engine, type EngineDeps, type RunOutcome} from './engine.js'
import {isRedrivable} from './lifecycle.js'

export type Decision = 'go' | 'hold' | 'drop'

export interface SessionOptions {
  cwd: string
  store: string
  onProgress?: EngineDeps['onProgress']
  signal?: AbortSignal
  hook?: EngineDeps['hook']
}

export interface StartSession extends SessionOptions {
  pipeline: string
  input?: string
  text?: string
  /** Standard input, asked for only when the input is `-`. */
  stdin?: () => Readable
  feature?: string
  answers?: string
  decision?: Decision
  note?: string
  policy?: string
  provider?: ProviderChoice
  /** `-i name=value` pairs for the pipeline's typed inputs, in the order given. */
  inputValues?: string[]
  /** A YAML file of input values (`--inputs FILE`). */
  inputsFile?: string
  /** Asks a person for required inputs nobody gave (on a terminal); null when they gave none. */
  askInputs?: (missing: Array<{name: string; declaration: InputDeclaration}>) => Promise<Record<string, string> | null>
}

export interface ResumeSession extends SessionOptions {
  runId: string
  /** A changed policy for a redrive of a failed or blocked run. */
  policy?: string
  answers?: string
  answerMap?: Record<string, string>
  decision?: Decision
  note?: string
}

export async function loadPipelineOrThrow(file: string): Promise<LoadedPipeline> {
  // FILE#STEP names the inline steps of a step of FILE (a foreach's anonymous child pipeline).
  const inline = /^(.*)#([^#/]+)$/.exec(file)
  if (inline && !existsSync(file) && existsSync(inline[1]!)) {
    const parent = await loadPipelineOrThrow(inline[1]!)
    const index = parent.pipeline.steps.findIndex((s) => s.id === inline[2])
    if (index < 0) throw new PipeError('E_CONFIG', `${inline[1]} has no step ${inline[2]} whose inline steps ${file} names`, {hint: 'Restore the pipeline as the run started with it.'})
    const result = await loadInlinePipeline(parent, index, kindCatalog)
    if (!result.ok) throw new PipeError('E_CONFIG', `${file} is not a valid pipeline:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {hint: `Fix the errors above (pipe validate ${inline[1]} lists them).`})
    return result.loaded
  }
  const result = await loadPipeline(file, kindCatalog)
  if (!result.ok) {
    throw new PipeError('E_CONFIG', `${file} is not a valid pipeline:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {hint: `Fix the errors above (pipe validate ${file} lists them).`})
  }
  // The values of the variables it names (webhook URLs, signing secrets) never reach a record.
  addSecretsNamedIn(result.loaded.pipeline)
  return result.loaded
}

async function policyOrThrow(explicit: string | undefined, cwd: string): Promise<LoadedPolicy> {
  const result = await resolvePolicy(explicit, cwd)
  if (!result.ok) throw new PipeError('E_CONFIG', `invalid policy:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {hint: 'Fix the policy file (pipe validate policy.yaml).'})
  return result.loaded
}

async function readInput(options: StartSession, maxBytes: number): Promise<RunRecord['input']> {
  const given = [options.input !== undefined, options.text !== undefined].filter(Boolean).length
  if (given > 1) throw new PipeError('E_INVALID_ARGS', '--input and --text cannot be used together', {hint: 'Give the requirement one way: a file, - for stdin, or --text.'})
  if (options.text !== undefined) {
    return {kind: 'text', ref: 'text://argument', text: decodeText(Buffer.from(options.text, 'utf8'), '--text', maxBytes)}
  }
  if (options.input === '-') {
    if (!options.stdin) throw new PipeError('E_INPUT', 'no standard input to read')
    return {kind: 'stdin', ref: 'stdin://', text: decodeText(await readStream(options.stdin(), 'standard input', maxBytes, options.signal), 'standard input', maxBytes)}
  }
  if (options.input !== undefined) {
    const file = path.resolve(options.cwd, options.input)
    const bytes = await readInputFile(file, `input file ${options.input}`, maxBytes, options.signal)
    return {kind: 'file', ref: `file://${file}`, text: decodeText(bytes, `input file ${options.input}`, maxBytes)}
  }
  return {kind: 'none', ref: 'none://'}
}

function engineFor(store: Store, options: SessionOptions, createProvider: EngineDeps['provider']): Engine {
  return new Engine({
    store,
    provider: createProvider,
    ...(options.onProgress ? {onProgress: options.onProgress} : {}),
    ...(options.signal ? {signal: options.signal} : {}),
    ...(options.hook ? {hook: options.hook} : faultsEnabled ? {hook: faultPoint} : {}),
  })
}

/** Everything a run is started with, checked, before anything is written. */
/**
 * The pipeline's typed inputs from -i pairs, a values file and defaults, every problem at once;
 * required inputs nobody gave are asked for when a person is at the terminal.
 */
async function prepareInputs(pipeline: LoadedPipeline, options: StartSession): Promise<Record<string, InputValue>> {
  const declarations = (pipeline.pipeline.inputs ?? {}) as Record<string, InputDeclaration>
  let file: {name: string; data: unknown} | undefined
  if (options.inputsFile !== undefined) {
    const read = await readYamlFile(path.resolve(options.cwd, options.inputsFile))
    if (!read.ok) throw new PipeError('E_INPUT', `cannot read the inputs file:\n${read.diagnostics.map(formatDiagnostic).join('\n')}`, {hint: 'Give --inputs a YAML mapping of input names to values.'})
    file = {name: options.inputsFile, data: read.source.data}
  }
  let cli = options.inputValues ?? []
  let resolved = resolveInputs(declarations, {cli, ...(file ? {file} : {})})
  const troubled = new Set(resolved.problems.flatMap((p) => (p.input === undefined ? [] : [p.input])))
  const missing = Object.entries(declarations).filter(([name, d]) => d.required === true && !Object.hasOwn(resolved.values, name) && !troubled.has(name))
  if (missing.length > 0 && options.askInputs) {
    const given = await options.askInputs(missing.map(([name, declaration]) => ({name, declaration})))
    if (given) {
      cli = [...cli, ...Object.entries(given).map(([name, value]) => `${name}=${value}`)]
      resolved = resolveInputs(declarations, {cli, ...(file ? {file} : {})})
    }
  }
  if (resolved.problems.length > 0) {
    const names = Object.keys(declarations)
    throw new PipeError('E_INPUT', `the inputs of pipeline ${pipeline.pipeline.name} have ${resolved.problems.length} problem(s):\n${resolved.problems.map((p) => `  ${p.message}`).join('\n')}`, {
      hint: names.length > 0 ? `Give each as -i name=value or in --inputs FILE.yaml (inputs: ${names.join(', ')}); pipe validate ${pipeline.file} shows their declarations.` : 'This pipeline declares no inputs; leave out -i and --inputs.',
    })
  }
  return resolved.values
}

async function prepareStart(options: StartSession): Promise<{pipeline: LoadedPipeline; policy: LoadedPolicy; answers: Record<string, string> | undefined; input: RunRecord['input']; provider: ReturnType<typeof planProvider>; inputs: Record<string, InputValue>}> {
  if (options.feature !== undefined) assertId('feature', options.feature, '--feature')
  const pipeline = await loadPipelineOrThrow(path.resolve(options.cwd, options.pipeline))
  const policy = await policyOrThrow(options.policy, options.cwd)
  const answers = options.answers ? answersOf(await loadAnswersFile(path.resolve(options.cwd, options.answers))) : undefined
  if (answers) checkAnswers(answers, upFront(pipeline))
  const input = await readInput(options, policy.policy.resource_limits.max_input_bytes ?? 1024 * 1024)
  if (input.kind === 'none' && pipeline.pipeline.steps.some((s) => handlerFor(s.kind).readsInput === true)) {
    throw new PipeError('E_INVALID_ARGS', `pipeline ${pipeline.pipeline.name} ingests a requirement, but none was given`, {hint: 'Add --input FILE, --input - (stdin) or --text "..."'})
  }
  const inputs = await prepareInputs(pipeline, options)
  // An unset secret stops the run here, before anything is written.
  readSecrets(pipeline.pipeline)
  const provider = planProvider(options.provider, pipeline.pipeline.provider)
  return {pipeline, policy, answers, input, provider, inputs}
}

export interface RunPlan {
  pipeline: {name: string; file: string; hash: string; start: string}
  policy: {file: string | null; version: string; max_retries_default: number}
  provider: RunRecord['provider']
  input: {kind: RunRecord['input']['kind']; ref: string; bytes: number}
  /** The values of the pipeline's typed inputs the run would use. */
  inputs: Record<string, InputValue>
  answers: string[]
  decision: Decision | null
  store: string
  steps: Array<{
    id: string
    kind: string
    transitions: Record<string, string>
    /** Every outcome the step can end with (error too). */
    outcomes: string[]
    /** What each outcome no route takes does to the run: a failure ends it failed, a stop waits or cancels. */
    unrouted: Record<string, 'ends' | 'failed' | 'awaiting_input' | 'cancelled'>
    max_iterations?: number
    on_exhausted?: string
    /** Null for a step that waits for child runs and has no timeout_ms of its own (each child step has its own). */
    timeout_ms: number | null
    retries: number
    changes_spec: boolean
    prompt?: string
    /** Fields whose expressions read only inputs, resolved with the given inputs (the rest are known only while running). */
    resolved?: Record<string, JsonValue>
  }>
  /** Commands of the pipeline the policy will deny: the run would fail at them with E_POLICY_DENIED. */
  denied: Diagnostic[]
  /** The pipeline's warnings (pipe validate shows the same). */
  warnings: Diagnostic[]
}

/** pipe run --dry-run: what the run would use and do, with every input checked; nothing is written. */
export async function planSession(options: StartSession): Promise<RunPlan> {
  const {pipeline, policy, answers, input, provider, inputs} = await prepareStart(options)
  const {registry} = await import('../steps/registry.js')
  const {edgesOf, startStepId} = await import('../config/graph.js')
  const {deniedCommands} = await import('../steps/policy-check.js')
  const limits = policy.policy.resource_limits
  const statics = usesExpressions(pipeline.pipeline) ? (await evaluatorFor(pipeline, kindCatalog)).bind({inputs, run: {id: '(new run)', feature_id: options.feature ?? '(new feature)', parent: null}}) : null
  return {
    pipeline: {name: pipeline.pipeline.name, file: pipeline.file, hash: pipeline.hash, start: startStepId(pipeline.pipeline)},
    policy: {file: policy.file, version: policy.version, max_retries_default: policy.policy.max_retries_default},
    provider: provider.record,
    input: {kind: input.kind, ref: input.ref, bytes: Buffer.byteLength(input.text ?? '')},
    inputs,
    answers: Object.keys(answers ?? {}),
    decision: options.decision ?? null,
    store: path.resolve(options.cwd, options.store),
    steps: pipeline.pipeline.steps.map((step) => {
      const handler = registry[step.kind] as StepHandler<StepKind>
      const safe = step.retry?.safe ?? handler.safeToRetry
      const outcomes = [...handler.outcomes(step), 'error', ...(step.when !== undefined ? ['skipped'] : [])]
      const edges = edgesOf(step)
      const unrouted: RunPlan['steps'][number]['unrouted'] = {}
      for (const outcome of outcomes) {
        const stop = handler.stops?.[outcome]
        if (stop) unrouted[outcome] = stop
        // A choice's outcomes are the steps it chose: each has its own edge.
        else if (step.on?.[outcome] !== undefined || edges.some((e) => e.label === outcome)) continue
        else if (handler.failures?.[outcome] || outcome === 'error') unrouted[outcome] = 'failed'
        else if (step.next === undefined) unrouted[outcome] = 'ends'
      }
      return {
        id: step.id,
        kind: step.kind,
        transitions: Object.fromEntries(edges.filter((e) => e.label !== 'exhausted').map((e) => [e.label === 'next' ? '*' : e.label, e.to])),
        outcomes,
        unrouted,
        ...(step.max_iterations !== undefined ? {max_iterations: step.max_iterations} : {}),
        ...(step.on_exhausted !== undefined ? {on_exhausted: step.on_exhausted} : {}),
        timeout_ms: step.timeout_ms ?? (handler.waitsForChildren ? null : (limits.step_timeout_ms ?? 600000)),
        retries: safe ? (step.retry?.max_retries ?? policy.policy.max_retries_default) : 0,
        changes_spec: changesSpec(handler, step),
        ...('prompt' in step && step.prompt ? {prompt: step.prompt} : {}),
        ...staticValues(step, statics),
      }
    }),
    denied: deniedCommands(pipeline, policy),
    warnings: [...pipelineWarnings(pipeline, kindCatalog), ...offlineModelWarnings(pipeline, provider.record, registry)],
  }
}

/** Steps only a real model can run, when the run would use the offline rules provider. */
function offlineModelWarnings(pipeline: LoadedPipeline, provider: RunRecord['provider'], registry: StepRegistry): Diagnostic[] {
  if (provider.kind !== 'offline') return []
  return pipeline.pipeline.steps.flatMap((step, i) =>
    (registry[step.kind] as StepHandler<StepKind>).needsModel
      ? [{...diag(pipeline, ['steps', i, 'kind'], `step "${step.id}" needs a model, but the run would use the offline rules provider, so it would fail with E_CONFIG; set OPENAI_API_KEY (and OPENAI_BASE_URL) or pass --provider openai`), rule: 'needs-model', severity: 'warning' as const}]
      : [],
  )
}

/** The values of a step's expressions that read nothing but inputs (what --dry-run can already tell). */
function staticValues(step: LoadedPipeline['pipeline']['steps'][number], bound: BoundExpressions | null): {resolved?: Record<string, JsonValue>} {
  if (!bound) return {}
  const out: Record<string, JsonValue> = {}
  for (const {segments, text} of templatedStrings(step)) {
    if (/\b(steps|spec|secrets)\b/.test(text) || /\brun\.id\b/.test(text)) continue
    if (segments[0] === 'choices') continue
    try {
      out[segments.reduce<string>((acc, s) => (typeof s === 'number' ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '')] = bound.render(text)
    } catch {
      // Known only at run time (or an error the run reports at its step).
    }
  }
  return Object.keys(out).length > 0 ? {resolved: out} : {}
}

export async function startSession(options: StartSession): Promise<RunOutcome> {
  const {pipeline, policy, answers, input, provider, inputs} = await prepareStart(options)
  const store = await Store.open(path.resolve(options.cwd, options.store))
  return engineFor(store, options, provider.create).start({
    pipeline,
    policy: guarding(policy, store),
    cwd: options.cwd,
    input,
    inputs,
    provider: provider.record,
    ...(options.feature ? {featureId: options.feature} : {}),
    ...(answers ? {answers} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  })
}

export async function resumeSession(options: ResumeSession): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  const pipeline = await loadPipelineOrThrow(record.pipeline.path)
  // The run keeps the policy it runs under (the same file, or the built-in default) unless a
  // redrive names another; the engine allows that only for a failed or blocked run.
  const policy = options.policy ? await policyOrThrow(options.policy, options.cwd) : record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
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
    if (file.run_id && file.run_id !== options.runId) throw new PipeError('E_INVALID_ARGS', `the answers file is for run ${file.run_id}, not ${options.runId}`, {hint: 'Use the answers file written for this run.'})
    answers = {...(answers ?? {}), ...answersOf(file)}
  }
  if (answers) checkAnswers(answers, openQuestions(record))
  readSecrets(pipeline.pipeline)
  const provider = planProvider(record.provider.kind === 'openai' ? 'openai' : 'offline', pipeline.pipeline.provider)
  return engineFor(store, options, provider.create).resume(options.runId, {
    pipeline,
    policy: guarding(policy, store),
    // Steps act in the workspace the run started in, wherever resume is called from.
    cwd: record.workspace ?? options.cwd,
    ...(answers ? {answers} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  })
}

/** The policy as steps see it: the store is off limits however the policy file reads. */
function guarding(policy: LoadedPolicy, store: Store): LoadedPolicy {
  return {...policy, protected: [...(policy.protected ?? []), store.root]}
}

function compact(map: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(map).filter((entry): entry is [string, string] => entry[1] !== undefined))
}


// People in the loop: answers and reviews given to a paused run.

export interface AnswerSession extends SessionOptions {
  runId: string
  answers: Record<string, string>
  fileRunId?: string
}

/** Checks answers against the questions the run waits for (in resumeSession); the run is left as it was on any error. */
export async function answerSession(options: AnswerSession): Promise<RunOutcome> {
  if (options.fileRunId && options.fileRunId !== options.runId) {
    const store = await Store.existing(path.resolve(options.cwd, options.store))
    openQuestions(await store.readRun(options.runId))
    throw new PipeError('E_INVALID_ARGS', `the answers are for run ${options.fileRunId}, not ${options.runId}`, {hint: 'Use the answers file written for this run.'})
  }
  const {answers, fileRunId: _fileRunId, ...rest} = options
  return resumeSession({...rest, answerMap: answers})
}

/** What answers to a run are checked against: the questions it waits for; a run waiting for none takes no answers. */
function openQuestions(record: RunRecord): {run_id: string; questions: NonNullable<NonNullable<RunRecord['pending']>['questions']>; given: Record<string, string>} {
  if (record.status !== 'awaiting_input' || record.pending?.kind !== 'answers') {
    const what = record.status === 'awaiting_input' ? `it waits for a ${record.pending?.kind ?? 'decision'}` : `it is ${record.status}`
    throw new PipeError('E_STATE', `run ${record.run_id} is not waiting for answers (${what})`, {
      hint: record.pending?.kind === 'review' ? `Give a decision: pipe review ${record.run_id} --decision go|hold|drop` : `pipe runs show ${record.run_id} shows its state.`,
    })
  }
  return {run_id: record.run_id, questions: record.pending.questions ?? [], given: compact(record.answers ?? {})}
}

/** Answers given before a run has asked anything are checked against what its pipeline can ask about. */
function upFront(pipeline: LoadedPipeline): {pipeline: string; fields: string[]} {
  return {pipeline: pipeline.pipeline.name, fields: answerableFields(pipeline.pipeline, KEY_FIELDS)}
}

export interface ReviewSession extends SessionOptions {
  runId: string
  decision: Decision
  note?: string
}

export async function reviewSession(options: ReviewSession): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  if (record.status !== 'awaiting_input' || record.pending?.kind !== 'review') {
    const what = record.status === 'awaiting_input' ? `it waits for ${record.pending?.kind ?? 'input'}` : `it is ${record.status}`
    throw new PipeError('E_STATE', `run ${options.runId} is not waiting for a review (${what})`, {
      hint: record.pending?.kind === 'answers' ? `Answer its questions first: pipe answer ${options.runId} --file answers.yaml` : `pipe runs show ${options.runId} shows its state.`,
    })
  }
  return resumeSession({...options})
}

/** What a reviewer sees before deciding: the spec under review and its latest gate result. */
export async function reviewSummary(options: SessionOptions & {runId: string}): Promise<{spec: import('../types/spec.js').CanonicalSpec | null; gate: import('../gates/evaluate.js').GateResult | null; reason: string}> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const {gateResult} = await import('../steps/gate.js')
  const gate = gateResult.latest(snapshots) ?? null
  const spec = record.spec_version ? await store.readSpec(record.spec_version) : null
  return {spec, gate, reason: record.pending?.reason ?? ''}
}

// Ending a run by hand.

export async function cancelSession(options: SessionOptions & {runId: string; reason?: string; waitMs?: number}): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  const owner = await store.runOwner(options.runId)
  // Alive means that very process: the pid with the start time it recorded, never a later process that got the pid.
  if (record.status === 'running' && owner?.alive && owner.pid !== process.pid && sameProcessAlive(owner.pid, owner.start_time)) {
    // Ask the process driving it to stop; it records the run as interrupted, then we cancel it.
    process.kill(owner.pid, 'SIGTERM')
    const deadline = Date.now() + (options.waitMs ?? 15000)
    while (Date.now() < deadline && (await store.runOwner(options.runId))?.alive) await new Promise((r) => setTimeout(r, 100))
  }
  const engine = engineFor(store, options, async () => Promise.reject(new PipeError('E_INTERNAL', 'no provider while cancelling')))
  return engine.cancel(options.runId, options.reason ?? 'cancelled by hand')
}

// Replay.

export interface ReplaySession extends SessionOptions {
  runId: string
  from?: string
  seq?: number
  answers?: string
  decision?: Decision
  note?: string
}

export async function replaySession(options: ReplaySession): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const original = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const fork = options.seq !== undefined ? snapshots.find((s) => s.step.seq === options.seq) : snapshots.find((s) => s.step.name === options.from)
  if (!fork) {
    const steps = [...new Set(snapshots.map((s) => s.step.name))]
    throw new PipeError('E_INVALID_ARGS', `run ${options.runId} has no snapshot ${options.seq !== undefined ? `with seq ${options.seq}` : `of step "${options.from}"`}`, {
      hint: steps.length ? `Replay from one of its steps: ${steps.join(', ')}.` : 'The run has not recorded a step yet.',
    })
  }
  const pipeline = await loadPipelineOrThrow(original.pipeline.path)
  if (pipeline.hash !== original.pipeline.hash) {
    throw new PipeError('E_CONFLICT', `the pipeline ${original.pipeline.path} changed since run ${options.runId}`, {hint: 'Replay needs the pipeline as it was; restore it first.'})
  }
  const policy = original.policy_path ? await policyOrThrow(original.policy_path, options.cwd) : defaultPolicy()
  readSecrets(pipeline.pipeline)
  let answers = compact(original.answers ?? {})
  if (options.answers) {
    const given = answersOf(await loadAnswersFile(path.resolve(options.cwd, options.answers)))
    checkAnswers(given, upFront(pipeline))
    answers = {...answers, ...given}
  }
  const provider = planProvider(original.provider.kind === 'openai' ? 'openai' : 'offline', pipeline.pipeline.provider)
  return engineFor(store, options, provider.create).start({
    pipeline,
    policy: guarding(policy, store),
    cwd: original.workspace ?? options.cwd,
    input: original.input,
    ...(original.inputs ? {inputs: original.inputs} : {}),
    provider: provider.record,
    featureId: original.feature_id,
    answers,
    replayOf: {run_id: options.runId, seq: fork.step.seq, step: fork.step.name},
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  })
}

// Undoing an edit step by hand.

export interface RollbackResult {
  run_id: string
  step: string
  seq: number
  files: Array<{path: string; restored: 'deleted' | 'reverted'}>
}

export async function rollbackEditSession(options: SessionOptions & {runId: string; step?: string; seq?: number}): Promise<RollbackResult> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const {appliedEdit} = await import('../steps/edit.js')
  const edits = snapshots.filter((s) => appliedEdit.of(s) !== undefined)
  const target = [...edits].reverse().find((s) => (options.seq !== undefined ? s.step.seq === options.seq : options.step === undefined || s.step.name === options.step))
  if (!target) {
    throw new PipeError('E_INVALID_ARGS', `run ${options.runId} has no applied edit${options.step ? ` from step "${options.step}"` : options.seq !== undefined ? ` with seq ${options.seq}` : ''}`, {
      hint: edits.length ? `Its edits: ${edits.map((s) => `${s.step.name} (#${s.step.seq})`).join(', ')}.` : 'Only edit steps that applied can be undone.',
    })
  }
  const already = (await store.readEvents(options.runId)).some((e) => e.event === 'edit_reverted' && e.seq === target.step.seq)
  if (already) throw new PipeError('E_STATE', `the edit of step "${target.step.name}" (#${target.step.seq}) was already undone`, {hint: `pipe runs show ${options.runId} shows when.`})
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
  const release = await store.acquireRun(options.runId)
  try {
    const {revertEdit} = await import('../edit/workspace.js')
    const files = appliedEdit.of(target)!.files
    const restored = await revertEdit(guarding(policy, store), record.workspace ?? options.cwd, files)
    await store.appendEvent(options.runId, {at: new Date().toISOString(), event: 'edit_reverted', step: target.step.name, seq: target.step.seq, by: currentUser(), reason: `restored ${restored.map((r) => `${r.path} (${r.restored})`).join(', ')}`})
    return {run_id: options.runId, step: target.step.name, seq: target.step.seq, files: restored}
  } finally {
    await release()
  }
}

// Publishing again by hand.

export interface PublishSession extends SessionOptions {
  runId: string
  target?: string
  resend?: boolean
  markDelivered?: boolean
  env?: NodeJS.ProcessEnv
}

export async function publishSession(options: PublishSession): Promise<{run_id: string; spec_version: string; results: import('../publish/deliver.js').PublishOutcome[]}> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  if (!record.spec_version) throw new PipeError('E_STATE', `run ${options.runId} has no spec version to publish`, {hint: `pipe runs show ${options.runId} shows how far it got.`})
  const snapshots = await store.readSnapshots(options.runId)
  const {approves} = await import('../steps/review.js')
  const approved = snapshots.some((s) => approves(s, record.spec_version))
  if (!approved) {
    throw new PipeError('E_STATE', `spec ${record.spec_version} of run ${options.runId} has no review decision "go"; only approved versions are published`, {hint: `Review it first: pipe review ${options.runId} --decision go`})
  }
  const pipeline = await loadPipelineOrThrow(record.pipeline.path)
  if (pipeline.hash !== record.pipeline.hash) throw new PipeError('E_CONFLICT', `the pipeline ${record.pipeline.path} changed since run ${options.runId}`, {hint: 'Its targets may have changed too; restore the file to publish this run again.'})
  const {publishTargets} = await import('../steps/publish.js')
  const targets = publishTargets(pipeline.pipeline.steps)
  const chosen = options.target ? targets.filter((t) => t.name === options.target) : targets
  if (chosen.length === 0) {
    const {didYouMean} = await import('../config/suggest.js')
    throw new PipeError('E_INVALID_ARGS', options.target ? `the pipeline has no publish target "${options.target}"${didYouMean(options.target, targets.map((t) => t.name))}` : 'the pipeline has no publish targets', {
      hint: targets.length ? `Its targets: ${targets.map((t) => t.name).join(', ')}.` : 'Add a publish step with targets to the pipeline.',
    })
  }
  const spec = await store.readSpec(record.spec_version)
  const {Ledger, ledgerKey} = await import('../store/ledger.js')
  const {publishTo} = await import('../publish/deliver.js')
  const {backoffFor} = await import('./retry.js')
  const user = currentUser()
  const ledger = new Ledger(store)
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
  const attempts = 1 + policy.policy.max_retries_default
  const results = []
  for (const target of chosen) {
    const key = ledgerKey(spec.meta.feature_id, target.name, spec.meta.spec_version)
    if (options.resend || options.markDelivered) {
      await ledger.withKey(key, async () => {
        const entry = await ledger.read(key)
        // Held as uncertain, or sent with an unknown outcome and waiting for its resend.
        if (!entry || (entry.status !== 'uncertain' && !(entry.status !== 'delivered' && entry.attempts.at(-1)?.state === 'unknown'))) return
        const at = new Date().toISOString()
        if (options.markDelivered) {
          entry.status = 'delivered'
          entry.external_id ??= key
          entry.delivered_at = at
          entry.attempts.push({n: entry.attempts.length + 1, started_at: at, finished_at: at, state: 'delivered', by: user, error: 'marked delivered by hand after checking the channel'})
        } else entry.status = 'pending'
        entry.updated_at = at
        await ledger.write(entry)
      })
    }
    for (let attempt = 1; ; attempt++) {
      try {
        results.push(await publishTo({ledger, target, spec, runId: options.runId, cwd: record.workspace ?? options.cwd, user, resendUnknown: attempt === 1, ...(options.signal ? {signal: options.signal} : {}), ...(options.env ? {env: options.env} : {})}))
        break
      } catch (error) {
        if (!(error instanceof PipeError) || !error.retryable || attempt >= attempts) throw error
        await new Promise((r) => setTimeout(r, backoffFor(attempt - 1, Math.random())))
      }
    }
  }
  await store.appendEvent(options.runId, {
    at: new Date().toISOString(),
    event: 'published',
    by: user,
    reason: results.map((r) => `${r.target}: ${r.status} (${r.external_id})`).join(', '),
  })
  return {run_id: options.runId, spec_version: spec.meta.spec_version, results}
}
