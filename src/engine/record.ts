/**
 * The record of a finished step: its snapshot, the spec version it writes and its evidence,
 * assembled before any of it is written so the store's commit (RunStore.commitStep) can log them
 * as one line and write them so a crash loses nothing. Where the run goes next is decide.ts's; this module stamps that decision's
 * error with a trace id and the time, and redacts what a resolved secret could have reached.
 */
import {PipeError} from '../errors.js'
import type {ModelCall} from '../providers/reply-transport.js'
import type {Usage} from '../providers/types.js'
import {failuresOf} from '../steps/registry.js'
import {changesSpec, type StepDone, type StepHandler, type StepKind, type StepRegistry} from '../steps/types.js'
import type {ProviderSettings, Step} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {redact, redactDeep} from '../util/redact.js'
import {newTraceId} from '../util/trace.js'
import {decide} from './decide.js'
import type {StepCommit} from '../store/types.js'
import type {RunSettings} from './engine-types.js'

export const ENGINE_VERSION = 'pipe-engine-0.1'

/** How a step's attempts went, as its snapshot records them. */
export interface StepTiming {
  seq: number
  /** Which entry into the step this is (1 for the first), for its max_iterations. */
  iteration: number
  started: Date
  ended: Date
  attempts: number
  /** The failure needs a person: the run stops at this step. */
  blocked: boolean
  /** Its when: was false: it did not run. */
  skipped: boolean
  /** pipe cancel stopped it: it changes no spec, and what it did is its evidence. */
  cancelled?: boolean
  /** The pipeline declares secrets, so everything the step returned is redacted. */
  secrets: boolean
  modelCalls: ModelCall[]
}

/** Everything known about a step when it has ended: what it is, how it went, and the run it is in. */
export interface StepEnded {
  record: RunRecord
  step: Step
  handler: StepHandler<StepKind>
  registry: StepRegistry
  timing: StepTiming
  /** The errors of its attempts. */
  errors: Snapshot['errors']
  /** Its result; undefined when its last attempt threw. */
  result: StepDone | undefined
  /** The spec version the step read. */
  current: CanonicalSpec | null
  settings: RunSettings
  /** The run's snapshots before this one. */
  before: readonly Snapshot[]
}

/** Everything a finished step will record, before any of it is written (see RunStore.commitStep). */
export function stepCommitOf(ended: StepEnded): StepCommit {
  const {record, step, handler, timing, result, current, settings, before} = ended
  const runId = record.run_id
  const {seq, iteration, started, attempts} = timing
  const endedAt = timing.ended
  const previous = before.at(-1) ?? null
  const errors = [...ended.errors]
  let spec: StepCommit['spec'] = null
  const evidence: StepCommit['evidence'] = []
  if (result) {
    for (const draft of result.evidence ?? []) {
      const {link, ...rest} = draft
      evidence.push({draft: rest, link: link ?? rest.type})
    }
    if (result.spec) {
      if (!changesSpec(handler, step)) throw new PipeError('E_INTERNAL', `step kind ${step.kind} returned a spec but does not change specs`)
      const title = result.spec.title ?? current?.meta.title
      spec = {
        draft: {
          ...result.spec.body,
          meta: {
            feature_id: record.feature_id,
            status: result.spec.status,
            parent_version: current?.meta.spec_version ?? null,
            run_id: runId,
            created_by_step: step.id,
            created_at: endedAt.toISOString(),
            ...(title ? {title} : {}),
            ...(result.spec.missing_fields && result.spec.missing_fields.length > 0 ? {missing_fields: result.spec.missing_fields} : {}),
          },
        },
      }
    } else if (changesSpec(handler, step) && !timing.skipped && timing.cancelled !== true) {
      throw new PipeError('E_INTERNAL', `step kind ${step.kind} changes specs but returned none`)
    }
  }
  const decided = decide({
    run_id: runId,
    step,
    failures: failuresOf(handler),
    ending: result ? {type: 'done', result} : {type: 'error', error: errors.at(-1)!, attempts, blocked: timing.blocked},
    history: before,
    registry: ended.registry,
  })
  const decisions: Snapshot['decisions'] = [decided.decision]
  if (decided.error) {
    const {code, message, hint, details} = decided.error
    errors.push({
      code,
      message: redact(message),
      trace_id: newTraceId(),
      retryable: false,
      attempt: attempts,
      at: endedAt.toISOString(),
      ...(hint !== undefined ? {hint: redact(hint)} : {}),
      ...(details ? {details} : {}),
    })
  }
  const failed = errorEvidence(runId, step.id, seq, decisions, errors, result?.outputs)
  if (failed) evidence.push({draft: failed, link: 'log'})
  const stopped = timing.cancelled === true ? cancelledEvidence(runId, step.id, seq, decisions, result?.outputs) : null
  if (stopped) evidence.push({draft: stopped, link: 'log'})
  const context = contextRefOf(record, step, seq, result, before)
  // What the step says it read; its context_ref is the one worked out above.
  const {context_ref: _own, ...stepInputs} = result?.inputs ?? {}
  const replayStart = record.replay_of && seq === 1 ? {replay_of: {run_id: record.replay_of.run_id, seq: record.replay_of.seq}} : {}
  const snapshot: Snapshot = {
    run_id: runId,
    feature_id: record.feature_id,
    spec_version_in: current?.meta.spec_version ?? null,
    spec_version_out: null,
    step: {
      name: step.id,
      kind: step.kind,
      seq,
      iteration,
      attempts,
      started_at: started.toISOString(),
      ended_at: endedAt.toISOString(),
      duration_ms: Math.max(0, endedAt.getTime() - started.getTime()),
    },
    inputs: {
      canonical_spec_ref: current?.meta.spec_version ?? null,
      context_ref: context.ref,
      user_answer_ref: null,
      ...(result?.inputs ? (timing.secrets ? redactDeep(stepInputs) : stepInputs) : {}),
    },
    outputs: result ? (timing.secrets ? redactDeep({...result.outputs}) : {...result.outputs}) : {},
    decisions,
    evidence_links: context.links,
    errors,
    ...(result?.toolCalls ? {tool_calls: timing.secrets ? redactDeep(result.toolCalls) : result.toolCalls} : {}),
    meta: {
      engine_version: ENGINE_VERSION,
      llm_model: result?.llmModel ?? null,
      provider: record.provider.kind,
      endpoint_host: record.provider.endpoint_host ?? null,
      policy_version: settings.policy.version,
      pipeline: settings.pipeline.pipeline.name,
      pipeline_hash: settings.pipeline.hash,
      prev_hash: previous?.meta.record_hash ?? null,
      ...replayStart,
      ...(result?.usage ? {usage: usageWithCost(result.usage, settings.pipeline.pipeline.provider?.prices ?? settings.inheritedPrices)} : {}),
      ...(timing.modelCalls.length > 0 ? {model_calls: timing.modelCalls} : {}),
      extensions: {},
    },
  }
  return {run_id: runId, seq, step: step.id, recorded_at: endedAt.toISOString(), snapshot, spec, evidence}
}

type ContextRef = NonNullable<Snapshot['inputs']['context_ref']>

/**
 * What the step's snapshot names in inputs.context_ref (seed 002): the run's project context ref,
 * and the repository context bundles it read. A step reads a bundle when one of its fields reads
 * the outputs of a step that gathered one (whose own snapshot's context_ref names its hash and its
 * repo evidence): that evidence is linked from this snapshot too, so its seal binds the record and
 * audit verify checks it. A step that gathered a bundle names its own, without an evidence id (the
 * store gives the id when it writes the record; its evidence_links has it).
 */
function contextRefOf(
  record: RunRecord,
  step: Step,
  seq: number,
  result: StepDone | undefined,
  before: readonly Snapshot[],
): {ref: ContextRef | null; links: Snapshot['evidence_links']} {
  const project = record.context_ref ? {project: {...record.context_ref}} : {}
  const own = bundleOf(result?.inputs?.['context_ref'])
  if (own && own.step === step.id) return {ref: {...project, step: own.step, seq, hash: own.hash, bytes: own.bytes}, links: []}
  const read = new Set([...JSON.stringify(step).matchAll(/\bsteps\.([a-z][a-z0-9_]*)\b/g)].map((m) => m[1]!))
  const bundles: ContextRef[] = []
  const links: Snapshot['evidence_links'] = []
  for (const id of [...read].sort()) {
    const source = [...before].reverse().find((s) => s.step.name === id)
    const bundle = bundleOf(source?.inputs.context_ref)
    const link = source?.evidence_links.find((l) => l.type === 'repo')
    if (!source || !bundle || bundle.step !== id || !link) continue
    bundles.push({step: id, seq: source.step.seq, evidence_id: link.evidence_id, hash: bundle.hash, bytes: bundle.bytes})
    links.push({type: 'repo', evidence_id: link.evidence_id})
  }
  if (bundles.length === 0) return {ref: record.context_ref ? project : null, links}
  const [first, ...rest] = bundles
  return {ref: {...project, ...first, ...(rest.length > 0 ? {also: rest} : {})}, links}
}

function bundleOf(value: unknown): {step: string; hash: string; bytes: number} | null {
  if (value === null || typeof value !== 'object') return null
  const {step, hash, bytes} = value as Record<string, unknown>
  return typeof step === 'string' && typeof hash === 'string' && typeof bytes === 'number' ? {step, hash, bytes} : null
}

/**
 * The evidence of the error a step stopped its run with, whatever its code (seed 002: every key
 * error reaches the evidence store; a model that kept failing and a bug in pipe too): the code and
 * message, and the end of the log that shows it (a command's stderr, else its stdout), redacted;
 * null for any other ending.
 */
function errorEvidence(
  runId: string,
  stepId: string,
  seq: number,
  decisions: Snapshot['decisions'],
  errors: Snapshot['errors'],
  outputs: Record<string, unknown> | undefined,
): StepCommit['evidence'][number]['draft'] | null {
  const status = decisions.at(-1)?.run_status
  const error = errors.at(-1)
  if ((status !== 'failed' && status !== 'blocked') || !error) return null
  const log =
    commandLog((error.details as Record<string, unknown> | undefined)?.['command']) ??
    commandLog(outputs?.['command']) ??
    (typeof outputs?.['stderr'] === 'string' && outputs['stderr'] !== '' ? outputs['stderr'] : null)
  const excerpt = redact(log ?? error.message)
    .trimEnd()
    .slice(-500)
  return {
    type: 'log',
    source: {ref: `run://${runId}/snapshots/${seq}#errors`},
    content: {excerpt, note: `${error.code} at step ${stepId}: ${error.message}`.slice(0, 2000)},
    linked_to: [{run_id: runId, step: stepId}],
  }
}

/** What a step pipe cancel stopped had printed by then (a command's output), as log evidence; null when it printed nothing. */
function cancelledEvidence(
  runId: string,
  stepId: string,
  seq: number,
  decisions: Snapshot['decisions'],
  outputs: Record<string, unknown> | undefined,
): StepCommit['evidence'][number]['draft'] | null {
  const log = commandLog(outputs?.['command'])
  if (log === null) return null
  return {
    type: 'log',
    source: {ref: `run://${runId}/snapshots/${seq}#outputs`},
    content: {
      excerpt: redact(log).trimEnd().slice(-500),
      note: `output of step ${stepId} until it was cancelled: ${decisions.at(-1)?.reason ?? ''}`.slice(0, 2000),
    },
    linked_to: [{run_id: runId, step: stepId}],
  }
}

/** The end of what a command printed: stderr when it said anything there, else stdout. */
function commandLog(value: unknown): string | null {
  if (value === null || typeof value !== 'object') return null
  const part = (value: unknown): string => (typeof value === 'string' ? value : '')
  const text = (stream: unknown): string =>
    stream !== null && typeof stream === 'object' ? part((stream as {head?: unknown}).head) + part((stream as {tail?: unknown}).tail) : ''
  const {stderr, stdout} = value as {stderr?: unknown; stdout?: unknown}
  const out = text(stderr).trim() !== '' ? text(stderr) : text(stdout)
  return out.trim() === '' ? null : out
}

function usageWithCost(usage: Usage, prices: ProviderSettings['prices']): NonNullable<Snapshot['meta']['usage']> {
  const out: NonNullable<Snapshot['meta']['usage']> = {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
    calls: usage.calls,
  }
  if (prices) {
    out.cost = Math.round(((usage.prompt_tokens / 1000) * prices.prompt_per_1k + (usage.completion_tokens / 1000) * prices.completion_per_1k) * 1e6) / 1e6
    out.currency = prices.currency ?? 'USD'
  }
  return out
}
