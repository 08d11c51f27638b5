/** Renders a pipeline's graph as Mermaid or Graphviz dot: every step, edges labelled by outcome, loop bounds shown. */
import type {Pipeline, Step} from '../types/pipeline.js'
import {allEdges, edgesOf, startStepId} from './graph.js'
import type {GraphShape, KindCatalog} from './kind-contract.js'

/** Where an outcome that no transition takes leads: the run fails, is cancelled, or waits at the step. */
export interface OutcomeStop {
  from: string
  outcome: string
  effect: 'failed' | 'cancelled' | 'awaiting_input'
}

/** The outcomes that stop a run by themselves or by failing with no route, which plain edges do not show. */
export function outcomeStops(pipeline: Pipeline, catalog: KindCatalog): OutcomeStop[] {
  const out: OutcomeStop[] = []
  for (const step of pipeline.steps) {
    const info = catalog[step.kind]
    if (!info) continue
    for (const outcome of info.outcomes(step)) {
      const stop = info.stops?.[outcome]
      if (stop === 'cancelled' || stop === 'awaiting_input') out.push({from: step.id, outcome, effect: stop})
      else if (Object.hasOwn(info.failures ?? {}, outcome) && step.on?.[outcome] === undefined) out.push({from: step.id, outcome, effect: 'failed'})
    }
  }
  return out
}

const STOP_NODE = {failed: '__failed__', cancelled: '__cancelled__'} as const

export type GraphFormat = 'mermaid' | 'dot'

function details(step: Step, catalog: KindCatalog): string[] {
  const lines = step.kind === step.id ? [] : [`kind: ${step.kind}`]
  lines.push(...(catalog[step.kind]?.graph?.details?.(step) ?? []))
  if (step.max_iterations !== undefined) lines.push(`max ${step.max_iterations} iterations`)
  if (step.timeout_ms !== undefined) lines.push(`timeout ${step.timeout_ms} ms`)
  return lines
}

function shapeOf(step: Step, catalog: KindCatalog): GraphShape {
  return catalog[step.kind]?.graph?.shape ?? 'box'
}

// Every label is a quoted string, so that parentheses, pipes, brackets and braces in it are text, not syntax.
const MERMAID_NODE: Record<GraphShape, (id: string, label: string) => string> = {
  box: (id, label) => `${id}["${label}"]`,
  diamond: (id, label) => `${id}{"${label}"}`,
  parallelogram: (id, label) => `${id}[/"${label}"/]`,
}

/**
 * Words Mermaid's flowchart lexer reads as keywords wherever a node id may stand (`end` closes a
 * subgraph, `class` starts a statement, ...). A step id is lower case, so the same word with a capital
 * first letter is an id no step can have, and the lexer (case-sensitive) reads it as a plain id.
 */
const MERMAID_KEYWORDS = new Set('end graph flowchart subgraph style linkstyle classdef class click call href interpolate default direction v'.split(' '))

/** The node id a step has in the Mermaid text (the label always shows the step id as it is). */
function mermaidId(id: string): string {
  return MERMAID_KEYWORDS.has(id) ? id[0]!.toUpperCase() + id.slice(1) : id
}

function isTerminal(step: Step, catalog: KindCatalog): boolean {
  return edgesOf(step, catalog).every((e) => e.label === 'exhausted')
}

function edgeLabel(label: string): string | null {
  return label === 'next' ? null : label
}

// Characters Mermaid reads as syntax, and control or bidi characters that would hide or reorder text.
// eslint-disable-next-line no-control-regex
const MERMAID_SPECIAL = /[#"<>&`%\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/g
// eslint-disable-next-line no-control-regex
const MERMAID_SPECIAL_WITH_COLONS = /[#"<>&`%:\u0000-\u001F\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/g

/**
 * Text for inside a quoted Mermaid label, shown as written: Mermaid's entity codes (`#quot;`, `#35;`)
 * for what would end the string (`"`), start an entity (`#`), become HTML (`<`, `>`, `&`), a Markdown
 * string (a backquote) or a directive (`%`); a line break or other control character becomes its
 * numeric code, so a label stays on its line. With `colons`, `:` too (see mermaidLine).
 */
function mermaidText(text: string, colons = false): string {
  const special = colons ? MERMAID_SPECIAL_WITH_COLONS : MERMAID_SPECIAL
  return text.replace(special, (char) => MERMAID_ENTITY[char] ?? `#${char.charCodeAt(0)};`)
}

const MERMAID_ENTITY: Record<string, string> = {'"': '#quot;', '<': '#lt;', '>': '#gt;', '&': '#amp;'}

/**
 * Before parsing, Mermaid drops the last `;` of any line that matches this (meant for `style a
 * fill:#fff;`), which would cut an entity in a label short. Only a `:` can complete the match, so a
 * line that would match is written again with the colons of its labels as entities.
 */
const MERMAID_STYLE_LINE = /(?:style|classDef).*:\S*#.*;/

function mermaidLine(write: (colons: boolean) => string): string {
  const line = write(false)
  return MERMAID_STYLE_LINE.test(line) ? write(true) : line
}

/** A special node of the drawing: where a run starts, ends, fails, is cancelled or is blocked. */
const SPECIAL = {
  __start__: {mermaid: '__start__(((start)))', dot: '"__start__" [shape=circle, label="start"];'},
  __end__: {mermaid: '__end__(((end)))', dot: '"__end__" [shape=doublecircle, label="end"];'},
  __failed__: {mermaid: '__failed__(((failed)))', dot: '"__failed__" [shape=doublecircle, label="failed"];'},
  __cancelled__: {mermaid: '__cancelled__(((cancelled)))', dot: '"__cancelled__" [shape=doublecircle, label="cancelled"];'},
  __blocked__: {mermaid: '__blocked__(((blocked)))', dot: '"__blocked__" [shape=doublecircle, label="blocked"];'},
} as const
type Special = keyof typeof SPECIAL

/** One edge a run took, `count` times: `to` is a step id or one of __end__, __failed__, __cancelled__, __blocked__ (from __start__ for the first). */
export interface TakenEdge {
  from: string
  to: string
  /** The outcome that took it ("start" from __start__, "exhausted" for a loop bound). */
  label: string
  count: number
}

/** The path one run took through a pipeline, as the renderer needs it (no records: the caller reads those). */
export interface PathTaken {
  run_id: string
  status: string
  /** How many times each step ran (a snapshot each). */
  steps: Record<string, number>
  taken: TakenEdge[]
}

interface DrawnEdge {
  from: string
  to: string
  /** The outcome (matched against a run's), and what the edge shows (null: no label). */
  outcome: string
  text: string | null
  style: 'solid' | 'dashed' | 'dotted'
  count?: number
}

/** Every edge the drawing has, in the order drawn: start, transitions, ends, stops; a run's path adds the edges it took that none of those is. */
function drawnEdges(pipeline: Pipeline, catalog: KindCatalog, path?: PathTaken): {edges: DrawnEdge[]; nodes: Set<Special>} {
  const edges: DrawnEdge[] = [{from: '__start__', to: startStepId(pipeline), outcome: 'start', text: null, style: 'solid'}]
  const nodes = new Set<Special>(['__start__'])
  for (const edge of allEdges(pipeline, catalog)) {
    edges.push({from: edge.from, to: edge.to, outcome: edge.label, text: edgeLabel(edge.label), style: edge.label === 'exhausted' ? 'dashed' : 'solid'})
  }
  const terminals = pipeline.steps.filter((step) => isTerminal(step, catalog))
  if (terminals.length > 0) nodes.add('__end__')
  for (const step of terminals) edges.push({from: step.id, to: '__end__', outcome: '*', text: null, style: 'solid'})
  const stops = outcomeStops(pipeline, catalog)
  if (stops.some((s) => s.effect === 'failed')) nodes.add('__failed__')
  if (stops.some((s) => s.effect === 'cancelled')) nodes.add('__cancelled__')
  for (const s of stops) {
    const to = s.effect === 'awaiting_input' ? s.from : STOP_NODE[s.effect]
    edges.push({from: s.from, to, outcome: s.outcome, text: s.effect === 'awaiting_input' ? `${s.outcome} (waits)` : s.outcome, style: 'dotted'})
  }
  for (const taken of path?.taken ?? []) {
    // The same outcome to the same place, else any edge to that place (a default next, an end step's end).
    const same = edges.filter((e) => e.from === taken.from && e.to === taken.to)
    let edge = same.find((e) => e.outcome === taken.label) ?? same.find((e) => e.outcome === 'next' || e.outcome === '*' || e.outcome === 'start')
    if (!edge) {
      // Taken but not drawn: an unrouted error, a loop bound with no on_exhausted, an end step's own status.
      if (taken.to in SPECIAL) nodes.add(taken.to as Special)
      edge = {from: taken.from, to: taken.to, outcome: taken.label, text: taken.label, style: 'dotted'}
      edges.push(edge)
    }
    edge.count = (edge.count ?? 0) + taken.count
  }
  return {edges, nodes}
}

function takenText(edge: DrawnEdge): string | null {
  if (edge.count === undefined || edge.count <= 1) return edge.text
  return edge.text === null ? `${edge.count}×` : `${edge.text} ×${edge.count}`
}

function ranLine(step: Step, path?: PathTaken): string[] {
  const n = path?.steps[step.id]
  return n === undefined ? [] : [n === 1 ? 'ran once' : `ran ${n}×`]
}

const TAKEN_COLOUR = '#2e7d32'
const TAKEN_FILL = '#c8e6c9'

export function toMermaid(pipeline: Pipeline, catalog: KindCatalog = {}, path?: PathTaken): string {
  const out = ['flowchart TD']
  const {edges, nodes} = drawnEdges(pipeline, catalog, path)
  const line = (e: DrawnEdge): string => {
    const text = takenText(e)
    const arrow = e.style === 'solid' ? '-->' : '-.->'
    const from = e.from === '__start__' ? SPECIAL.__start__.mermaid : mermaidId(e.from)
    const to = mermaidId(e.to)
    return text ? mermaidLine((colons) => `  ${from} ${arrow}|"${mermaidText(text, colons)}"| ${to}`) : `  ${from} ${arrow} ${to}`
  }
  const [startEdge, ...rest] = edges
  out.push(line(startEdge!))
  for (const step of pipeline.steps) {
    const lines = [step.id, ...details(step, catalog), ...ranLine(step, path)]
    out.push(mermaidLine((colons) => `  ${MERMAID_NODE[shapeOf(step, catalog)](mermaidId(step.id), lines.map((l) => mermaidText(l, colons)).join('<br/>'))}`))
  }
  for (const node of ['__end__', '__failed__', '__cancelled__', '__blocked__'] as const) if (nodes.has(node)) out.push(`  ${SPECIAL[node].mermaid}`)
  for (const edge of rest) out.push(line(edge))
  for (const step of pipeline.steps.filter((s) => s.max_iterations !== undefined)) out.push(`  class ${mermaidId(step.id)} bounded`)
  if (pipeline.steps.some((s) => s.max_iterations !== undefined)) out.push('  classDef bounded stroke-dasharray: 5 5')
  if (path) {
    const ran = pipeline.steps.filter((s) => path.steps[s.id] !== undefined).map((s) => mermaidId(s.id))
    if (ran.length > 0) out.push(`  class ${ran.join(',')} taken`, `  classDef taken fill:${TAKEN_FILL},stroke:${TAKEN_COLOUR},stroke-width:2px`)
    const indices = edges.flatMap((e, i) => (e.count !== undefined ? [i] : []))
    if (indices.length > 0) out.push(`  linkStyle ${indices.join(',')} stroke:${TAKEN_COLOUR},stroke-width:3px`)
  }
  return `${out.join('\n')}\n`
}

function dotString(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
}

export function toDot(pipeline: Pipeline, catalog: KindCatalog = {}, path?: PathTaken): string {
  const out = [`digraph ${dotString(pipeline.name)} {`, '  rankdir=TB;', '  node [shape=box, fontname="Helvetica"];', '  edge [fontname="Helvetica"];']
  const {edges, nodes} = drawnEdges(pipeline, catalog, path)
  out.push(`  ${SPECIAL.__start__.dot}`)
  for (const step of pipeline.steps) {
    const shape = shapeOf(step, catalog)
    const styles = [...(step.max_iterations !== undefined ? ['dashed'] : []), ...(path?.steps[step.id] !== undefined ? ['filled'] : [])]
    const style = styles.length === 0 ? '' : styles.length === 1 ? `, style=${styles[0]}` : `, style="${styles.join(',')}"`
    const fill = path?.steps[step.id] !== undefined ? `, fillcolor="${TAKEN_FILL}", color="${TAKEN_COLOUR}"` : ''
    out.push(
      `  ${dotString(step.id)} [shape=${shape}${style}${fill}, label=${dotString([step.id, ...details(step, catalog), ...ranLine(step, path)].join('\n'))}];`,
    )
  }
  const line = (e: DrawnEdge): string => {
    const text = takenText(e)
    const attrs = [
      text ? `label=${dotString(text)}` : '',
      e.style === 'solid' ? '' : `style=${e.style}`,
      e.count !== undefined ? `color="${TAKEN_COLOUR}", penwidth=3` : '',
    ].filter(Boolean)
    return `  ${dotString(e.from)} -> ${dotString(e.to)}${attrs.length ? ` [${attrs.join(', ')}]` : ''};`
  }
  const [startEdge, ...rest] = edges
  out.push(line(startEdge!))
  for (const node of ['__end__', '__failed__', '__cancelled__', '__blocked__'] as const) if (nodes.has(node)) out.push(`  ${SPECIAL[node].dot}`)
  for (const edge of rest) out.push(line(edge))
  out.push('}')
  return `${out.join('\n')}\n`
}

/** The drawing; given a run's path, the steps it ran and the edges it took are coloured, with their counts. */
export function renderGraph(pipeline: Pipeline, format: GraphFormat, catalog: KindCatalog = {}, path?: PathTaken): string {
  return format === 'mermaid' ? toMermaid(pipeline, catalog, path) : toDot(pipeline, catalog, path)
}
