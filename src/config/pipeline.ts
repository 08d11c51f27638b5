/**
 * Loads a pipeline in stages: YAML with positions, then the schema (all errors), then the semantic
 * rules the schema cannot express. A pipeline with any error is never returned for running.
 */
import {existsSync, readFileSync, statSync} from 'node:fs'
import path from 'node:path'
import {variablesUsed} from '../util/template.js'
import type {Pipeline, Step} from '../types/pipeline.js'
import {sha256} from '../util/hash.js'
import {formatPath, sortDiagnostics, type Diagnostic} from './diagnostics.js'
import {cycles, edgesOf, reachableFrom, specReach, startStepId} from './graph.js'
import {linksOf} from './step-links.js'
import {validateSource} from './document.js'
import {didYouMean} from '../util/suggest.js'
import {locate, readYamlFile, type YamlSource} from './yaml-source.js'
import {fileEscape, PIPELINE_FILE_FIELDS} from './pipeline-files.js'
import {composePipeline, extendsAnother, originOf, type Composition} from './compose.js'
import {checkExpressions, hasExpressions, loadExpressionChecker, outcomesOf, templatedStrings, withTypeProblems} from './expressions.js'
import type {JsonSchemaLike} from '../expr/index.js'
import {resolveInputs, type InputDeclaration} from '../expr/inputs.js'

/** A problem a kind's own check finds in one of its steps; `at` is relative to the step. */
export interface KindFinding {
  /** The rule's name, as diagnostics show it. */
  rule: string
  at: Array<string | number>
  message: string
  /** Point at the key rather than at its value. */
  key?: boolean
}

/** A step id a step names besides next, on and on_exhausted; `at` is relative to the step. */
export interface StepReference {
  at: Array<string | number>
  target: string
  /** What the reference is, for the message: "rollback target". */
  what: string
  /** The run can go there from this step (a choice's branch): an edge of the graph, labelled by the target's id. */
  route?: boolean
}

/** The node shape `pipe graph` draws: a box, a decision (diamond), a person's input (parallelogram). */
export type GraphShape = 'box' | 'diamond' | 'parallelogram'

/** What the loader needs to know about step kinds; the step registry provides it. */
export interface KindInfo {
  /** Outcomes a step of this kind can end with (error is always possible too). */
  outcomes(step: Step): readonly string[]
  /** Variables a prompt file of this kind may use. */
  promptVariables?: readonly string[]
  /** Outcomes that mean the step failed: only an on: entry routes them (next: does not). */
  failures?: readonly string[]
  /** Outcomes that stop the run by themselves (wait or cancel) and take no route. */
  stops?: Readonly<Record<string, string>>
  changesSpec?: boolean | ((step: Step) => boolean)
  needsSpec?: boolean
  /** The kind's own validate-time checks of a step. */
  check?(step: Step, loaded: LoadedPipeline): KindFinding[]
  /** Step ids a step names besides next, on and on_exhausted (see step-links.ts). */
  references?(step: Step): StepReference[]
  /** How `pipe graph` draws a step of the kind. */
  graph?: {shape?: GraphShape; details?(step: Step): string[]}
  /** The JSON Schema of the step's outputs, for checking `${{ steps.<id>.outputs.… }}`. */
  outputsSchema?(step: Step, pipeline: {dir: string}): JsonSchemaLike
  /** Fields the kind evaluates itself per item, with an alias (see StepHandler.deferred). */
  deferred?(step: Step): {fields: readonly string[]; foreign?: readonly string[]; alias?: string; items?: string; expect?: Readonly<Record<string, 'bool' | 'string' | 'list' | 'map' | 'int'>>}
  /** Pipeline files the step runs as child runs (see StepHandler.childPipelines); no file: its inline steps. */
  childPipelines?(step: Step): Array<{at: Array<string | number>; file?: string; with?: Readonly<Record<string, unknown>>; withAt?: Array<string | number>}>
  /** What a step does to the repository's working tree (see StepHandler.workingTree). */
  workingTree?(step: Step): {settles?: boolean; rollbackTo?: string; ends?: boolean}
}

/** Whether a step writes a spec version when it succeeds (a kind may decide per step). */
export function writesSpec(catalog: KindCatalog, step: Step): boolean {
  const changes = catalog[step.kind]?.changesSpec
  return typeof changes === 'function' ? changes(step) : changes === true
}
export type KindCatalog = Readonly<Record<string, KindInfo>>

export interface LoadedPipeline {
  file: string
  dir: string
  pipeline: Pipeline
  source: YamlSource
  /** sha256 of the file's text; of every file of the chain when the pipeline extends another. */
  hash: string
  /** Present when the pipeline extends another: where each composed node came from (see compose.ts). */
  composition?: Composition
}

/** The directory a step's files (prompt, output_schema, blocks_file) are relative to: that of the file that holds the step. */
export function stepDir(loaded: LoadedPipeline, step: number | string): string {
  const index = typeof step === 'number' ? step : loaded.pipeline.steps.findIndex((s) => s.id === step)
  return loaded.composition?.steps[index]?.dir ?? loaded.dir
}

/** `warnings` are problems that do not stop a run: pipe validate and --dry-run show them. */
export type PipelineResult = {ok: true; loaded: LoadedPipeline; warnings: Diagnostic[]} | {ok: false; diagnostics: Diagnostic[]}

/**
 * Loads a pipeline, and every pipeline its steps run as child runs (pipeline, foreach), recursively:
 * a child that is missing, invalid, given inputs it does not declare, or that leads back to a
 * pipeline being loaded (a cycle) is an error at the step that names it. `chain` is the files being
 * loaded above this one.
 */
export async function loadPipeline(file: string, catalog: KindCatalog, chain: readonly string[] = []): Promise<PipelineResult> {
  const result = await loadOne(file, catalog)
  if (!result.ok) return result
  const children = await checkChildPipelines(result.loaded, catalog, [...chain, path.resolve(file)])
  if (children.diagnostics.length > 0) return {ok: false, diagnostics: sortDiagnostics(children.diagnostics)}
  // A change in a child pipeline is a change of this one: a resumed run must not start children from another file.
  if (children.hashes.length > 0) result.loaded.hash = sha256([result.loaded.hash, ...children.hashes].join('\n'))
  return result
}

async function checkChildPipelines(loaded: LoadedPipeline, catalog: KindCatalog, chain: readonly string[]): Promise<{diagnostics: Diagnostic[]; hashes: string[]}> {
  const diagnostics: Diagnostic[] = []
  const hashes: string[] = []
  for (const [i, step] of loaded.pipeline.steps.entries()) {
    for (const ref of catalog[step.kind]?.childPipelines?.(step) ?? []) {
      const at: Segment[] = ['steps', i, ...ref.at]
      const rule = (d: Diagnostic): Diagnostic => ({...d, rule: 'child-pipeline'})
      let child: PipelineResult
      let name: string
      if (ref.file === undefined) {
        name = `the inline steps of ${step.id}`
        child = await loadInlinePipeline(loaded, i, catalog, chain)
        if (!child.ok) {
          // Positions already point into this file: report them as they are.
          diagnostics.push(...child.diagnostics)
          continue
        }
      } else {
      const file = path.resolve(stepDir(loaded, i), ref.file)
      name = `the pipeline ${ref.file}`
      if (chain.includes(file)) {
        const cycle = [...chain.slice(chain.indexOf(file)), file].map((f) => path.relative(process.cwd(), f) || f).join(' -> ')
        diagnostics.push(rule(diag(loaded, at, `sub-pipelines form a cycle: ${cycle}`)))
        continue
      }
      if (!existsSync(file) || !statSync(file).isFile()) {
        diagnostics.push(rule(diag(loaded, at, `pipeline file ${ref.file} does not exist (looked for ${file})`)))
        continue
      }
      child = await loadPipeline(file, catalog, chain)
      if (!child.ok) {
        const shown = child.diagnostics.slice(0, 3).map((d) => `${d.file}:${d.line}:${d.col}: ${d.message}`).join('; ')
        const more = child.diagnostics.length > 3 ? ` (and ${child.diagnostics.length - 3} more)` : ''
        diagnostics.push(rule(diag(loaded, at, `the pipeline ${ref.file} is not valid: ${shown}${more}`)))
        continue
      }
      hashes.push(child.loaded.hash)
      }
      const declared = (child.loaded.pipeline.inputs ?? {}) as Record<string, {required?: boolean; default?: unknown}>
      const given = ref.with ?? {}
      const withAt: Segment[] = ['steps', i, ...(ref.withAt ?? ref.at)]
      for (const key of Object.keys(given)) {
        if (!Object.hasOwn(declared, key)) {
          const names = Object.keys(declared)
          diagnostics.push(rule(diag(loaded, [...withAt, key], `${name} ${ref.file === undefined ? 'declare' : 'has'} no input "${key}"${names.length > 0 ? `${didYouMean(key, names)}; ${ref.file === undefined ? 'they declare' : 'its inputs'}: ${names.join(', ')}` : `; ${ref.file === undefined ? 'declare it under inputs: of the step' : 'it declares no inputs'}`}`, true)))
        }
      }
      // Literal values are checked against their input's type now; expressions when they resolve.
      // As at run time, a string input takes a number, boolean, list or map as its text.
      const asGiven = (key: string, value: unknown): unknown =>
        (declared[key] as {type?: string}).type === 'string' && value !== null && typeof value !== 'string' ? JSON.stringify(value) : value
      const literals = Object.fromEntries(Object.entries(given).filter(([key, value]) => Object.hasOwn(declared, key) && !(typeof value === 'string' && value.includes('${{'))).map(([key, value]) => [key, asGiven(key, value)]))
      const typed = resolveInputs(declared as Record<string, InputDeclaration>, {file: {name: 'with:', data: literals}})
      for (const problem of typed.problems) {
        if (problem.input === undefined || problem.source !== 'file' || !Object.hasOwn(literals, problem.input)) continue
        diagnostics.push(rule(diag(loaded, [...withAt, problem.input], `input "${problem.input}" of ${name}: ${problem.message.replace(/^with:: /, '')}`)))
      }
      for (const problem of withTypeProblems(loaded, catalog, i, String((ref.withAt ?? ['with'])[0]), given, declared as Record<string, {type?: string}>)) {
        diagnostics.push(rule(diag(loaded, [...withAt, problem.key], `input "${problem.key}" of ${name} ${problem.message}`)))
      }
      for (const [key, decl] of Object.entries(declared)) {
        if (decl.required === true && decl.default === undefined && !Object.hasOwn(given, key)) {
          diagnostics.push(rule(diag(loaded, ref.with ? withAt : at, `${name} require${ref.file === undefined ? '' : 's'} input "${key}": give it under with:`, true)))
        }
      }
    }
  }
  return {diagnostics, hashes}
}

/**
 * The anonymous child pipeline of a step's inline `steps:` (and `inputs:`): checked by the same
 * rules as a file, its positions in the file that holds the step. Its `file` is the parent's with
 * `#STEP` (a child run of it is resumed through its parent).
 */
export async function loadInlinePipeline(parent: LoadedPipeline, index: number, catalog: KindCatalog, chain: readonly string[] = []): Promise<PipelineResult> {
  const step = parent.pipeline.steps[index] as unknown as {id: string; steps?: Pipeline['steps']; inputs?: Pipeline['inputs']}
  const where = origin(parent, ['steps', index])
  const dir = stepDir(parent, index)
  const data = {version: 1 as const, name: `${parent.pipeline.name}.${step.id}`, ...(step.inputs ? {inputs: step.inputs} : {}), steps: step.steps ?? ([] as unknown as Pipeline['steps'])}
  const composition: Composition = {
    files: [where.source],
    steps: data.steps.map((_, j) => ({source: where.source, segments: [...where.segments, 'steps', j], dir, fields: {}})),
    keys: {inputs: {source: where.source, segments: [...where.segments, 'inputs'], exact: true}, steps: {source: where.source, segments: [...where.segments, 'steps'], exact: true}},
    removed: {},
  }
  const file = `${parent.file}#${step.id}`
  const loaded: LoadedPipeline = {file, dir, pipeline: data, source: where.source, hash: sha256(JSON.stringify(data)), composition}
  if (hasExpressions(data)) await loadExpressionChecker(data)
  const result = checkRules(loaded, catalog)
  const holder = where.source === parent.source ? parent.file : where.source.file
  if (!result.ok) return {ok: false, diagnostics: result.diagnostics.map((d) => (d.file === file ? {...d, file: holder} : d))}
  const children = await checkChildPipelines(loaded, catalog, chain)
  if (children.diagnostics.length > 0) return {ok: false, diagnostics: sortDiagnostics(children.diagnostics)}
  if (children.hashes.length > 0) loaded.hash = sha256([loaded.hash, ...children.hashes].join('\n'))
  return result
}

async function loadOne(file: string, catalog: KindCatalog): Promise<PipelineResult> {
  const read = await readYamlFile(file)
  if (!read.ok) return read
  const source = read.source
  if (extendsAnother(source)) {
    // Each file's structure is checked while composing, so the rules see a well-formed pipeline.
    const composed = await composePipeline(source, catalog)
    if (!composed.ok) return composed
    if (hasExpressions(composed.data)) await loadExpressionChecker(composed.data)
    const loaded: LoadedPipeline = {file, dir: path.dirname(path.resolve(file)), pipeline: composed.data as unknown as Pipeline, source, hash: composed.hash, composition: composed.composition}
    return checkRules(loaded, catalog)
  }
  if (hasExpressions(source.data)) await loadExpressionChecker(source.data)
  const structure = validateSource<Pipeline>(source, 'pipeline', 'pipeline')
  const data = source.data as Pipeline
  const loaded: LoadedPipeline = {file, dir: path.dirname(path.resolve(file)), pipeline: data, source, hash: sha256(source.text)}
  if (structure.ok) return checkRules(loaded, catalog)
  // The structure is wrong, but the graph rules may still find more to report in one pass (a
  // misspelt transition next to an unknown key). They run defensively: a rule that trips over a
  // malformed value reports nothing rather than a confusing error.
  const diagnostics = [...structure.diagnostics]
  if (Array.isArray(data.steps) && data.steps.every((s) => s !== null && typeof s === 'object' && typeof s.id === 'string' && typeof s.kind === 'string')) {
    const seen = new Set(diagnostics.map((d) => `${d.line}:${d.col}`))
    for (const rule of pipelineRules.filter((r) => r.name !== 'unregistered-kind')) {
      let found: Diagnostic[] = []
      try {
        found = rule.check(loaded, catalog, true)
      } catch {
        continue
      }
      for (const d of found) {
        if (seen.has(`${d.line}:${d.col}`)) continue
        seen.add(`${d.line}:${d.col}`)
        diagnostics.push({...d, rule: d.rule || rule.name})
      }
    }
  }
  return {ok: false, diagnostics: sortDiagnostics(diagnostics)}
}

function checkRules(loaded: LoadedPipeline, catalog: KindCatalog): PipelineResult {
  const diagnostics = pipelineRules.flatMap((rule) => rule.check(loaded, catalog).map((d) => ({...d, rule: d.rule || rule.name})))
  // Where a spec can exist depends on every path being right, so it is judged once the rest holds.
  if (diagnostics.length === 0) diagnostics.push(...flowRules.flatMap((rule) => rule.check(loaded, catalog).map((d) => ({...d, rule: rule.name}))))
  if (diagnostics.length > 0) return {ok: false, diagnostics: sortDiagnostics(diagnostics)}
  return {ok: true, loaded, warnings: pipelineWarnings(loaded, catalog)}
}

/** Problems worth a warning: the pipeline runs, but a path through it may surprise. */
export const pipelineAdvice: Rule[] = [
  {
    name: 'unrouted-failure',
    check(loaded, catalog) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        for (const outcome of catalog[step.kind]?.failures ?? []) {
          if (step.on?.[outcome] !== undefined) continue
          out.push(diag(loaded, ['steps', i, 'id'], `failure outcome "${outcome}" of step "${step.id}" has no route, so it ends the run failed${step.next !== undefined ? ' (next: is not taken on a failure)' : ''}; add on: {${outcome}: STEP} to handle it`))
        }
      })
      return out
    },
  },
  {
    // Between a checkpoint and the rollback to it the working tree may hold changes: an error with no route would end the run with them neither committed nor rolled back.
    name: 'unrouted-error-before-rollback',
    check(loaded, catalog) {
      const {steps} = loaded.pipeline
      const byId = new Map(steps.map((step) => [step.id, step]))
      const warned = new Set<string>()
      const out: Diagnostic[] = []
      const role = (step: Step): {settles?: boolean; rollbackTo?: string; ends?: boolean} => catalog[step.kind]?.workingTree?.(step) ?? {}
      for (const rollback of steps) {
        const to = role(rollback).rollbackTo
        if (to === undefined) continue
        const checkpoint = byId.get(to)
        if (!checkpoint) continue
        // The checkpoint's own error changed nothing; a git step (the commit, the rollback) settles the change, an end ends the run.
        const queue = edgesOf(checkpoint, catalog).filter((e) => e.label !== 'error').map((e) => e.to)
        const seen = new Set<string>()
        while (queue.length > 0) {
          const id = queue.shift()!
          const step = byId.get(id)
          if (!step || seen.has(id) || id === checkpoint.id || role(step).ends === true) continue
          seen.add(id)
          if (step.on?.error === undefined && !warned.has(id)) {
            warned.add(id)
            const fix = id === rollback.id ? 'add on: {error: STEP}, STEP an end step that says the rollback failed' : `add on: {error: ${rollback.id}}`
            out.push(diag(loaded, ['steps', steps.indexOf(step), 'id'], `step "${id}" runs after checkpoint "${checkpoint.id}" with changes its rollback "${rollback.id}" would undo, but its error has no route: the run would end with them neither committed nor rolled back; ${fix}`))
          }
          if (role(step).settles !== true) queue.push(...edgesOf(step, catalog).map((e) => e.to))
        }
      }
      return out
    },
  },
  {
    name: 'model-unused-var',
    check(loaded) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        // A step whose prompt is filled from its vars (a model step).
        if (!('vars' in step) || step.vars === undefined) return
        const text = promptText(loaded, step, i)
        if (text === undefined) return
        const used = new Set(variablesUsed(text).map((use) => use.name))
        for (const name of Object.keys(step.vars ?? {})) {
          if (!used.has(name)) out.push(diag(loaded, ['steps', i, 'vars', name], `var "${name}" of step "${step.id}" is not used by its prompt file "${step.prompt}" (no {{${name}}} in it)`, true))
        }
      })
      return out
    },
  },
  {
    name: 'spec-before-use',
    check: (loaded, catalog) => specBeforeUse(loaded, catalog).some,
  },
]

const specUse = new WeakMap<LoadedPipeline, {none: Diagnostic[]; some: Diagnostic[]}>()

/**
 * Steps that need a spec where none may exist yet, from one walk of the paths (it serves the error
 * and the warning alike): `none`, no path to the step writes a spec before it (an error);
 * `some`, some paths do and others do not (a warning: those fail with E_STATE).
 */
function specBeforeUse(loaded: LoadedPipeline, catalog: KindCatalog): {none: Diagnostic[]; some: Diagnostic[]} {
  let found = specUse.get(loaded)
  if (found) return found
  const reach = specReach(loaded.pipeline, catalog, (step) => writesSpec(catalog, step))
  found = {none: [], some: []}
  for (const [i, step] of loaded.pipeline.steps.entries()) {
    if (!catalog[step.kind]?.needsSpec || !reach.without.has(step.id)) continue
    if (reach.with.has(step.id)) found.some.push(diag(loaded, ['steps', i, 'id'], `a ${step.kind} step needs a spec, but on some path from the start no step before "${step.id}" writes one; that path fails with E_STATE`))
    else found.none.push(diag(loaded, ['steps', i, 'id'], `a ${step.kind} step needs a spec, but no step before "${step.id}" writes one on any path from the start (put a step that writes a spec, such as compile, before it)`))
  }
  specUse.set(loaded, found)
  return found
}

/** The text of a step's prompt file, when it has one inside the pipeline's tree that can be read. */
export function promptText(loaded: LoadedPipeline, step: Step, index: number): string | undefined {
  if (!('prompt' in step) || typeof step.prompt !== 'string') return undefined
  const dir = stepDir(loaded, index)
  // Never read a file outside the pipeline's tree, not even to check it.
  if (fileEscape(dir, step.prompt)) return undefined
  try {
    const full = path.resolve(dir, step.prompt)
    // A FIFO or a device would block or never end; missing-file reports it.
    if (!statSync(full).isFile()) return undefined
    return readFileSync(full, 'utf8')
  } catch {
    return undefined
  }
}

/** The warnings of a valid pipeline (see pipelineAdvice). */
export function pipelineWarnings(loaded: LoadedPipeline, catalog: KindCatalog): Diagnostic[] {
  return sortDiagnostics(pipelineAdvice.flatMap((rule) => rule.check(loaded, catalog).map((d) => ({...d, rule: rule.name, severity: 'warning' as const}))))
}

/** Rules over the paths through a pipeline whose graph is otherwise valid. */
const flowRules: Rule[] = [
  {
    name: 'spec-before-use',
    check: (loaded, catalog) => specBeforeUse(loaded, catalog).none,
  },
]

type Segment = string | number
interface Rule {
  name: string
  /** `tolerant`: the structure is wrong, so a check that trips over a malformed value is skipped, not fatal. */
  check(loaded: LoadedPipeline, catalog: KindCatalog, tolerant?: boolean): Diagnostic[]
}

/** A diagnostic at a node of the pipeline, in the file that holds the node (a base pipeline, an overlay entry). */
/** `offset`, when known, is a character offset in the file that holds the node (a place inside a scalar). */
export function diag(loaded: LoadedPipeline, segments: readonly Segment[], message: string, preferKey = false, offset?: number): Diagnostic {
  const at = origin(loaded, segments)
  const pos = offset === undefined ? locate(at.source, at.segments, preferKey) : at.source.lineCounter.linePos(offset)
  return {file: at.source === loaded.source ? loaded.file : at.source.file, line: pos.line, col: pos.col, path: formatPath(at.segments), message, rule: ''}
}

/** The file and path within it of a node of the (composed) pipeline. */
export function origin(loaded: LoadedPipeline, segments: readonly Segment[]): {source: YamlSource; segments: Segment[]} {
  return loaded.composition ? originOf(loaded.composition, loaded.source, segments) : {source: loaded.source, segments: [...segments]}
}

/** Every place a step id is referenced, with its path for error positions. */
function references(pipeline: Pipeline, catalog: KindCatalog): Array<{segments: Segment[]; target: string; what: string; route: boolean}> {
  const refs: Array<{segments: Segment[]; target: string; what: string; route: boolean}> = []
  if (pipeline.start !== undefined) refs.push({segments: ['start'], target: pipeline.start, what: 'start', route: true})
  pipeline.steps.forEach((step, i) => {
    for (const link of linksOf(step, catalog)) refs.push({segments: ['steps', i, ...link.at], target: link.target, what: link.what, route: link.route !== undefined})
  })
  return refs
}

export const pipelineRules: Rule[] = [
  {
    // Only steps' fields are resolved at run time (engine/expressions.ts); elsewhere a ${{ }} would
    // be used as written: a model name, a default, a gate pattern.
    name: 'expression-place',
    check(loaded) {
      return Object.entries(loaded.pipeline)
        .filter(([key]) => key !== 'steps' && key !== 'overlay')
        .flatMap(([key, value]) => templatedStrings(value, [key]))
        .map(({segments}) => diag(loaded, segments, `\${{ }} is not evaluated in ${formatPath(segments)}: expressions are allowed only in the fields of steps`))
    },
  },
  {
    name: 'duplicate-step-id',
    check(loaded) {
      const first = new Map<string, number>()
      const out: Diagnostic[] = []
      // Composed, the step of the deeper base came first: the one the child added is the duplicate.
      const depth = (i: number): number => (loaded.composition ? loaded.composition.files.indexOf(loaded.composition.steps[i]!.source) : 0)
      const order = loaded.pipeline.steps.map((_, i) => i).sort((x, y) => depth(y) - depth(x) || x - y)
      order.forEach((i) => {
        const step = loaded.pipeline.steps[i]!
        const seen = first.get(step.id)
        if (seen === undefined) first.set(step.id, i)
        else {
          const first = origin(loaded, ['steps', seen, 'id'])
          const here = origin(loaded, ['steps', i, 'id'])
          const where = `line ${locate(first.source, first.segments).line}${first.source === here.source ? '' : ` of ${first.source.file}`}`
          out.push(diag(loaded, ['steps', i, 'id'], `duplicate step id "${step.id}" (first defined on ${where})${loaded.composition ? '; to put a step in the place of one of the base, use an overlay replace' : ''}`))
        }
      })
      return out
    },
  },
  {
    name: 'unknown-step',
    check(loaded, catalog) {
      const ids = loaded.pipeline.steps.map((s) => s.id)
      const known = new Set(ids)
      return references(loaded.pipeline, catalog)
        .filter((ref) => !known.has(ref.target))
        .map((ref) => {
          const removed = loaded.composition?.removed[ref.target]
          if (!removed) return diag(loaded, ref.segments, `unknown step "${ref.target}" in ${ref.what}${didYouMean(ref.target, ids)}`)
          const by = `${removed.source.file}:${locate(removed.source, removed.segments).line}`
          if (!ref.route) {
            // A remove's next re-points routes only: a step that names the removed one for what it is (a checkpoint) needs another.
            return diag(loaded, ref.segments, `${ref.what} is step "${ref.target}", which the overlay removes (${by}); re-point it: name another step, or replace "${ref.target}" instead of removing it`)
          }
          const what = ref.what === 'start' ? 'start names step' : `${ref.what} into step`
          return diag(loaded, ref.segments, `${what} "${ref.target}", which the overlay removes (${by}); re-point it: give the remove a next ({remove: ${ref.target}, next: STEP}), or replace this step`)
        })
    },
  },
  {
    name: 'unregistered-kind',
    check(loaded, catalog) {
      const kinds = Object.keys(catalog)
      return loaded.pipeline.steps.flatMap((step, i) =>
        catalog[step.kind] ? [] : [diag(loaded, ['steps', i, 'kind'], `step kind "${step.kind}" has no handler registered${didYouMean(step.kind, kinds)}`)],
      )
    },
  },
  {
    name: 'unknown-outcome',
    check(loaded, catalog) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        const info = catalog[step.kind]
        if (!info) return
        const outcomes = outcomesOf(step, catalog)
        for (const outcome of Object.keys(step.on ?? {})) {
          if (!outcomes.includes(outcome)) {
            out.push(diag(loaded, ['steps', i, 'on', outcome], `a ${step.kind} step has no outcome "${outcome}"${didYouMean(outcome, outcomes)} (outcomes: ${outcomes.join(', ')})`, true))
          }
        }
      })
      return out
    },
  },
  {
    name: 'expression',
    check: checkExpressions,
  },
  {
    // Each kind's own checks of its steps (a gate step's gate names, an edit's blocks, a rollback's
    // target); the findings carry their own rule names.
    name: 'kind-check',
    check(loaded, catalog, tolerant) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        const info = catalog[step.kind]
        if (!info?.check) return
        let findings: KindFinding[] = []
        try {
          findings = info.check(step, loaded)
        } catch (error) {
          if (!tolerant) throw error
          return
        }
        for (const f of findings) out.push({...diag(loaded, ['steps', i, ...f.at], f.message, f.key ?? false), rule: f.rule})
      })
      return out
    },
  },
  {
    name: 'gate-rule',
    check(loaded) {
      const out: Diagnostic[] = []
      for (const [name, gate] of Object.entries(loaded.pipeline.gates ?? {})) {
        gate?.rules.forEach((rule, j) => {
          const at: Segment[] = ['gates', name, 'rules', j]
          const checks = ['required', 'min_items', 'max_items', 'min_length', 'pattern', 'enum'] as const
          if (!checks.some((c) => rule[c] !== undefined)) {
            out.push(diag(loaded, at, `gate rule on "${rule.path}" names no check; add one of: ${checks.join(', ')}`))
          }
          if (rule.pattern !== undefined) {
            try {
              new RegExp(rule.pattern, 'u')
            } catch (error) {
              out.push(diag(loaded, [...at, 'pattern'], `invalid regular expression: ${(error as Error).message}`))
            }
          }
          if (rule.min_items !== undefined && rule.max_items !== undefined && rule.min_items > rule.max_items) {
            out.push(diag(loaded, [...at, 'max_items'], `max_items ${rule.max_items} is below min_items ${rule.min_items}`))
          }
        })
      }
      return out
    },
  },
  {
    name: 'route-on-stop',
    check(loaded, catalog) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        const stops = catalog[step.kind]?.stops ?? {}
        for (const outcome of Object.keys(step.on ?? {})) {
          const effect = stops[outcome]
          if (effect) out.push(diag(loaded, ['steps', i, 'on', outcome], `outcome "${outcome}" of a ${step.kind} step ${effect === 'cancelled' ? 'cancels the run' : 'waits at the step again'}; it takes no route`, true))
        }
      })
      return out
    },
  },
  {
    name: 'unreachable-step',
    check(loaded, catalog) {
      const start = startStepId(loaded.pipeline)
      if (!loaded.pipeline.steps.some((s) => s.id === start)) return []
      const reachable = reachableFrom(loaded.pipeline, catalog, start)
      return loaded.pipeline.steps.flatMap((step, i) =>
        reachable.has(step.id) ? [] : [diag(loaded, ['steps', i, 'id'], `step "${step.id}" is unreachable from the start step "${start}"`)],
      )
    },
  },
  {
    name: 'unbounded-cycle',
    check(loaded, catalog) {
      const index = new Map(loaded.pipeline.steps.map((s, i) => [s.id, i]))
      return cycles(loaded.pipeline, catalog)
        .filter((component) => !component.some((id) => loaded.pipeline.steps[index.get(id)!]?.max_iterations !== undefined))
        .map((component) => {
          const i = index.get(component[0]!)!
          return diag(loaded, ['steps', i, 'id'], `steps ${component.join(' -> ')} form a cycle with no bound; set max_iterations on one of them`)
        })
    },
  },
  {
    name: 'exhausted-without-bound',
    check(loaded) {
      return loaded.pipeline.steps.flatMap((step, i) =>
        step.on_exhausted !== undefined && step.max_iterations === undefined
          ? [diag(loaded, ['steps', i, 'on_exhausted'], `on_exhausted needs max_iterations on step "${step.id}"`)]
          : [],
      )
    },
  },
  {
    name: 'file-outside-pipeline',
    check(loaded) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        for (const field of PIPELINE_FILE_FIELDS) {
          const name = (step as unknown as Record<string, unknown>)[field]
          if (typeof name !== 'string') continue
          const problem = fileEscape(stepDir(loaded, i), name)
          if (problem) out.push(diag(loaded, ['steps', i, field], `${field} "${name}" ${problem}; files a pipeline names must lie inside its directory (${stepDir(loaded, i)})`))
        }
      })
      return out
    },
  },
  {
    name: 'missing-file',
    check(loaded) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        if (!('prompt' in step) || step.prompt === undefined) return
        if (fileEscape(stepDir(loaded, i), step.prompt)) return
        const full = path.resolve(stepDir(loaded, i), step.prompt)
        let problem: string | undefined
        if (!existsSync(full)) problem = 'does not exist'
        else if (!statSync(full).isFile()) problem = 'is not a file'
        if (problem) out.push(diag(loaded, ['steps', i, 'prompt'], `prompt file "${step.prompt}" ${problem} (looked for ${full})`))
      })
      return out
    },
  },
  {
    name: 'prompt-variable',
    check(loaded, catalog) {
      const out: Diagnostic[] = []
      loaded.pipeline.steps.forEach((step, i) => {
        // A kind without a fixed set (model: its vars) checks its prompt in its own rule.
        const allowed = catalog[step.kind]?.promptVariables
        if (allowed === undefined || !('prompt' in step)) return
        const text = promptText(loaded, step, i)
        if (text === undefined) return
        for (const use of variablesUsed(text)) {
          if (allowed.includes(use.name)) continue
          out.push(diag(loaded, ['steps', i, 'prompt'], `prompt file "${step.prompt}" line ${use.line} column ${use.col} uses {{${use.name}}}, which a ${step.kind} step does not fill${didYouMean(use.name, allowed)} (variables: ${allowed.join(', ') || 'none'})`))
        }
      })
      return out
    },
  },
]
