/**
 * Composition: a pipeline that `extends` another starts from the base's composed pipeline, overrides
 * its top-level settings, appends its own steps and applies its `overlay` edits by step id. Every
 * composed node keeps the file and YAML node it came from, so the rules that run on the composed
 * pipeline report each problem in the file that holds it (the base, the child, an overlay entry).
 *
 * Merge semantics (README "Extending a pipeline"):
 * - `gates`, `inputs`, `outputs`, `provider` and `tools` merge by name: a child entry replaces the base's entry of that name
 *   whole (a provider setting replaces that setting); `secrets` is the union of both lists;
 * - every other top-level key the child sets (name, description, start, completeness, ...) replaces
 *   the base's; `version` and `name` are required in every file;
 * - the child's `steps:` are appended after the base's, then `overlay` runs in order.
 */
import path from 'node:path'
import {sha256} from '../util/hash.js'
import {sortDiagnostics, formatPath, type Diagnostic} from './diagnostics.js'
import {validateSource} from './document.js'
import {didYouMean} from '../util/suggest.js'
import {locate, readYamlFile, type YamlSource} from './yaml-source.js'
import type {KindCatalog, StepKind, StepOf} from './kind-contract.js'
import type {Composition, NodeOrigin, Segment, StepOrigin} from './loaded.js'
import {linksOf, type StepLink} from './step-links.js'
import type {Step} from '../types/pipeline.js'

export type ComposeResult = {ok: true; data: Record<string, unknown>; composition: Composition; hash: string} | {ok: false; diagnostics: Diagnostic[]}

/** Top-level keys merged entry by entry instead of replaced whole. */
const MERGED_BY_NAME = ['gates', 'inputs', 'outputs', 'provider', 'tools'] as const
const UNION = ['secrets'] as const
const OWN = ['extends', 'overlay', 'steps'] as const
const OPS = ['insert_before', 'insert_after', 'replace', 'remove'] as const
/** A chain of extends longer than this is surely a mistake (and bounds the work). */
export const MAX_EXTENDS_DEPTH = 32

type Json = Record<string, unknown>
interface Entry {
  step: Json
  origin: StepOrigin
}

function diagAt(origin: NodeOrigin, message: string, rule: string, preferKey = false): Diagnostic {
  const pos = locate(origin.source, origin.segments, preferKey)
  return {file: origin.source.file, line: pos.line, col: pos.col, path: formatPath(origin.segments), message, rule}
}

/** Whether a parsed pipeline file extends another, so it needs composing. */
export function extendsAnother(source: YamlSource): boolean {
  const data = source.data as Json | null
  return data !== null && typeof data === 'object' && data.extends !== undefined
}

/** Composes a pipeline file with the chain of files it extends; each file's structure is checked against the schema on the way. */
export async function composePipeline(source: YamlSource, catalog: KindCatalog): Promise<ComposeResult> {
  return compose(source, [source.file], catalog)
}

/** `chain` holds the files extending this one, as they were named (the loaded file first). */
async function compose(source: YamlSource, chain: string[], catalog: KindCatalog): Promise<ComposeResult> {
  const structure = validateSource(source, 'pipeline', 'pipeline')
  if (!structure.ok) return structure
  const data = source.data as Json
  const dir = path.dirname(path.resolve(source.file))
  const here = (segments: Segment[]): NodeOrigin => ({source, segments})
  if (typeof data.extends !== 'string') return {ok: true, ...own(source, data, dir), hash: sha256(source.text)}

  const extendsAt = here(['extends'])
  const baseFile = path.isAbsolute(data.extends) ? data.extends : path.join(path.dirname(source.file), data.extends)
  const absolute = path.resolve(baseFile)
  if (chain.some((f) => path.resolve(f) === absolute)) {
    return {
      ok: false,
      diagnostics: [
        diagAt(extendsAt, `extends cycle: ${[...chain, baseFile].join(' -> ')}; a pipeline cannot extend itself, directly or through others`, 'extends-cycle'),
      ],
    }
  }
  if (chain.length >= MAX_EXTENDS_DEPTH) {
    return {
      ok: false,
      diagnostics: [diagAt(extendsAt, `extends chain is deeper than ${MAX_EXTENDS_DEPTH} files: ${[...chain, baseFile].join(' -> ')}`, 'extends-depth')],
    }
  }
  const read = await readYamlFile(baseFile)
  if (!read.ok) {
    const fileProblem = read.diagnostics.find((d) => d.rule === 'file')
    if (fileProblem)
      return {ok: false, diagnostics: [diagAt(extendsAt, `cannot extend "${data.extends}": ${fileProblem.message} (looked for ${absolute})`, 'extends')]}
    return {
      ok: false,
      diagnostics: sortDiagnostics([
        diagAt(extendsAt, `the base pipeline "${data.extends}" is not valid YAML (errors reported in ${baseFile})`, 'extends'),
        ...read.diagnostics,
      ]),
    }
  }
  const base = await compose(read.source, [...chain, baseFile], catalog)
  if (!base.ok) {
    const own = base.diagnostics.filter((d) => d.file === source.file)
    // An error of this file found through a cycle is reported once, by this file's own check.
    const foreign = base.diagnostics.filter((d) => d.file !== source.file)
    if (foreign.length === 0) return {ok: false, diagnostics: own}
    return {
      ok: false,
      diagnostics: sortDiagnostics([
        diagAt(extendsAt, `the base pipeline "${data.extends}" has errors (reported in ${baseFile} and the files it extends)`, 'extends'),
        ...base.diagnostics,
      ]),
    }
  }

  const result: Json = {...base.data}
  const composition: Composition = {
    files: [source, ...base.composition.files],
    steps: [],
    keys: {...base.composition.keys},
    removed: {...base.composition.removed},
  }
  for (const [key, value] of Object.entries(data)) {
    if ((OWN as readonly string[]).includes(key)) continue
    if ((MERGED_BY_NAME as readonly string[]).includes(key) && isObject(value) && isObject(result[key])) {
      result[key] = {...result[key], ...value}
      for (const name of Object.keys(value)) composition.keys[`${key}.${name}`] = here([key, name])
    } else if ((UNION as readonly string[]).includes(key) && Array.isArray(value) && Array.isArray(result[key])) {
      result[key] = [...new Set([...(result[key] as unknown[]), ...(value as unknown[])])]
    } else {
      result[key] = value
      for (const k of Object.keys(composition.keys)) if (k.startsWith(`${key}.`)) delete composition.keys[k]
      if ((MERGED_BY_NAME as readonly string[]).includes(key) && isObject(value))
        for (const name of Object.keys(value)) composition.keys[`${key}.${name}`] = here([key, name])
    }
    composition.keys[key] = here([key])
  }

  const entries: Entry[] = (base.data.steps as Json[]).map((step, i) => ({step: structuredClone(step), origin: base.composition.steps[i]!}))
  if (Array.isArray(data.steps))
    (data.steps as Json[]).forEach((step, i) => entries.push({step: structuredClone(step), origin: {source, segments: ['steps', i], dir, fields: {}}}))
  const state: OverlayState = {entries, data: result, composition, source, dir, catalog}
  const diagnostics: Diagnostic[] = []
  if (Array.isArray(data.overlay)) (data.overlay as Json[]).forEach((op, k) => diagnostics.push(...applyOperation(state, op, k)))
  if (diagnostics.length > 0) return {ok: false, diagnostics: sortDiagnostics(diagnostics)}
  result.steps = entries.map((e) => e.step)
  composition.steps = entries.map((e) => e.origin)
  // The hash covers every file of the chain: a changed base is a changed pipeline.
  return {ok: true, data: result, composition, hash: sha256(`${sha256(source.text)}\n${base.hash}`)}
}

function own(source: YamlSource, data: Json, dir: string): {data: Json; composition: Composition} {
  const keys: Record<string, NodeOrigin> = {}
  for (const [key, value] of Object.entries(data)) {
    keys[key] = {source, segments: [key]}
    if ((MERGED_BY_NAME as readonly string[]).includes(key) && isObject(value))
      for (const name of Object.keys(value)) keys[`${key}.${name}`] = {source, segments: [key, name]}
  }
  const steps = (data.steps as Json[]).map((_, i): StepOrigin => ({source, segments: ['steps', i], dir, fields: {}}))
  return {data: {...data}, composition: {files: [source], steps, keys, removed: {}}}
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

interface OverlayState {
  entries: Entry[]
  data: Json
  composition: Composition
  source: YamlSource
  dir: string
  catalog: KindCatalog
}

/** Where a step names other steps (step-links.ts); each file was checked against the schema before composing, so the step is well-formed. */
function linksIn(step: Json, catalog: KindCatalog): StepLink[] {
  return linksOf(step as unknown as Step, catalog)
}

function setAt(step: Json, at: Segment[], value: string): void {
  let node: unknown = step
  for (const segment of at.slice(0, -1)) node = (node as Record<string | number, unknown>)[segment]
  ;(node as Record<string | number, unknown>)[at.at(-1)!] = value
}

/**
 * Points every route into `from` (and start) at `to`, except those of the steps in `skip`. With
 * `renamed` (a replace gave the step a new id) the steps that only name it (a rollback's checkpoint)
 * follow too; an insert or a remove leaves them, because `to` is another step then.
 */
function retarget(state: OverlayState, from: string, to: string, cause: NodeOrigin, skip: ReadonlySet<Json>, renamed = false): void {
  for (const entry of state.entries) {
    if (skip.has(entry.step)) continue
    for (const t of linksIn(entry.step, state.catalog)) {
      if (t.target !== from || (t.route === undefined && !renamed)) continue
      setAt(entry.step, t.at, to)
      entry.origin.fields[t.at.join('.')] = {...cause, exact: true}
    }
  }
  if (state.data.start === from) {
    state.data.start = to
    state.composition.keys.start = {...cause, exact: true}
  }
}

/** Whether the run ever goes on at the step's next (its kind's takesNext): a choice or a succeeding end never does. */
function takesNext(catalog: KindCatalog, step: Json): boolean {
  const kind = catalog[String(step.kind)]
  return kind?.takesNext === undefined || kind.takesNext(step as unknown as StepOf<StepKind>)
}

/** Gives a new step a default next when it routes nowhere by itself. */
function defaultNext(state: OverlayState, entry: Entry, next: string | undefined, cause: NodeOrigin): void {
  if (next === undefined || entry.step.next !== undefined || entry.step.on !== undefined || !takesNext(state.catalog, entry.step)) return
  entry.step.next = next
  entry.origin.fields.next = {...cause, exact: true}
}

function applyOperation(state: OverlayState, op: Json, k: number): Diagnostic[] {
  const at = (...segments: Segment[]): NodeOrigin => ({source: state.source, segments: ['overlay', k, ...segments]})
  const named = OPS.filter((name) => op[name] !== undefined)
  if (named.length !== 1) {
    return [
      diagAt(at(), `an overlay operation names exactly one of ${OPS.join(', ')}${named.length ? ` (this one names ${named.join(' and ')})` : ''}`, 'overlay'),
    ]
  }
  const name = named[0]!
  const target = op[name] as string
  const problems: Diagnostic[] = []
  const inserts = name === 'insert_before' || name === 'insert_after'
  if (inserts && (op.step === undefined) === (op.steps === undefined))
    problems.push(diagAt(at(name), `${name} needs exactly one of step or steps (the step${'s'} to insert)`, 'overlay', true))
  if (name === 'replace' && op.step === undefined) problems.push(diagAt(at(name), 'replace needs step: the step to put in its place', 'overlay', true))
  if (name === 'replace' && op.steps !== undefined) problems.push(diagAt(at('steps'), 'replace takes one step (step:), not steps:', 'overlay', true))
  if (name === 'remove')
    for (const key of ['step', 'steps'])
      if (op[key] !== undefined) problems.push(diagAt(at(key), `remove takes no ${key}; use replace to put a step in its place`, 'overlay', true))
  if (name !== 'remove' && op.next !== undefined)
    problems.push(diagAt(at('next'), `next applies to remove; give the ${name === 'replace' ? 'new step' : 'inserted step'} its own next`, 'overlay', true))
  const ids = state.entries.map((e) => String(e.step.id))
  const index = ids.indexOf(target)
  if (index === -1) {
    const removed = state.composition.removed[target]
    const gone = removed
      ? ` (an earlier overlay operation removes it, at ${removed.source.file}:${locate(removed.source, removed.segments).line})`
      : didYouMean(target, ids)
    problems.push(diagAt(at(name), `unknown step "${target}" in overlay ${name}${gone}`, 'overlay'))
  }
  if (problems.length > 0) return problems
  const entry = state.entries[index]!
  const cause = at(name)

  if (inserts) {
    const fresh: Entry[] = (
      op.step !== undefined ? [{step: op.step as Json, segments: ['step']}] : (op.steps as Json[]).map((step, j) => ({step, segments: ['steps', j]}))
    ).map((s) => ({
      step: structuredClone(s.step),
      origin: {source: state.source, segments: ['overlay', k, ...s.segments], dir: state.dir, fields: {}},
    }))
    const first = String(fresh[0]!.step.id)
    fresh.forEach((e, j) => j + 1 < fresh.length && defaultNext(state, e, String(fresh[j + 1]!.step.id), cause))
    const last = fresh.at(-1)!
    if (name === 'insert_after') {
      const routes = linksIn(entry.step, state.catalog).filter((t) => t.route !== undefined && t.at[0] !== 'next')
      if (entry.step.next === undefined && routes.length > 0) {
        return [
          diagAt(
            cause,
            `step "${target}" routes by ${routes[0]!.at[0]}: and has no next, so "after ${target}" is ambiguous; insert before the step a route leads to, or replace "${target}"`,
            'overlay',
          ),
        ]
      }
      const old = entry.step.next as string | undefined
      entry.step.next = first
      entry.origin.fields.next = {...cause, exact: true}
      defaultNext(state, last, old, cause)
      state.entries.splice(index + 1, 0, ...fresh)
    } else {
      retarget(state, target, first, cause, new Set(fresh.map((e) => e.step)))
      defaultNext(state, last, target, cause)
      state.entries.splice(index, 0, ...fresh)
    }
    return []
  }

  if (name === 'replace') {
    const replacement: Entry = {
      step: structuredClone(op.step as Json),
      origin: {source: state.source, segments: ['overlay', k, 'step'], dir: state.dir, fields: {}},
    }
    if (replacement.step.next === undefined && replacement.step.on === undefined) {
      // Carried over from the replaced step, and located where that step says it.
      for (const key of ['next', 'on'] as const) {
        if (entry.step[key] === undefined) continue
        if (key === 'next' && !takesNext(state.catalog, replacement.step)) continue
        replacement.step[key] = structuredClone(entry.step[key])
        replacement.origin.fields[key] = entry.origin.fields[key] ?? {source: entry.origin.source, segments: [...entry.origin.segments, key]}
        for (const [field, at] of Object.entries(entry.origin.fields)) if (field.startsWith(`${key}.`)) replacement.origin.fields[field] = at
      }
    }
    state.entries[index] = replacement
    if (replacement.step.id !== target) retarget(state, target, String(replacement.step.id), cause, new Set(), true)
    return []
  }

  // remove
  state.entries.splice(index, 1)
  const to = (op.next as string | undefined) ?? (entry.step.next as string | undefined)
  const wasImplicitStart = state.data.start === undefined && index === 0
  if (to !== undefined) {
    retarget(state, target, to, op.next !== undefined ? at('next') : cause, new Set())
    if (wasImplicitStart) {
      state.data.start = to
      state.composition.keys.start = {...cause, exact: true}
    }
  } else if (wasImplicitStart) {
    // Nothing to send them to: the transitions still name the step, and unknown-step reports each with this operation.
    state.data.start = target
    state.composition.keys.start = {...cause, exact: true}
  }
  // A reference left behind (a transition with nowhere to go, a rollback target) is reported with this operation.
  state.composition.removed[target] = cause
  return []
}
