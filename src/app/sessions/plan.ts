/** pipe run --dry-run: what a run would use and do, with every input checked; nothing is written. */
import {storeLabel} from '../../store/open.js'
import type {Diagnostic} from '../../config/diagnostics.js'
import type {LoadedPipeline} from '../../config/loaded.js'
import {diag} from '../../config/positions.js'
import {pipelineWarnings} from '../../config/rules/index.js'
import {kindCatalog} from '../../steps/registry.js'
import {changesSpec, type StepHandler, type StepKind, type StepRegistry} from '../../steps/types.js'
import type {RunRecord} from '../../types/run.js'
import type {InputValue} from '../../expr/inputs.js'
import {evaluatorFor, usesExpressions} from '../../engine/expressions.js'
import {safeToRetry} from '../../engine/retry.js'
import {templatedStrings} from '../../config/expressions.js'
import type {BoundExpressions, JsonValue} from '../../expr/index.js'
import type {Decision, StartSession} from './shared.js'
import {prepareStart} from './prepare.js'
import {stepConfirmRule} from '../../policy/confirm.js'

export interface RunPlan {
  pipeline: {name: string; file: string; hash: string; start: string}
  policy: {file: string | null; version: string; max_retries_default: number}
  provider: RunRecord['provider']
  input: {kind: RunRecord['input']['kind']; ref: string; bytes: number}
  /** The values of the pipeline's typed inputs the run would use. */
  inputs: Record<string, InputValue>
  answers: string[]
  decision: Decision | null
  /** The steps that may pause the run for a person, and for what. */
  waits: Array<{step: string; for: 'answers' | 'review' | 'confirm'; because?: string}>
  store: string
  steps: Array<{
    id: string
    kind: string
    transitions: Record<string, string>
    /** Every outcome the step can end with (error too). */
    outcomes: string[]
    /** What each outcome no route takes does to the run: a failure ends it failed, a stop waits or cancels. */
    unrouted: Record<string, 'ends' | 'failed' | 'awaiting_input' | 'cancelled'>
    max_iterations?: number | string
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
  /** Secrets the pipeline reads that this environment does not set: a run would refuse to start until they are. */
  secrets_unset: string[]
}

/** pipe run --dry-run: what the run would use and do, with every input checked; nothing is written. */
export async function planSession(options: StartSession): Promise<RunPlan> {
  const {settings, provider, unsetSecrets} = await prepareStart(options, undefined, true)
  const {pipeline, policy, answers, input, inputs} = settings
  const {registry, deniedCommands} = await import('../../steps/registry.js')
  const {edgesOf, startStepId} = await import('../../config/graph.js')
  const limits = policy.policy.resource_limits
  const statics = usesExpressions(pipeline.pipeline)
    ? (await evaluatorFor(pipeline, kindCatalog)).bind({inputs, run: {id: '(new run)', feature_id: options.feature ?? '(new feature)', parent: null}})
    : null
  // A step whose when: is already false with these inputs is skipped: it needs no model.
  const skipped = new Set(pipeline.pipeline.steps.filter((step) => staticValues(step, statics).resolved?.when === false).map((step) => step.id))
  return {
    pipeline: {name: pipeline.pipeline.name, file: pipeline.file, hash: pipeline.hash, start: startStepId(pipeline.pipeline)},
    policy: {file: policy.file, version: policy.version, max_retries_default: policy.policy.max_retries_default},
    provider: provider.record,
    input: {kind: input.kind, ref: input.ref, bytes: Buffer.byteLength(input.text ?? '')},
    inputs,
    answers: Object.keys(answers ?? {}),
    decision: options.decision ?? null,
    waits: pipeline.pipeline.steps.flatMap((step, i) => {
      const handler = registry[step.kind] as StepHandler<StepKind>
      if (handler.waitsFor) return [{step: step.id, for: handler.waitsFor}]
      // What the policy or the step says must be confirmed, judged on the argv the plan resolved (an
      // argv known only while running is judged then: the run may still pause there).
      const resolved = staticValues(pipeline.pipeline.steps[i]!, statics).resolved ?? {}
      const argv = (handler.commands?.(withResolved(step, resolved) as never) ?? []).map((c) => [...c.argv])
      const because = stepConfirmRule(policy, step, argv, {root: options.cwd})
      return because ? [{step: step.id, for: 'confirm' as const, because}] : []
    }),
    store: storeLabel(options.cwd, options.store),
    steps: pipeline.pipeline.steps.map((step) => {
      const handler = registry[step.kind] as StepHandler<StepKind>
      const safe = safeToRetry(step, handler)
      const outcomes = [...handler.outcomes(step), 'error', ...(step.when !== undefined ? ['skipped'] : [])]
      const edges = edgesOf(step, kindCatalog)
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
    // Commands are judged with the values the plan resolved: an argv built from inputs is known now.
    denied: deniedCommands(pipeline, policy, (i) => staticValues(pipeline.pipeline.steps[i]!, statics).resolved),
    warnings: [...pipelineWarnings(pipeline, kindCatalog), ...offlineModelWarnings(pipeline, provider.record, registry, skipped)],
    secrets_unset: unsetSecrets,
  }
}

/** Steps only a real model can run, when the run would use the offline rules provider. */
function offlineModelWarnings(pipeline: LoadedPipeline, provider: RunRecord['provider'], registry: StepRegistry, skipped: Set<string>): Diagnostic[] {
  if (provider.kind !== 'offline') return []
  return pipeline.pipeline.steps.flatMap((step, i) =>
    (registry[step.kind] as StepHandler<StepKind>).needsModel && !skipped.has(step.id)
      ? [
          {
            ...diag(
              pipeline,
              ['steps', i, 'kind'],
              `step "${step.id}" needs a model, but the run would use the offline rules provider, so it would fail with E_CONFIG; set OPENAI_API_KEY (and OPENAI_BASE_URL) or pass --provider openai`,
            ),
            rule: 'needs-model',
            severity: 'warning' as const,
          },
        ]
      : [],
  )
}

/** The values of a step's expressions that read nothing but inputs (what --dry-run can already tell). */
function staticValues(step: LoadedPipeline['pipeline']['steps'][number], bound: BoundExpressions | null): {resolved?: Record<string, JsonValue>} {
  if (!bound) return {}
  // What the kind evaluates itself (a choice's whens, in order; a foreach's with: per item) is not
  // known before it runs; only a per-item kind's list is evaluated once, up front.
  const deferred = kindCatalog[step.kind]?.deferred?.(step)
  const lazy = new Set([...(deferred?.fields ?? []), ...(deferred?.foreign ?? [])].filter((field) => field !== deferred?.items))
  const out: Record<string, JsonValue> = {}
  for (const {segments, text} of templatedStrings(step)) {
    if (/\b(steps|spec|secrets)\b/.test(text) || /\brun\.id\b/.test(text)) continue
    if (lazy.has(String(segments[0]))) continue
    try {
      out[segments.reduce<string>((acc, s) => (typeof s === 'number' ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '')] = bound.render(text)
    } catch {
      // Known only at run time (or an error the run reports at its step).
    }
  }
  return Object.keys(out).length > 0 ? {resolved: out} : {}
}

/** The step with the values the plan resolved put in place of their expressions (`run[1]` → step.run[1]). */
function withResolved(step: LoadedPipeline['pipeline']['steps'][number], resolved: Record<string, JsonValue>): unknown {
  const copy = structuredClone(step) as unknown as Record<string, unknown>
  for (const [where, value] of Object.entries(resolved)) {
    const path = where.split(/\.|\[(\d+)\]/).filter((part) => part !== undefined && part !== '')
    let at: Record<string, unknown> | unknown[] = copy
    for (const [n, part] of path.entries()) {
      const key = /^\d+$/.test(part) ? Number(part) : part
      if (n === path.length - 1) (at as Record<string | number, unknown>)[key] = value
      else at = (at as Record<string | number, unknown>)[key] as Record<string, unknown>
      if (at === undefined || at === null) break
    }
  }
  return copy
}
