/**
 * Everything between a command's flags and the engine: load and check the pipeline, the policy,
 * the answers and the input before anything is written, so bad input leaves the store unchanged.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {loadAnswersFile} from '../config/answers.js'
import {formatDiagnostic} from '../config/diagnostics.js'
import {loadPipeline, type LoadedPipeline} from '../config/pipeline.js'
import {resolvePolicy} from '../config/policy.js'
import {PipeError} from '../errors.js'
import {defaultPolicy, type LoadedPolicy} from '../policy/policy.js'
import {planProvider, type ProviderChoice} from '../providers/select.js'
import {kindCatalog} from '../steps/registry.js'
import {Store} from '../store/store.js'
import type {RunRecord} from '../types/run.js'
import {faultPoint, faultsEnabled} from '../util/faults.js'
import {sameProcessAlive} from '../util/lock.js'
import {currentUser} from '../util/user.js'
import {decodeText} from '../util/text-input.js'
import {Engine, type EngineDeps, type RunOutcome} from './engine.js'

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
  stdin?: () => Promise<Buffer>
  feature?: string
  answers?: string
  decision?: Decision
  note?: string
  policy?: string
  provider?: ProviderChoice
}

export interface ResumeSession extends SessionOptions {
  runId: string
  answers?: string
  answerMap?: Record<string, string>
  decision?: Decision
  note?: string
}

export async function loadPipelineOrThrow(file: string): Promise<LoadedPipeline> {
  const result = await loadPipeline(file, kindCatalog)
  if (!result.ok) {
    throw new PipeError('E_CONFIG', `${file} is not a valid pipeline:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {hint: `Fix the errors above (pipe validate ${file} lists them).`})
  }
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
    return {kind: 'stdin', ref: 'stdin://', text: decodeText(await options.stdin(), 'standard input', maxBytes)}
  }
  if (options.input !== undefined) {
    const file = path.resolve(options.cwd, options.input)
    let bytes: Buffer
    try {
      bytes = await readFile(file)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      throw new PipeError('E_INPUT', code === 'ENOENT' ? `input file ${options.input} not found` : code === 'EISDIR' ? `input ${options.input} is a directory` : `cannot read input ${options.input} (${code})`, {
        hint: 'Check the path, or pass the requirement with --text "..." or on stdin with --input -',
      })
    }
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
async function prepareStart(options: StartSession): Promise<{pipeline: LoadedPipeline; policy: LoadedPolicy; answers: Record<string, string> | undefined; input: RunRecord['input']; provider: ReturnType<typeof planProvider>}> {
  const pipeline = await loadPipelineOrThrow(path.resolve(options.cwd, options.pipeline))
  const policy = await policyOrThrow(options.policy, options.cwd)
  const answers = options.answers ? compact((await loadAnswersFile(path.resolve(options.cwd, options.answers))).answers) : undefined
  const input = await readInput(options, policy.policy.resource_limits.max_input_bytes ?? 1024 * 1024)
  if (input.kind === 'none' && pipeline.pipeline.steps.some((s) => s.kind === 'ingest')) {
    throw new PipeError('E_INVALID_ARGS', `pipeline ${pipeline.pipeline.name} ingests a requirement, but none was given`, {hint: 'Add --input FILE, --input - (stdin) or --text "..."'})
  }
  const provider = planProvider(options.provider, pipeline.pipeline.provider)
  return {pipeline, policy, answers, input, provider}
}

export interface RunPlan {
  pipeline: {name: string; file: string; hash: string; start: string}
  policy: {file: string | null; version: string; max_retries_default: number}
  provider: RunRecord['provider']
  input: {kind: RunRecord['input']['kind']; ref: string; bytes: number}
  answers: string[]
  decision: Decision | null
  store: string
  steps: Array<{id: string; kind: string; transitions: Record<string, string>; max_iterations?: number; on_exhausted?: string; timeout_ms: number; retries: number; changes_spec: boolean; prompt?: string}>
}

/** pipe run --dry-run: what the run would use and do, with every input checked; nothing is written. */
export async function planSession(options: StartSession): Promise<RunPlan> {
  const {pipeline, policy, answers, input, provider} = await prepareStart(options)
  const {registry} = await import('../steps/registry.js')
  const {edgesOf, startStepId} = await import('../config/graph.js')
  const limits = policy.policy.resource_limits
  return {
    pipeline: {name: pipeline.pipeline.name, file: pipeline.file, hash: pipeline.hash, start: startStepId(pipeline.pipeline)},
    policy: {file: policy.file, version: policy.version, max_retries_default: policy.policy.max_retries_default},
    provider: provider.record,
    input: {kind: input.kind, ref: input.ref, bytes: Buffer.byteLength(input.text ?? '')},
    answers: Object.keys(answers ?? {}),
    decision: options.decision ?? null,
    store: path.resolve(options.cwd, options.store),
    steps: pipeline.pipeline.steps.map((step) => {
      const handler = registry[step.kind]
      const safe = step.retry?.safe ?? handler.safeToRetry
      return {
        id: step.id,
        kind: step.kind,
        transitions: Object.fromEntries(edgesOf(step).filter((e) => e.label !== 'exhausted').map((e) => [e.label === 'next' ? '*' : e.label, e.to])),
        ...(step.max_iterations !== undefined ? {max_iterations: step.max_iterations} : {}),
        ...(step.on_exhausted !== undefined ? {on_exhausted: step.on_exhausted} : {}),
        timeout_ms: step.timeout_ms ?? limits.step_timeout_ms ?? 600000,
        retries: safe ? (step.retry?.max_retries ?? policy.policy.max_retries_default) : 0,
        changes_spec: handler.changesSpec,
        ...('prompt' in step && step.prompt ? {prompt: step.prompt} : {}),
      }
    }),
  }
}

export async function startSession(options: StartSession): Promise<RunOutcome> {
  const {pipeline, policy, answers, input, provider} = await prepareStart(options)
  const store = await Store.open(path.resolve(options.cwd, options.store))
  return engineFor(store, options, provider.create).start({
    pipeline,
    policy: guarding(policy, store),
    cwd: options.cwd,
    input,
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
  // The run keeps the policy it started under: the same file, or the built-in default.
  const policy = record.policy_path ? await policyOrThrow(record.policy_path, options.cwd) : defaultPolicy()
  if (policy.version !== record.policy_version) {
    throw new PipeError('E_CONFLICT', `the policy changed since run ${options.runId} started (${record.policy_version} -> ${policy.version})`, {hint: 'Restore the policy as it was, or start a new run under the new policy.'})
  }
  let answers = options.answerMap
  if (options.answers) {
    const file = await loadAnswersFile(path.resolve(options.cwd, options.answers))
    if (file.run_id && file.run_id !== options.runId) throw new PipeError('E_INVALID_ARGS', `the answers file is for run ${file.run_id}, not ${options.runId}`, {hint: 'Use the answers file written for this run.'})
    answers = {...(answers ?? {}), ...compact(file.answers)}
  }
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

/** Checks answers against the questions the run waits for; the run is left as it was on any error. */
export async function answerSession(options: AnswerSession): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  if (record.status !== 'awaiting_input' || record.pending?.kind !== 'answers') {
    const what = record.status === 'awaiting_input' ? `it waits for a ${record.pending?.kind ?? 'decision'}` : `it is ${record.status}`
    throw new PipeError('E_STATE', `run ${options.runId} is not waiting for answers (${what})`, {
      hint: record.pending?.kind === 'review' ? `Give a decision: pipe review ${options.runId} --decision go|hold|drop` : `pipe runs show ${options.runId} shows its state.`,
    })
  }
  if (options.fileRunId && options.fileRunId !== options.runId) {
    throw new PipeError('E_INVALID_ARGS', `the answers are for run ${options.fileRunId}, not ${options.runId}`, {hint: 'Use the answers file written for this run.'})
  }
  const questions = record.pending.questions ?? []
  const keys = new Set(questions.flatMap((q) => [q.id, ...(q.field ? [q.field] : [])]))
  for (const key of Object.keys(options.answers)) {
    if (!keys.has(key)) {
      const {didYouMean} = await import('../config/suggest.js')
      throw new PipeError('E_INVALID_ARGS', `"${key}" is not a question of run ${options.runId}${didYouMean(key, keys)}`, {
        hint: `Its open questions: ${questions.map((q) => `${q.id}${q.field ? ` [${q.field}]` : ''}`).join(', ')}.`,
      })
    }
  }
  const known = {...(record.answers ?? {}), ...options.answers}
  const missing = questions.filter((q) => known[q.id] === undefined && (q.field === undefined || known[q.field] === undefined))
  if (missing.length > 0) {
    throw new PipeError('E_INVALID_ARGS', `no answer to ${missing.map((q) => `${q.id}${q.field ? ` [${q.field}]` : ''}`).join(', ')}`, {
      hint: 'Answer every open question (by its id or its field); an answer of "TBD" is allowed and keeps the field open.',
    })
  }
  const {answers, fileRunId: _fileRunId, ...rest} = options
  return resumeSession({...rest, answerMap: answers})
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
export async function reviewSummary(options: SessionOptions & {runId: string}): Promise<{spec: import('../types/spec.js').CanonicalSpec | null; gate: unknown; reason: string}> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const gate = [...snapshots].reverse().map((s) => (s.outputs as {gate_result?: unknown}).gate_result).find((g) => g !== undefined) ?? null
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
  let answers = compact(original.answers ?? {})
  if (options.answers) answers = {...answers, ...compact((await loadAnswersFile(path.resolve(options.cwd, options.answers))).answers)}
  const provider = planProvider(original.provider.kind === 'openai' ? 'openai' : 'offline', pipeline.pipeline.provider)
  return engineFor(store, options, provider.create).start({
    pipeline,
    policy: guarding(policy, store),
    cwd: original.workspace ?? options.cwd,
    input: original.input,
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
  const edits = snapshots.filter((s) => (s.outputs as {edit?: unknown}).edit !== undefined)
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
    const files = (target.outputs as {edit: {files: import('../edit/workspace.js').AppliedFile[]}}).edit.files
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
  const approved = snapshots.some((s) => {
    const out = s.outputs as {review_decision?: string; reviewed_version?: string}
    return out.review_decision === 'go' && out.reviewed_version === record.spec_version
  })
  if (!approved) {
    throw new PipeError('E_STATE', `spec ${record.spec_version} of run ${options.runId} has no review decision "go"; only approved versions are published`, {hint: `Review it first: pipe review ${options.runId} --decision go`})
  }
  const pipeline = await loadPipelineOrThrow(record.pipeline.path)
  if (pipeline.hash !== record.pipeline.hash) throw new PipeError('E_CONFLICT', `the pipeline ${record.pipeline.path} changed since run ${options.runId}`, {hint: 'Its targets may have changed too; restore the file to publish this run again.'})
  const targets = pipeline.pipeline.steps.flatMap((s) => (s.kind === 'publish' ? s.targets : []))
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
        if (!entry || entry.status !== 'uncertain') return
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
        results.push(await publishTo({ledger, target, spec, runId: options.runId, cwd: record.workspace ?? options.cwd, user, ...(options.signal ? {signal: options.signal} : {}), ...(options.env ? {env: options.env} : {})}))
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
