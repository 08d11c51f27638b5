/**
 * Everything between a command's flags and the engine: load and check the pipeline, the policy,
 * the answers and the input before anything is written, so bad input leaves the store unchanged.
 */
import {readFile} from 'node:fs/promises'
import path from 'node:path'
import {loadAnswersFile} from '../config/answers.js'
import {formatDiagnostic} from '../config/diagnostics.js'
import {loadPipeline, type LoadedPipeline} from '../config/pipeline.js'
import {loadPolicyFile, resolvePolicy} from '../config/policy.js'
import {PipeError} from '../errors.js'
import {defaultPolicy, type LoadedPolicy} from '../policy/policy.js'
import {planProvider, type ProviderChoice} from '../providers/select.js'
import {kindCatalog} from '../steps/registry.js'
import {Store} from '../store/store.js'
import type {RunRecord} from '../types/run.js'
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
    ...(options.hook ? {hook: options.hook} : {}),
  })
}

export async function startSession(options: StartSession): Promise<RunOutcome> {
  const pipeline = await loadPipelineOrThrow(path.resolve(options.cwd, options.pipeline))
  const policy = await policyOrThrow(options.policy, options.cwd)
  const answers = options.answers ? compact((await loadAnswersFile(path.resolve(options.cwd, options.answers))).answers) : undefined
  const input = await readInput(options, policy.policy.resource_limits.max_input_bytes ?? 1024 * 1024)
  if (input.kind === 'none' && pipeline.pipeline.steps.some((s) => s.kind === 'ingest')) {
    throw new PipeError('E_INVALID_ARGS', `pipeline ${pipeline.pipeline.name} ingests a requirement, but none was given`, {hint: 'Add --input FILE, --input - (stdin) or --text "..."'})
  }
  const provider = planProvider(options.provider, pipeline.pipeline.provider)
  const store = await Store.open(path.resolve(options.cwd, options.store))
  return engineFor(store, options, provider.create).start({
    pipeline,
    policy,
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
  const provider = planProvider(record.provider.kind === 'offline' ? 'offline' : 'auto', pipeline.pipeline.provider)
  return engineFor(store, options, provider.create).resume(options.runId, {
    pipeline,
    policy,
    cwd: options.cwd,
    ...(answers ? {answers} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  })
}

function compact(map: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(map).filter((entry): entry is [string, string] => entry[1] !== undefined))
}

export {loadPolicyFile}
