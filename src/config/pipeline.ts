/**
 * Loads a pipeline in stages: YAML with positions, then the schema (all errors), then the semantic
 * rules the schema cannot express (rules/), then the pipelines its steps run as child runs. A
 * pipeline with any error is never returned for running. The expression checker is loaded here,
 * for a pipeline whose steps hold `${{`, and handed to the rules.
 */
import {existsSync, statSync} from 'node:fs'
import path from 'node:path'
import type {Pipeline} from '../types/pipeline.js'
import {sha256} from '../util/hash.js'
import {composePipeline, extendsAnother} from './compose.js'
import {sortDiagnostics, type Diagnostic} from './diagnostics.js'
import {validateSource} from './document.js'
import {expressionChecker, inlineAliases, loadExpressionChecker} from './expressions.js'
import type {ChildPipelineRef, KindCatalog} from './kind-contract.js'
import type {Composition, LoadedPipeline, PipelineResult, Segment} from './loaded.js'
import {diag, origin, stepDir} from './positions.js'
import {childInputProblems} from './rules/child-inputs.js'
import {loadCron, type CronClass} from '../util/cron.js'
import {checkRules, tolerantFindings, type RuleContext} from './rules/index.js'
import {parseYamlBytes, readYamlFile} from './yaml-source.js'

// The loader's results, for callers that load pipelines (the shapes live in loaded.ts).
export type {LoadedPipeline, PipelineResult} from './loaded.js'

/**
 * Loads a pipeline, and every pipeline its steps run as child runs (pipeline, foreach), recursively:
 * a child that is missing, invalid, given inputs it does not declare, or that leads back to a
 * pipeline being loaded (a cycle) is an error at the step that names it. `chain` is the files being
 * loaded above this one. `text`, when given, is the file's content instead of what is on disk (an
 * editor's unsaved buffer, `pipe lsp`): its relative files still resolve beside `file`.
 */
export async function loadPipeline(file: string, catalog: KindCatalog, chain: readonly string[] = [], text?: string): Promise<PipelineResult> {
  const {result, context, loaded} = await loadOne(file, catalog, text)
  const below = [...chain, path.resolve(file)]
  if (result.ok) return withChildren(result, context, below)
  if (!loaded) return result
  // The children's own errors are independent of this file's: all of them in one pass.
  const children = await checkChildPipelines(loaded, context, below, true)
  const seen = new Set(result.diagnostics.map((d) => `${d.file}:${d.line}:${d.col}`))
  const more = children.diagnostics.filter((d) => !seen.has(`${d.file}:${d.line}:${d.col}`))
  return more.length === 0 ? result : {ok: false, diagnostics: sortDiagnostics([...result.diagnostics, ...more])}
}

/**
 * The anonymous child pipeline of a step's inline `steps:` (and `inputs:`): checked by the same
 * rules as a file, its positions in the file that holds the step. Its `file` is the parent's with
 * `#STEP` (a child run of it is resumed through its parent).
 */
export async function loadInlinePipeline(parent: LoadedPipeline, index: number, catalog: KindCatalog, chain: readonly string[] = []): Promise<PipelineResult> {
  const step = parent.pipeline.steps[index] as unknown as {id: string; steps?: Pipeline['steps']; inputs?: Pipeline['inputs']; outputs?: Pipeline['outputs']}
  const where = origin(parent, ['steps', index])
  const dir = stepDir(parent, index)
  const data = {
    version: 1 as const,
    name: `${parent.pipeline.name}.${step.id}`,
    ...(step.inputs ? {inputs: step.inputs} : {}),
    ...(step.outputs ? {outputs: step.outputs} : {}),
    steps: step.steps ?? ([] as unknown as Pipeline['steps']),
  }
  const composition: Composition = {
    files: [where.source],
    steps: data.steps.map((_, j) => ({source: where.source, segments: [...where.segments, 'steps', j], dir, fields: {}})),
    keys: {
      inputs: {source: where.source, segments: [...where.segments, 'inputs'], exact: true},
      steps: {source: where.source, segments: [...where.segments, 'steps'], exact: true},
      outputs: {source: where.source, segments: [...where.segments, 'outputs'], exact: true},
      ...Object.fromEntries(
        Object.keys(step.outputs ?? {}).map((name) => [`outputs.${name}`, {source: where.source, segments: [...where.segments, 'outputs', name]}]),
      ),
    },
    removed: {},
  }
  const file = `${parent.file}#${step.id}`
  // The steps read the item under the foreach's alias, typed from its items: (the parent's expressions have a checker: items: is one).
  const aliases = inlineAliases(parent, index, catalog, await loadExpressionChecker(parent.pipeline))
  const loaded: LoadedPipeline = {file, dir, pipeline: data, source: where.source, hash: sha256(JSON.stringify(data)), composition, aliases}
  const context: RuleContext = {catalog, checker: await expressionChecker(data)}
  const result = checkRules(loaded, context)
  const holder = where.source === parent.source ? parent.file : where.source.file
  if (!result.ok) return {ok: false, diagnostics: result.diagnostics.map((d) => (d.file === file ? {...d, file: holder} : d))}
  return withChildren(result, context, chain)
}

/**
 * One file (composed with the files it extends), checked by every rule; its children are not loaded
 * yet. `loaded` is given whenever its steps are steps (ids and kinds), invalid or not: enough to look
 * for its children.
 */
async function loadOne(file: string, catalog: KindCatalog, text?: string): Promise<{result: PipelineResult; context: RuleContext; loaded?: LoadedPipeline}> {
  const context: RuleContext = {catalog}
  const read = text === undefined ? await readYamlFile(file) : parseYamlBytes(file, Buffer.from(text, 'utf8'))
  if (!read.ok) return {result: read, context}
  const source = read.source
  const dir = path.dirname(path.resolve(file))
  if (extendsAnother(source)) {
    // Each file's structure is checked while composing, so the rules see a well-formed pipeline.
    const composed = await composePipeline(source, catalog)
    if (!composed.ok) return {result: composed, context}
    context.checker = await expressionChecker(composed.data)
    context.cron = await cronFor(composed.data)
    const loaded: LoadedPipeline = {file, dir, pipeline: composed.data as unknown as Pipeline, source, hash: composed.hash, composition: composed.composition}
    return {result: checkRules(loaded, context), context, loaded}
  }
  context.checker = await expressionChecker(source.data)
  context.cron = await cronFor(source.data)
  const structure = validateSource<Pipeline>(source, 'pipeline', 'pipeline')
  const data = source.data as Pipeline
  const loaded: LoadedPipeline = {file, dir, pipeline: data, source, hash: sha256(source.text)}
  if (structure.ok) return {result: checkRules(loaded, context), context, loaded}
  // The structure is wrong, but the rules may still find more to report in one pass, when the steps are at least steps.
  const stepsShaped =
    Array.isArray(data.steps) && data.steps.every((s) => s !== null && typeof s === 'object' && typeof s.id === 'string' && typeof s.kind === 'string')
  if (!stepsShaped) return {result: {ok: false, diagnostics: sortDiagnostics(structure.diagnostics)}, context}
  return {result: {ok: false, diagnostics: tolerantFindings(loaded, context, structure.diagnostics)}, context, loaded}
}

/** croner for a pipeline that declares schedules (the rule needs it); nothing loaded for the others. */
async function cronFor(data: unknown): Promise<CronClass | undefined> {
  const schedules = (data as {schedules?: unknown} | null)?.schedules
  return Array.isArray(schedules) && schedules.length > 0 ? loadCron() : undefined
}

/** A valid pipeline once its child pipelines are loaded and given what they declare; its hash covers theirs. */
async function withChildren(result: Extract<PipelineResult, {ok: true}>, context: RuleContext, chain: readonly string[]): Promise<PipelineResult> {
  const children = await checkChildPipelines(result.loaded, context, chain)
  if (children.diagnostics.length > 0) return {ok: false, diagnostics: sortDiagnostics(children.diagnostics)}
  // A change in a child pipeline is a change of this one: a resumed run must not start children from another file.
  if (children.hashes.length > 0) result.loaded.hash = sha256([result.loaded.hash, ...children.hashes].join('\n'))
  return result
}

/**
 * `tolerant`: the parent itself is invalid, so a step may be malformed: one whose children cannot be
 * made out is passed over (its own error is reported already) rather than tripped over.
 */
async function checkChildPipelines(
  loaded: LoadedPipeline,
  context: RuleContext,
  chain: readonly string[],
  tolerant = false,
): Promise<{diagnostics: Diagnostic[]; hashes: string[]}> {
  const {catalog} = context
  const diagnostics: Diagnostic[] = []
  const hashes: string[] = []
  for (const [i, step] of loaded.pipeline.steps.entries()) {
    let refs: readonly ChildPipelineRef[] = []
    try {
      refs = catalog[step.kind]?.childPipelines?.(step) ?? []
    } catch (error) {
      if (!tolerant) throw error
    }
    for (const ref of refs) {
      if (tolerant && ref.file !== undefined && typeof ref.file !== 'string') continue
      try {
        diagnostics.push(...(await checkChild(loaded, context, chain, i, ref, hashes)))
      } catch (error) {
        if (!tolerant) throw error
      }
    }
  }
  return {diagnostics, hashes}
}

/** One child pipeline of step `i`: loaded, given its inputs (a valid one's hash goes to `hashes`), or its problems. */
async function checkChild(
  loaded: LoadedPipeline,
  context: RuleContext,
  chain: readonly string[],
  i: number,
  ref: ChildPipelineRef,
  hashes: string[],
): Promise<Diagnostic[]> {
  const step = loaded.pipeline.steps[i]!
  const at: Segment[] = ['steps', i, ...ref.at]
  const rule = (d: Diagnostic): Diagnostic => ({...d, rule: 'child-pipeline'})
  let child: PipelineResult
  let name: string
  if (ref.file === undefined) {
    name = `the inline steps of ${step.id}`
    child = await loadInlinePipeline(loaded, i, context.catalog, chain)
    // Positions already point into this file: reported as they are.
    if (!child.ok) return child.diagnostics
  } else {
    const file = path.resolve(stepDir(loaded, i), ref.file)
    name = `the pipeline ${ref.file}`
    if (chain.includes(file)) {
      const cycle = [...chain.slice(chain.indexOf(file)), file].map((f) => path.relative(process.cwd(), f) || f).join(' -> ')
      return [rule(diag(loaded, at, `sub-pipelines form a cycle: ${cycle}`))]
    }
    if (!existsSync(file) || !statSync(file).isFile()) return [rule(diag(loaded, at, `pipeline file ${ref.file} does not exist (looked for ${file})`))]
    child = await loadPipeline(file, context.catalog, chain)
    if (!child.ok) {
      const shown = child.diagnostics
        .slice(0, 3)
        .map((d) => `${d.file}:${d.line}:${d.col}: ${d.message}`)
        .join('; ')
      const more = child.diagnostics.length > 3 ? ` (and ${child.diagnostics.length - 3} more)` : ''
      return [rule(diag(loaded, at, `the pipeline ${ref.file} is not valid: ${shown}${more}`))]
    }
    hashes.push(child.loaded.hash)
  }
  const declared = (child.loaded.pipeline.inputs ?? {}) as Record<string, {required?: boolean; default?: unknown}>
  return childInputProblems(loaded, context, i, ref, name, declared)
}
