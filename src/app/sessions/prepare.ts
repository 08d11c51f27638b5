/**
 * Everything a run is started with (pipeline, policy, answers, input, typed inputs, provider), checked before anything is written, so bad input leaves the store unchanged:
 * the run's settings (StartOptions), built here once from what the command was given and passed down as they are.
 */
import path from 'node:path'
import {answersOf, checkAnswers, loadAnswersFile} from '../../config/answers.js'
import {formatDiagnostic} from '../../config/diagnostics.js'
import type {LoadedPipeline} from '../../config/pipeline.js'
import type {StartOptions} from '../../engine/engine-types.js'
import {PipeError} from '../../errors.js'
import {planProvider} from '../../providers/select.js'
import {handlerFor} from '../../steps/registry.js'
import {assertId} from '../../store/file/ids.js'
import type {RunStore} from '../../store/types.js'
import type {RunRecord} from '../../types/run.js'
import {decodeText, readInputFile, readStream} from '../../util/text-input.js'
import {readYamlFile} from '../../config/yaml-source.js'
import {resolveInputs, type InputDeclaration, type InputValue} from '../../expr/inputs.js'
import {readSecrets, unsetSecrets} from '../../engine/expressions.js'
import {type StartSession, guarding, loadPipelineOrThrow, policyOrThrow, replySources, upFront} from './shared.js'
import {measuredTools} from './tool-versions.js'
import {currentPerson} from '../identity.js'
import {approvalRule} from '../../policy/approvals.js'

async function readInput(options: StartSession, maxBytes: number): Promise<RunRecord['input']> {
  const given = [options.input !== undefined, options.text !== undefined].filter(Boolean).length
  if (given > 1)
    throw new PipeError('E_INVALID_ARGS', '--input and --text cannot be used together', {hint: 'Give the requirement one way: a file, - for stdin, or --text.'})
  if (options.text !== undefined) {
    return {kind: 'text', ref: 'text://argument', text: decodeText(Buffer.from(options.text, 'utf8'), '--text', maxBytes)}
  }
  if (options.input === '-') {
    if (!options.stdin)
      throw new PipeError('E_INPUT', 'no standard input to read', {hint: 'Give the requirement as --input FILE or --text "..." instead of --input -.'})
    return {
      kind: 'stdin',
      ref: 'stdin://',
      text: decodeText(await readStream(options.stdin(), 'standard input', maxBytes, options.signal), 'standard input', maxBytes),
    }
  }
  if (options.input !== undefined) {
    const file = path.resolve(options.cwd, options.input)
    const bytes = await readInputFile(file, `input file ${options.input}`, maxBytes, options.signal)
    return {kind: 'file', ref: `file://${file}`, text: decodeText(bytes, `input file ${options.input}`, maxBytes)}
  }
  return {kind: 'none', ref: 'none://'}
}

/**
 * The pipeline's typed inputs from -i pairs, a values file and defaults, every problem at once;
 * required inputs nobody gave are asked for when a person is at the terminal.
 */
async function prepareInputs(pipeline: LoadedPipeline, options: StartSession): Promise<Record<string, InputValue>> {
  const declarations = (pipeline.pipeline.inputs ?? {}) as Record<string, InputDeclaration>
  let file: {name: string; data: unknown} | undefined
  if (options.inputsFile !== undefined) {
    const read = await readYamlFile(path.resolve(options.cwd, options.inputsFile))
    if (!read.ok)
      throw new PipeError('E_INPUT', `cannot read the inputs file:\n${read.diagnostics.map(formatDiagnostic).join('\n')}`, {
        hint: 'Give --inputs a YAML mapping of input names to values.',
      })
    file = {name: options.inputsFile, data: read.source.data}
  } else if (options.inputsGiven !== undefined) file = options.inputsGiven
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
    throw new PipeError(
      'E_INPUT',
      `the inputs of pipeline ${pipeline.pipeline.name} have ${resolved.problems.length} problem(s):\n${resolved.problems.map((p) => `  ${p.message}`).join('\n')}`,
      {
        hint:
          names.length > 0
            ? `Give each as -i name=value or in --inputs FILE.yaml (inputs: ${names.join(', ')}); pipe validate ${pipeline.file} shows their declarations.`
            : 'This pipeline declares no inputs; leave out -i and --inputs.',
      },
    )
  }
  return resolved.values
}

/** How large a batch of runs' inputs (--inputs-file) may be. */
const MAX_BATCH_BYTES = 16 * 1024 * 1024

/**
 * The typed inputs of each run of a batch (pipe run --detach --inputs-file FILE): one JSON object a
 * line, each resolved as an --inputs file would be (-i over it, defaults under it). Every line is
 * checked before anything is written: a bad one is E_INVALID_ARGS naming its line, and so is a file
 * with no line at all, so a batch is queued whole or not at all. Blank lines are skipped.
 */
export async function batchInputs(pipeline: LoadedPipeline, options: StartSession, file: string): Promise<Array<Record<string, InputValue>>> {
  if (options.inputsFile !== undefined)
    throw new PipeError('E_INVALID_ARGS', '--inputs-file and --inputs cannot be used together', {
      hint: 'Put the values every run shares on each line of the --inputs-file, or give them with -i NAME=VALUE.',
    })
  const label = `inputs file ${file}`
  const bytes = await readInputFile(path.resolve(options.cwd, file), label, MAX_BATCH_BYTES, options.signal)
  const text = bytes.toString('utf8').trim() === '' ? '' : decodeText(bytes, label, MAX_BATCH_BYTES)
  const declarations = (pipeline.pipeline.inputs ?? {}) as Record<string, InputDeclaration>
  const runs: Array<Record<string, InputValue>> = []
  const problems: string[] = []
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue
    const where = `${file} line ${i + 1}`
    let data: unknown
    try {
      data = JSON.parse(line)
    } catch (error) {
      problems.push(`${where}: not JSON (${(error as Error).message})`)
      continue
    }
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      problems.push(`${where}: not a JSON object of input values`)
      continue
    }
    const resolved = resolveInputs(declarations, {cli: options.inputValues ?? [], file: {name: where, data}})
    if (resolved.problems.length > 0) problems.push(...resolved.problems.map((p) => (p.message.startsWith(where) ? p.message : `${where}: ${p.message}`)))
    else runs.push(resolved.values)
  }
  if (problems.length > 0)
    throw new PipeError('E_INVALID_ARGS', `${file}: ${problems.length} problem(s), nothing was queued:\n${problems.map((p) => `  ${p}`).join('\n')}`, {
      hint: `Each line of --inputs-file is one run's inputs as a JSON object (inputs: ${Object.keys(declarations).join(', ') || 'none declared'}); pipe validate ${pipeline.file} shows their declarations.`,
    })
  if (runs.length === 0)
    throw new PipeError('E_INVALID_ARGS', `${file} holds no run: nothing was queued`, {
      hint: 'Write one JSON object of a run\'s inputs a line, e.g. {"since": "v1.2"}.',
    })
  return runs
}

/** A new run's settings (but what only its store gives: see storeSettings) and the provider that answers its model steps. */
export interface PreparedStart {
  settings: StartOptions & {inputs: Record<string, InputValue>}
  provider: ReturnType<typeof planProvider>
  /** The pipeline's secrets the environment does not set (only a plan gets this far with any). */
  unsetSecrets: string[]
}

/**
 * `planOnly` (pipe run --dry-run): nothing will run, so a secret the environment does not set is
 * listed in `unsetSecrets` instead of refused; a run refuses it here, before anything is written.
 */
export async function prepareStart(options: StartSession, batch?: string, planOnly = false): Promise<PreparedStart> {
  if (options.feature !== undefined) assertId('feature', options.feature, '--feature')
  const contextRef = options.contextRef !== undefined ? parseContextRef(options.contextRef) : undefined
  const pipeline = await loadPipelineOrThrow(path.resolve(options.cwd, options.pipeline))
  const policy = await policyOrThrow(options.policy, options.cwd, options.policyCeiling)
  const answers = options.answers ? answersOf(await loadAnswersFile(path.resolve(options.cwd, options.answers))) : undefined
  if (answers) checkAnswers(answers, upFront(pipeline))
  if (answers) refuseRuledUpFront(pipeline, policy, 'answers')
  if (options.decision) refuseRuledUpFront(pipeline, policy, 'review')
  const input = await readInput(options, policy.policy.resource_limits.max_input_bytes ?? 1024 * 1024)
  if (input.kind === 'none' && pipeline.pipeline.steps.some((s) => handlerFor(s.kind).readsInput === true)) {
    throw new PipeError('E_INVALID_ARGS', `pipeline ${pipeline.pipeline.name} ingests a requirement, but none was given`, {
      hint: 'Add --input FILE, --input - (stdin) or --text "..."',
    })
  }
  // A batch's inputs are its lines' (batchInputs), resolved once per run by the caller.
  const inputs = batch === undefined ? await prepareInputs(pipeline, options) : {}
  // An unset secret stops the run here, before anything is written.
  const unset = unsetSecrets(pipeline.pipeline, options.env)
  if (!planOnly) readSecrets(pipeline.pipeline, options.env)
  const provider = planProvider(options.provider, pipeline.pipeline.provider, options.env ?? process.env, await replySources(options))
  const settings = {
    pipeline,
    policy,
    cwd: options.cwd,
    input,
    inputs,
    provider: provider.record,
    ...(options.env ? {env: options.env} : {}),
    ...(options.feature ? {featureId: options.feature} : {}),
    ...(contextRef ? {contextRef} : {}),
    // Only under approvals rules: asking git who this is costs a process start every run would pay.
    ...(policy.policy.approvals && Object.keys(policy.policy.approvals).length > 0 ? {startedBy: currentPerson(options.cwd, options.env ?? process.env)} : {}),
    ...(answers ? {answers} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  }
  return {settings, provider, unsetSecrets: unset}
}

/**
 * What a run's settings take from the store it is created in: the store is off limits to its steps,
 * and the declared tools are measured (a refused mismatch throws before the run exists).
 */
export async function storeSettings<S extends StartOptions>(settings: S, store: RunStore, signal?: AbortSignal): Promise<S> {
  const policy = guarding(settings.policy, store)
  const toolVersions = await measuredTools(policy, settings.cwd, signal)
  return {...settings, policy, ...(toolVersions ? {toolVersions} : {})}
}

const PROJECT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/
const CONTEXT_VERSION = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$/

/** Seed 002's Project Context Ref, `PROJECT@VERSION` (`acme-web@2026.03`), checked before anything is written. */
export function parseContextRef(given: string): NonNullable<RunRecord['context_ref']> {
  const at = given.lastIndexOf('@')
  const projectId = at < 0 ? given : given.slice(0, at)
  const version = at < 0 ? '' : given.slice(at + 1)
  if (at < 0 || !PROJECT_ID.test(projectId) || !CONTEXT_VERSION.test(version)) {
    throw new PipeError('E_INVALID_ARGS', `--context-ref ${JSON.stringify(given)} is not PROJECT@VERSION`, {
      hint: 'Give the project id and the version of its context, each letters, digits, ".", "_" or "-" (the version also "+"), up to 100 characters: --context-ref acme-web@2026.03',
    })
  }
  return {project_id: projectId, context_version: version}
}

/**
 * pipe run (and replay) --decision decides a review, and --answers answers the questions, before
 * anyone votes: under an approvals rule for such a gate of the pipeline, only votes (pipe review,
 * pipe answer) decide it, as at a paused run (pipe resume refuses them the same way).
 */
export function refuseRuledUpFront(pipeline: LoadedPipeline, policy: Awaited<ReturnType<typeof policyOrThrow>>, gate: 'review' | 'answers'): void {
  for (const step of pipeline.pipeline.steps) {
    if (handlerFor(step.kind).waitsFor !== gate) continue
    const rule = approvalRule(policy, {step: step.id, kind: gate})
    if (!rule) continue
    const [flag, what, how] =
      gate === 'review'
        ? ['--decision', 'decide the review', 'pipe review RUN --decision go|hold|drop']
        : ['--answers', 'answer the questions', 'pipe answer RUN --file FILE']
    throw new PipeError(
      'E_POLICY_DENIED',
      `${flag} would ${what} of step ${step.id} before anyone votes, but the policy's approvals.${rule.name} says who decides it (${rule.required} of: ${rule.people.join(', ')}); nothing was started`,
      {hint: `Start the run without ${flag}; when it waits at step ${step.id}, each person votes with ${how}.`},
    )
  }
}
