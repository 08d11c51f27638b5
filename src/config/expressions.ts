/**
 * The pipeline side of expressions: the declarations one pipeline gives the checker and the
 * evaluator (inputs, each step's outputs schema and outcomes, the spec schema, secrets), and the
 * validate rule that checks every `${{ }}` in its steps at file:line:col. The checker (and cel-js
 * behind it) is loaded only for pipelines that have expressions: loadExpressionChecker returns it,
 * and the functions that check take it as a parameter.
 */
import {isScalar} from 'yaml'
// Light parts only: cel-js (behind check.ts) is imported by loadExpressionChecker alone.
import type {AliasTypes, ExprChecker, ExprDeclarations, InputDeclaration, JsonSchemaLike} from '../expr/index.js'
import {DYN, elementSchema} from '../expr/schema.js'
import {aliasProblem} from '../expr/scope.js'
import {parseTemplate} from '../expr/template.js'
import {checkDeclarations} from '../expr/inputs.js'
import {loadRegexEngine, mayUseRegex} from '../expr/regex.js'
import {scalarOffsetMapper} from '../expr/source-map.js'
import {loadSchema} from '../schema/registry.js'
import type {Pipeline, Step} from '../types/pipeline.js'
import {outcomesOf} from './catalog.js'
import type {Diagnostic} from './diagnostics.js'
import {ancestorsOf} from './graph.js'
import type {DeferredFields, KindCatalog} from './kind-contract.js'
import type {LoadedPipeline, Segment} from './loaded.js'
import {diag, origin, stepDir} from './positions.js'
import {findNode} from './yaml-source.js'
import {OUTPUT_ARTICLE} from './declared-outputs.js'

/** The expression checker's class, as loadExpressionChecker gives it: what the checking functions are passed. */
export type ExprCheckerClass = typeof ExprChecker

let specSchema: JsonSchemaLike | undefined

/** Whether any step (or tool the pipeline declares) of this (possibly malformed) pipeline data holds `${{`. */
export function hasExpressions(data: unknown): boolean {
  const {steps, outputs, tools} = (data ?? {}) as {steps?: unknown; outputs?: unknown; tools?: unknown}
  const holds = (value: unknown): boolean => value !== null && typeof value === 'object' && JSON.stringify(value).includes('${{')
  return (Array.isArray(steps) && holds(steps)) || holds(outputs) || holds(tools)
}

/**
 * The expression checker (and cel-js with it), for data whose expressions will be checked; other
 * commands and v1 pipelines never pay for it. The regular expression engine comes too when
 * `within` may call matches(), so a checker this returns can check every expression in `within`.
 */
export async function loadExpressionChecker(within: unknown): Promise<ExprCheckerClass> {
  const {ExprChecker} = await import('../expr/check.js')
  if (mayUseRegex(JSON.stringify(within) ?? '')) await loadRegexEngine()
  return ExprChecker
}

/** The checker `data` needs: loaded when any of its steps holds `${{`, else none (there is nothing to check). */
export async function expressionChecker(data: unknown): Promise<ExprCheckerClass | undefined> {
  return hasExpressions(data) ? loadExpressionChecker(data) : undefined
}

/** The spec's JSON Schema, read once per process: what `${{ spec.… }}` may read. */
export function specJsonSchema(): JsonSchemaLike {
  specSchema ??= loadSchema('spec')
  return specSchema
}

/** What expressions in this pipeline may read, for one ExprChecker / ExprEvaluator per pipeline. */
export function exprDeclarations(pipeline: Pipeline, dir: string | ((index: number) => string), catalog: KindCatalog, aliases?: AliasTypes): ExprDeclarations {
  const steps: Record<string, {outputs?: JsonSchemaLike | undefined; outcomes?: readonly string[]}> = {}
  for (const [index, step] of pipeline.steps.entries()) {
    const info = catalog[step.kind]
    let outputs: JsonSchemaLike | undefined
    try {
      // A composed step's own files (output_schema) lie beside the file that holds it.
      outputs = info?.outputsSchema?.(step, {dir: typeof dir === 'string' ? dir : dir(index)})
    } catch {
      // A kind whose schema cannot be built (its own schema file is missing) reads as anything; its own rule says why.
      outputs = undefined
    }
    steps[step.id] = {outputs, outcomes: outcomesOf(step, catalog, pipeline)}
  }
  return {
    inputs: (pipeline.inputs ?? {}) as Record<string, JsonSchemaLike>,
    steps,
    spec: specJsonSchema(),
    secrets: pipeline.secrets ?? [],
    ...(aliases ? {aliases} : {}),
  }
}

/** Keys whose scalar is a condition (a boolean) or a count (an integer: a step's bound, a foreach's concurrency). */
function expectFor(segments: readonly Segment[]): 'bool' | 'int' | undefined {
  const last = segments.at(-1)
  if (last === 'when') return 'bool'
  return segments.length === 3 && (last === 'max_iterations' || last === 'concurrency') ? 'int' : undefined
}

/** Every string in a step with `${{`, with its path below the step. */
export function templatedStrings(value: unknown, at: Segment[] = []): Array<{segments: Segment[]; text: string}> {
  if (typeof value === 'string') return value.includes('${{') ? [{segments: at, text: value}] : []
  if (Array.isArray(value)) return value.flatMap((item, i) => templatedStrings(item, [...at, i]))
  if (value !== null && typeof value === 'object') return Object.entries(value).flatMap(([key, item]) => templatedStrings(item, [...at, key]))
  return []
}

/**
 * The `expression` rule: every `${{ }}` in every step, checked against the pipeline's
 * declarations; each problem at the line and column inside the scalar where it is. A reference to
 * a step that cannot have run before this one (no path from it leads here) is an error too.
 */
export function checkExpressions(loaded: LoadedPipeline, catalog: KindCatalog, Checker: ExprCheckerClass): Diagnostic[] {
  const {pipeline} = loaded
  const out: Diagnostic[] = []
  for (const problem of checkDeclarations((pipeline.inputs ?? {}) as Record<string, InputDeclaration>)) {
    const segments: Segment[] = problem.input !== undefined ? ['inputs', problem.input] : ['inputs']
    out.push(diag(loaded, segments, problem.message))
  }
  if (pipeline.outputs !== undefined) out.push(...checkOutputs(loaded, pipelineChecker(loaded, catalog, Checker)))
  const scan = pipeline.steps.map((step, i) => ({step, i, found: templatedStrings(step, ['steps', i])}))
  if (!scan.some((s) => s.found.length > 0)) return out
  const checker = pipelineChecker(loaded, catalog, Checker)
  for (const {step, found} of scan) {
    let ancestors: Set<string> | undefined
    const {deferred, aliases} = aliasesOf(step, checker, catalog)
    for (const {segments, text} of found) {
      const field = segments[2]
      // An inline child pipeline's expressions are its own: checked when it is loaded, against its inputs.
      if (typeof field === 'string' && deferred?.foreign?.includes(field)) continue
      const isItems = deferred?.items !== undefined && field === deferred.items
      const aliased = deferred !== undefined && typeof field === 'string' && deferred.fields.includes(field) && !isItems
      const own = typeof field === 'string' && segments.length === 3 ? deferred?.expect?.[field] : undefined
      const expect = isItems ? ('list' as const) : (own ?? expectFor(segments))
      const options = {...(expect !== undefined ? {expect} : {}), ...(aliased && aliases ? {aliases} : {})}
      const result = checker.checkTemplate(text, options)
      const mapper = offsetMapper(loaded, segments, text)
      for (const d of result.diagnostics) out.push(diag(loaded, segments, d.message, false, mapper(d.offset)))
      if (result.diagnostics.length > 0) continue
      // Each item is recorded as it is in its child run (and handed to it): a secret split into items would be kept in pieces no redaction finds.
      if (isItems && result.references.some(readsSecret))
        out.push(
          diag(
            loaded,
            segments,
            `${field} reads a secret; each item is recorded as it is in its child run, so a secret may not give the items`,
            false,
            mapper(0),
          ),
        )
      for (const ref of result.references) {
        const match = /^steps\.([^.[]+)/.exec(ref)
        if (!match) continue
        const target = match[1]!
        ancestors ??= ancestorsOf(pipeline, catalog, step.id)
        if (ancestors.has(target)) continue
        const why =
          target === step.id ? 'a step reads its own outputs only when a loop brings the run back to it' : `no path from "${target}" leads to "${step.id}"`
        out.push(
          diag(
            loaded,
            segments,
            `${ref} reads step "${target}", which cannot have run before "${step.id}" (${why}); the expression would fail at run time`,
            false,
            mapper(0),
          ),
        )
      }
    }
  }
  return out
}

const readsSecret = (ref: string): boolean => ref === 'secrets' || ref.startsWith('secrets.') || ref.startsWith('secrets[')

/**
 * The pipeline's outputs: each value checked like any expression (in the pipeline's own scope) and
 * its type against the declared one where the checker knows it; an output never reads a secret
 * (outputs are recorded as they are and handed to the parent run).
 */
function checkOutputs(loaded: LoadedPipeline, checker: ExprChecker): Diagnostic[] {
  const out: Diagnostic[] = []
  for (const [name, decl] of Object.entries(loaded.pipeline.outputs ?? {})) {
    if (decl === undefined || typeof decl.value !== 'string') continue
    const segments: Segment[] = ['outputs', name, 'value']
    const mapper = offsetMapper(loaded, segments, decl.value)
    const result = checker.checkTemplate(decl.value)
    for (const d of result.diagnostics) out.push(diag(loaded, segments, `output "${name}": ${d.message}`, false, mapper(d.offset)))
    if (result.diagnostics.length > 0) continue
    if (result.references.some(readsSecret)) {
      out.push(
        diag(
          loaded,
          segments,
          `output "${name}" reads a secret; outputs are recorded as they are and given to the parent run, so they may not`,
          false,
          mapper(0),
        ),
      )
      continue
    }
    const whole = result.template.whole
    if (whole === undefined) {
      if (decl.type !== 'string')
        out.push(
          diag(loaded, segments, `output "${name}" is ${OUTPUT_ARTICLE[decl.type] ?? decl.type}, but text around \${{ }} makes a string`, false, mapper(0)),
        )
      continue
    }
    const type = checker.check(whole.expression).type
    if (type !== undefined && !fitsOutput(type, decl.type))
      out.push(
        diag(
          loaded,
          segments,
          `output "${name}" is ${OUTPUT_ARTICLE[decl.type] ?? decl.type}, but \${{ ${whole.expression.trim()} }} gives ${type}`,
          false,
          mapper(0),
        ),
      )
  }
  return out
}

/** Whether a value of CEL type `type` can be an output declared `declared` (strictly: no text for a number; a double may hold a whole number). */
function fitsOutput(type: string, declared: string): boolean {
  if (type === 'dyn' || type.startsWith('dyn')) return true
  if (declared === 'string') return type === 'string'
  return fitsInput(type, declared)
}

/**
 * The aliases a foreach's inline steps read in every expression: the item under the step's `as:`,
 * typed as an element of its `items:` list, and the aliases of the pipeline holding the step (an
 * inline foreach inside inline steps). An alias that would hide a root name is left out: the
 * foreach's own check reports it.
 */
export function inlineAliases(parent: LoadedPipeline, index: number, catalog: KindCatalog, Checker: ExprCheckerClass): AliasTypes {
  const step = parent.pipeline.steps[index]!
  const {aliases} = aliasesOf(step, pipelineChecker(parent, catalog, Checker), catalog)
  const own = Object.fromEntries(Object.entries(aliases ?? {}).filter(([name]) => aliasProblem(name) === undefined))
  return {...parent.aliases, ...own}
}

const checkers = new WeakMap<LoadedPipeline, ExprChecker>()

/** One checker per loaded pipeline (building one registers every declaration with cel-js). */
function pipelineChecker(loaded: LoadedPipeline, catalog: KindCatalog, Checker: ExprCheckerClass): ExprChecker {
  let checker = checkers.get(loaded)
  if (!checker) {
    checker = new Checker(exprDeclarations(loaded.pipeline, (i) => stepDir(loaded, i), catalog, loaded.aliases))
    checkers.set(loaded, checker)
  }
  return checker
}

/** A kind's per-item fields (a foreach's with:) are checked with its alias typed as an element of its items list. */
function aliasesOf(step: Step, checker: ExprChecker, catalog: KindCatalog): {deferred: DeferredFields | undefined; aliases: AliasTypes | undefined} {
  const deferred = catalog[step.kind]?.deferred?.(step)
  if (deferred?.alias === undefined || deferred.items === undefined) return {deferred, aliases: undefined}
  const itemsText = (step as unknown as Record<string, unknown>)[deferred.items]
  const whole = typeof itemsText === 'string' ? parseTemplate(itemsText).whole : undefined
  return {deferred, aliases: {[deferred.alias]: whole ? elementSchema(checker.check(whole.expression).schema) : DYN}}
}

/** Whether a value of CEL type `type` can be given to an input of `declared` type at run time (see engine childInputs). */
function fitsInput(type: string, declared: string): boolean {
  if (type === 'dyn' || type.startsWith('dyn')) return true
  switch (declared) {
    case 'string':
      // A string input takes any value but null as its text.
      return type !== 'null_type'
    case 'integer':
    case 'number':
      // A double may hold a whole number; only the run can tell.
      return type === 'int' || type === 'uint' || type === 'double'
    case 'boolean':
      return type === 'bool'
    case 'object':
      // An object with a schema has a type of its own (pipe.steps.x.outputs.y, pipe.alias.item).
      return type.startsWith('map') || type.startsWith('pipe.')
    case 'array':
      return type.startsWith('list')
    default:
      return true
  }
}

/**
 * The `with:` expressions of step `index` whose static type can never fit the child input they
 * give (an int to a boolean, text to an integer): each by its key, with the message. Expressions
 * whose type is only known at run time (dyn) pass; literals are checked by the caller.
 */
export function withTypeProblems(
  loaded: LoadedPipeline,
  catalog: KindCatalog,
  Checker: ExprCheckerClass,
  index: number,
  withField: string,
  given: Readonly<Record<string, unknown>>,
  declared: Readonly<Record<string, {type?: string}>>,
): Array<{key: string; message: string}> {
  const step = loaded.pipeline.steps[index]!
  const texts = Object.entries(given).filter(
    (entry): entry is [string, string] => typeof entry[1] === 'string' && entry[1].includes('${{') && Object.hasOwn(declared, entry[0]),
  )
  if (texts.length === 0) return []
  const checker = pipelineChecker(loaded, catalog, Checker)
  const {deferred, aliases} = aliasesOf(step, checker, catalog)
  const options = aliases && deferred?.fields.includes(withField) ? {aliases} : {}
  const out: Array<{key: string; message: string}> = []
  for (const [key, text] of texts) {
    // The child records its inputs as they are (run.json, its snapshots, what its outputs give back): a secret, or any piece of one, would be kept there.
    const read = checker.checkTemplate(text, options)
    if (read.diagnostics.length === 0 && read.references.some(readsSecret)) {
      out.push({
        key,
        message: `reads a secret; a child run records its inputs as they are, so a secret may not be one: a child pipeline file declares its own secrets: and reads \${{ secrets.NAME }} itself`,
      })
      continue
    }
    const type = declared[key]!.type
    if (type === undefined) continue
    const template = parseTemplate(text)
    if (template.whole === undefined) {
      if (type !== 'string') out.push({key, message: `is ${OUTPUT_ARTICLE[type] ?? type}, but text around \${{ }} makes a string`})
      continue
    }
    const result = checker.check(template.whole.expression, options)
    if (result.diagnostics.length > 0 || result.type === undefined) continue
    if (!fitsInput(result.type, type))
      out.push({key, message: `is ${OUTPUT_ARTICLE[type] ?? type}, but \${{ ${template.whole.expression.trim()} }} gives ${result.type}`})
  }
  return out
}

/** Maps an offset in a scalar's value to an offset in the file (the scalar's start when it cannot). */
export function offsetMapper(loaded: LoadedPipeline, segments: readonly Segment[], value: string): (offset: number) => number | undefined {
  // A composed pipeline's node lives in the file (base or child) that holds it.
  const where = origin(loaded, segments)
  const found = findNode(where.source, where.segments)
  const node = found.node
  if (!found.exact || !isScalar(node) || node.range === undefined || node.range === null) return () => undefined
  const [start, end] = node.range
  const map = scalarOffsetMapper(where.source.text.slice(start, end), node.type, value)
  return (offset) => start + map(offset)
}
