/**
 * Expressions at run time: the context a step's `${{ }}` read (inputs, the latest snapshot of each
 * step, the current spec, the run, secrets), and resolveStep, which turns a step's fields into
 * values before its handler runs. Every kind gets its fields resolved the same way; a kind that
 * evaluates something lazily or per item (a choice's whens, a foreach's items) calls
 * StepContext.render.
 */
import {exprDeclarations} from '../config/expressions.js'
import type {KindCatalog} from '../config/kind-contract.js'
import type {LoadedPipeline} from '../config/loaded.js'
import {stepDir} from '../config/positions.js'
import {PipeError, isPipeError} from '../errors.js'
import type {AliasValue, BoundExpressions, ExprContext, ExprEvaluator, JsonValue} from '../expr/index.js'
import {loadRegexEngine, mayUseRegex} from '../expr/regex.js'
import {check} from '../schema/registry.js'
import type {StepHandler, StepKind, StepOf} from '../steps/types.js'
import type {Step} from '../types/pipeline.js'
import type {Policy} from '../types/policy.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {addSecret} from '../util/redact.js'

/** What a recorded value that read a secret shows instead. */
export const REDACTED = '[REDACTED]'

/**
 * Common step fields that are never resolved: the graph (ids, routes, bounds) must be what validate
 * saw, and `when` is evaluated on its own. A kind's own fields that stay as written are its to say
 * (StepHandler.deferred and .references; see deferredFields in engine.ts): no kind's field names live here.
 */
export const STRUCTURAL_KEYS: ReadonlySet<string> = new Set(['id', 'kind', 'next', 'on', 'on_exhausted', 'max_iterations', 'retry', 'timeout_ms', 'when'])

/** Whether a pipeline holds any `${{` in its steps: a pipeline without one runs exactly as v1 did. */
export function usesExpressions(pipeline: LoadedPipeline['pipeline']): boolean {
  return pipeline.steps.some((step) => JSON.stringify(step).includes('${{')) || pipeline.outputs !== undefined
}

/** The secrets a pipeline lists that the environment does not set (or sets empty). */
export function unsetSecrets(pipeline: LoadedPipeline['pipeline'], env: NodeJS.ProcessEnv = process.env): string[] {
  return (pipeline.secrets ?? []).filter((name) => env[name] === undefined || env[name] === '')
}

/**
 * The values of the secrets a pipeline lists, from the environment; each is registered for
 * redaction. An unset one is an error before anything is written (run) or continues (resume).
 */
export function readSecrets(pipeline: LoadedPipeline['pipeline'], env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const names = pipeline.secrets ?? []
  const missing = unsetSecrets(pipeline, env)
  if (missing.length > 0) {
    throw new PipeError(
      'E_CONFIG',
      `the pipeline ${pipeline.name} reads secret${missing.length > 1 ? 's' : ''} ${missing.join(', ')}, but ${missing.length > 1 ? 'they are' : 'it is'} not set in the environment`,
      {
        hint: `Export ${missing.map((m) => `${m}=…`).join(' ')} before pipe run (or pipe resume); pipe never reads secrets from a file it records.`,
      },
    )
  }
  const out: Record<string, string> = {}
  for (const name of names) {
    out[name] = env[name]!
    addSecret(out[name])
  }
  return out
}

/** What a run's expressions read besides its records: its secrets, and the policy it is under. */
export interface Ambient {
  secrets: Record<string, string>
  policy?: ExprContext['policy']
}

/** The numbers of a policy that expressions read (`policy.max_retries_default`). */
export function policyValues(policy: Policy): NonNullable<ExprContext['policy']> {
  return {max_retries_default: policy.max_retries_default, max_patch_lines: policy.max_patch_lines}
}

/** The expression context one step sees. */
export function contextFor(record: RunRecord, snapshots: readonly Snapshot[], spec: CanonicalSpec | null, ambient: Ambient): ExprContext {
  const steps: Record<string, {outputs: unknown; outcome: string; reason: string}> = {}
  for (const s of snapshots) {
    const decision = s.decisions.at(-1)
    // The reason says why, where outputs cannot: an error's code and message (a step that errs gives no outputs).
    if (decision) steps[s.step.name] = {outputs: s.outputs, outcome: decision.decision, reason: decision.reason}
  }
  return {
    inputs: record.inputs ?? {},
    steps,
    ...(spec ? {spec} : {}),
    run: {id: record.run_id, feature_id: record.feature_id, parent: record.parent?.run_id ?? null},
    secrets: ambient.secrets,
    ...(ambient.policy ? {policy: ambient.policy} : {}),
    ...(record.aliases ? {aliases: record.aliases} : {}),
  }
}

let expr: {ExprEvaluator: typeof ExprEvaluator; stringify: (value: JsonValue) => string} | undefined

/** The evaluator of one pipeline, built once per run walk; cel-js is loaded on the first call only. */
export async function evaluatorFor(loaded: LoadedPipeline, catalog: KindCatalog): Promise<ExprEvaluator> {
  if (!expr) {
    const [{ExprEvaluator: evaluator}, {stringify}] = await Promise.all([import('../expr/evaluate.js'), import('../expr/values.js')])
    expr = {ExprEvaluator: evaluator, stringify}
  }
  if (mayUseRegex(JSON.stringify(loaded.pipeline.steps))) await loadRegexEngine()
  return new expr.ExprEvaluator(exprDeclarations(loaded.pipeline, (i) => stepDir(loaded, i), catalog, loaded.aliases))
}

export interface Resolved<S extends Step = Step> {
  /** The step with every templated field replaced by its value. */
  step: S
  /** What each templated field resolved to, by its path in the step (`run[2]`, `env.TOKEN`); a value that read a secret is REDACTED. */
  values: Record<string, JsonValue>
}

type Segment = string | number

function printable(segments: readonly Segment[]): string {
  return segments.reduce<string>((acc, s) => (typeof s === 'number' ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s), '')
}

/**
 * Resolves a step's fields (all but STRUCTURAL_KEYS). A scalar that is one whole `${{ }}` keeps its
 * type (a list, a number); text around expressions makes a string. Each argv element stays one
 * argument: a number or boolean becomes its text, and a list or map where the step's schema wants
 * one string is an error, never spread into several arguments. The resolved step is checked against
 * the pipeline schema again, so a value of the wrong type is an E_CONFIG here, not a surprise in
 * the kind.
 */
export function resolveStep<S extends Step>(step: S, bound: BoundExpressions, deferred: readonly string[] = []): Resolved<S> {
  const values: Record<string, JsonValue> = {}
  const secretPaths = new Set<string>()
  const walk = (value: unknown, at: Segment[]): unknown => {
    if (typeof value === 'string') {
      if (!value.includes('${{')) return value
      const out = bound.render(value)
      const key = printable(at)
      values[key] = /\bsecrets\b/.test(value) ? REDACTED : out
      if (/\bsecrets\b/.test(value)) secretPaths.add(key)
      return out
    }
    if (Array.isArray(value)) return value.map((item, i) => walk(item, [...at, i]))
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(
        Object.entries(value).map(([k, v]) => [k, at.length === 0 && (STRUCTURAL_KEYS.has(k) || deferred.includes(k)) ? v : walk(v, [...at, k])]),
      )
    }
    return value
  }
  const resolved = walk(step, []) as Step
  if (Object.keys(values).length === 0) return {step, values}
  // Only templated values change: the structural keys, the kind among them, are kept as written.
  return {step: conform(resolved, step.id, values) as S, values}
}

/** Checks the resolved step against the schema; a number or boolean where a string belongs becomes its text. */
function conform(step: Step, id: string, values: Record<string, JsonValue>): Step {
  for (let round = 0; round < 2; round++) {
    const result = check('pipeline', {version: 1, name: 'resolved', steps: [step]})
    if (result.valid) return step
    let changed = false
    for (const error of result.errors) {
      const segments = error.instancePath
        .split('/')
        .slice(3)
        .map((s) => (/^\d+$/.test(s) ? Number(s) : s.replace(/~1/g, '/').replace(/~0/g, '~')))
      const key = printable(segments)
      if (!(key in values)) continue
      const wantsString = error.keyword === 'type' && String(error.params['type']).split(',').includes('string')
      const current = get(step, segments)
      if (wantsString && (typeof current === 'number' || typeof current === 'boolean')) {
        // Only reached with resolved values, so evaluatorFor has loaded the module.
        set(step, segments, expr!.stringify(current))
        changed = true
        continue
      }
      const what = Array.isArray(current) ? 'a list' : current === null ? 'null' : typeof current === 'object' ? 'a map' : JSON.stringify(current)
      const spread = Array.isArray(current) && wantsString ? ' (pipe never spreads a list into several arguments: give each argument its own element)' : ''
      throw new PipeError('E_CONFIG', `${key} of step "${id}" resolved to ${what}, which does not fit: it ${error.message ?? 'is invalid'}${spread}`, {
        hint: 'Change the expression so it gives the right type (string(x), a join, an index); the step did not run.',
        details: {field: key, value: values[key] ?? null},
      })
    }
    if (!changed) {
      const first = result.errors[0]
      throw new PipeError(
        'E_CONFIG',
        `step "${id}" is not valid once its expressions are resolved: ${first?.instancePath ?? ''} ${first?.message ?? ''}`.trim(),
        {hint: 'Check the values the expressions give; the step did not run.'},
      )
    }
  }
  return step
}

function get(root: unknown, segments: readonly Segment[]): unknown {
  let node = root
  for (const s of segments) node = (node as Record<string | number, unknown> | undefined)?.[s]
  return node
}

function set(root: unknown, segments: readonly Segment[], value: unknown): void {
  const parent = get(root, segments.slice(0, -1)) as Record<string | number, unknown>
  parent[segments.at(-1)!] = value
}

/** Evaluates a `when:`; anything but a boolean is an error. */
export function condition(step: Step, bound: BoundExpressions): boolean {
  const value = bound.render(step.when!)
  if (typeof value !== 'boolean') {
    throw new PipeError('E_CONFIG', `when: of step "${step.id}" gave ${JSON.stringify(value)}, not true or false`, {
      hint: "Write a condition, such as ${{ inputs.audience == 'customers' }}.",
    })
  }
  return value
}

/** Aliases as the evaluator takes them. */
export function aliasValues(aliases: Readonly<Record<string, unknown>> | undefined): Record<string, AliasValue> {
  return Object.fromEntries(Object.entries(aliases ?? {}).map(([name, value]) => [name, {value}]))
}

/**
 * Runs `fn` (which renders expressions against `context`) and, when an expression read a step
 * that has not run in this run yet, says so and how to guard it, instead of cel-js's bare
 * "No such key".
 */
export function explained<T>(context: ExprContext, fn: () => T): T {
  try {
    return fn()
  } catch (error) {
    // An ExpressionError (expr/evaluate.ts), told by its fields so this module need not load cel-js.
    if (!isPipeError(error) || (error as {reason?: unknown}).reason !== 'no_such_key' || typeof (error as {expression?: unknown}).expression !== 'string')
      throw error
    const expression = (error as PipeError & {expression: string}).expression
    const ran = new Set(Object.keys(context.steps ?? {}))
    const missing = [...expression.matchAll(/\bsteps\.([a-z][a-z0-9_]*)/g)].map((m) => m[1]!).find((id) => !ran.has(id))
    if (missing === undefined) throw error
    throw new PipeError('E_CONFIG', `${error.message}: step "${missing}" has not run in this run (yet)`, {
      hint: `Guard the expression for the paths where it has not run: \${{ has(steps.${missing}) && … }}, or route the run through "${missing}" first.`,
      details: {expression, reason: 'no_such_key', step: missing},
      cause: error,
    })
  }
}

/** The expressions of one run walk: the pipeline's evaluator (null when it has no `${{`) and its secrets. */
export interface RunExpressions extends Ambient {
  evaluator: ExprEvaluator | null
}

/** Fields of a step the engine leaves as written: those the kind evaluates itself, an inline child pipeline's, and those that name steps. */
export function deferredFields<K extends StepKind>(handler: StepHandler<K>, step: StepOf<K>): string[] {
  const deferred = handler.deferred?.(step)
  const naming = (handler.references?.(step) ?? []).map((ref) => String(ref.at[0]))
  return [...(deferred?.fields ?? []), ...(deferred?.foreign ?? []), ...naming]
}

/**
 * A step's max_iterations: the number as written, or what its expression gives now (a task's
 * max_retries), which must be an integer from 1 to 1000 like a literal one; anything else stops the
 * run with E_CONFIG before the step is entered, never an unbounded loop.
 */
export function iterationBound(step: Step, exprs: RunExpressions, values: () => ExprContext): number {
  const written = step.max_iterations!
  if (typeof written === 'number') return written
  if (!exprs.evaluator) throw new PipeError('E_INTERNAL', `step "${step.id}" evaluates ${JSON.stringify(written)}, but its pipeline has no expressions`)
  const context = values()
  const value = explained(context, () => exprs.evaluator!.bind(context).render(written))
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 1000) {
    throw new PipeError('E_CONFIG', `max_iterations of step "${step.id}" resolved to ${JSON.stringify(value)}, which is not an integer from 1 to 1000`, {
      hint: 'Change the expression so it gives a whole number of times the run may enter the step (int(x), a default with has()).',
      details: {field: 'max_iterations', value},
    })
  }
  return value
}
