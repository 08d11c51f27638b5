/** Renders a pipeline's graph as Mermaid or Graphviz dot: every step, edges labelled by outcome, loop bounds shown. */
import type {Pipeline, Step} from '../types/pipeline.js'
import {allEdges, edgesOf, startStepId} from './graph.js'
import type {GraphShape, KindCatalog} from './pipeline.js'

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
      else if (info.failures?.includes(outcome) && step.on?.[outcome] === undefined) out.push({from: step.id, outcome, effect: 'failed'})
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

const MERMAID_NODE: Record<GraphShape, (id: string, label: string) => string> = {
  box: (id, label) => `${id}["${label}"]`,
  diamond: (id, label) => `${id}{"${label}"}`,
  parallelogram: (id, label) => `${id}[/"${label}"/]`,
}

function isTerminal(step: Step): boolean {
  // A choice's routes are its choices, which edgesOf lists.
  return edgesOf(step).every((e) => e.label === 'exhausted')
}

function edgeLabel(label: string): string | null {
  return label === 'next' ? null : label
}

function mermaidText(text: string): string {
  return text.replace(/"/g, '#quot;').replace(/</g, '#lt;').replace(/>/g, '#gt;')
}

export function toMermaid(pipeline: Pipeline, catalog: KindCatalog = {}): string {
  const out = ['flowchart TD']
  const start = startStepId(pipeline)
  out.push(`  __start__(((start))) --> ${start}`)
  for (const step of pipeline.steps) {
    const label = [step.id, ...details(step, catalog)].map(mermaidText).join('<br/>')
    out.push(`  ${MERMAID_NODE[shapeOf(step, catalog)](step.id, label)}`)
  }
  for (const edge of allEdges(pipeline)) {
    const label = edgeLabel(edge.label)
    const arrow = edge.label === 'exhausted' ? '-.->' : '-->'
    out.push(label ? `  ${edge.from} ${arrow}|${mermaidText(label)}| ${edge.to}` : `  ${edge.from} ${arrow} ${edge.to}`)
  }
  const terminals = pipeline.steps.filter(isTerminal)
  if (terminals.length > 0) {
    out.push('  __end__(((end)))')
    for (const step of terminals) out.push(`  ${step.id} --> __end__`)
  }
  const stops = outcomeStops(pipeline, catalog)
  if (stops.some((s) => s.effect === 'failed')) out.push('  __failed__(((failed)))')
  if (stops.some((s) => s.effect === 'cancelled')) out.push('  __cancelled__(((cancelled)))')
  for (const s of stops) {
    const to = s.effect === 'awaiting_input' ? s.from : STOP_NODE[s.effect]
    out.push(`  ${s.from} -.->|${mermaidText(s.effect === 'awaiting_input' ? `${s.outcome} (waits)` : s.outcome)}| ${to}`)
  }
  for (const step of pipeline.steps.filter((s) => s.max_iterations !== undefined)) out.push(`  class ${step.id} bounded`)
  if (pipeline.steps.some((s) => s.max_iterations !== undefined)) out.push('  classDef bounded stroke-dasharray: 5 5')
  return `${out.join('\n')}\n`
}

function dotString(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
}

export function toDot(pipeline: Pipeline, catalog: KindCatalog = {}): string {
  const out = [`digraph ${dotString(pipeline.name)} {`, '  rankdir=TB;', '  node [shape=box, fontname="Helvetica"];', '  edge [fontname="Helvetica"];']
  out.push('  "__start__" [shape=circle, label="start"];')
  for (const step of pipeline.steps) {
    const shape = shapeOf(step, catalog)
    const style = step.max_iterations !== undefined ? ', style=dashed' : ''
    out.push(`  ${dotString(step.id)} [shape=${shape}${style}, label=${dotString([step.id, ...details(step, catalog)].join('\n'))}];`)
  }
  out.push(`  "__start__" -> ${dotString(startStepId(pipeline))};`)
  for (const edge of allEdges(pipeline)) {
    const label = edgeLabel(edge.label)
    const attrs = [label ? `label=${dotString(label)}` : '', edge.label === 'exhausted' ? 'style=dashed' : ''].filter(Boolean)
    out.push(`  ${dotString(edge.from)} -> ${dotString(edge.to)}${attrs.length ? ` [${attrs.join(', ')}]` : ''};`)
  }
  const terminals = pipeline.steps.filter(isTerminal)
  if (terminals.length > 0) {
    out.push('  "__end__" [shape=doublecircle, label="end"];')
    for (const step of terminals) out.push(`  ${dotString(step.id)} -> "__end__";`)
  }
  const stops = outcomeStops(pipeline, catalog)
  if (stops.some((s) => s.effect === 'failed')) out.push('  "__failed__" [shape=doublecircle, label="failed"];')
  if (stops.some((s) => s.effect === 'cancelled')) out.push('  "__cancelled__" [shape=doublecircle, label="cancelled"];')
  for (const s of stops) {
    const to = s.effect === 'awaiting_input' ? dotString(s.from) : `"${STOP_NODE[s.effect]}"`
    out.push(`  ${dotString(s.from)} -> ${to} [label=${dotString(s.effect === 'awaiting_input' ? `${s.outcome} (waits)` : s.outcome)}, style=dotted];`)
  }
  out.push('}')
  return `${out.join('\n')}\n`
}

export function renderGraph(pipeline: Pipeline, format: GraphFormat, catalog: KindCatalog = {}): string {
  return format === 'mermaid' ? toMermaid(pipeline, catalog) : toDot(pipeline, catalog)
}
