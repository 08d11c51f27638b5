/** Renders a pipeline's graph as Mermaid or Graphviz dot: every step, edges labelled by outcome, loop bounds shown. */
import type {Pipeline, Step} from '../types/pipeline.js'
import {allEdges, startStepId} from './graph.js'

export type GraphFormat = 'mermaid' | 'dot'

function details(step: Step): string[] {
  const lines = step.kind === step.id ? [] : [`kind: ${step.kind}`]
  if (step.kind === 'gate') lines.push(`gates: ${step.gates.join(', ')}`)
  if (step.max_iterations !== undefined) lines.push(`max ${step.max_iterations} iterations`)
  if (step.timeout_ms !== undefined) lines.push(`timeout ${step.timeout_ms} ms`)
  return lines
}

function isTerminal(step: Step): boolean {
  return step.next === undefined && Object.keys(step.on ?? {}).length === 0
}

function edgeLabel(label: string): string | null {
  return label === 'next' ? null : label
}

function mermaidText(text: string): string {
  return text.replace(/"/g, '#quot;').replace(/</g, '#lt;').replace(/>/g, '#gt;')
}

export function toMermaid(pipeline: Pipeline): string {
  const out = ['flowchart TD']
  const start = startStepId(pipeline)
  out.push(`  __start__(((start))) --> ${start}`)
  for (const step of pipeline.steps) {
    const label = [step.id, ...details(step)].map(mermaidText).join('<br/>')
    out.push(step.kind === 'gate' ? `  ${step.id}{"${label}"}` : step.kind === 'review' ? `  ${step.id}[/"${label}"/]` : `  ${step.id}["${label}"]`)
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
  for (const step of pipeline.steps.filter((s) => s.max_iterations !== undefined)) out.push(`  class ${step.id} bounded`)
  if (pipeline.steps.some((s) => s.max_iterations !== undefined)) out.push('  classDef bounded stroke-dasharray: 5 5')
  return `${out.join('\n')}\n`
}

function dotString(text: string): string {
  return `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
}

export function toDot(pipeline: Pipeline): string {
  const out = [`digraph ${dotString(pipeline.name)} {`, '  rankdir=TB;', '  node [shape=box, fontname="Helvetica"];', '  edge [fontname="Helvetica"];']
  out.push('  "__start__" [shape=circle, label="start"];')
  for (const step of pipeline.steps) {
    const shape = step.kind === 'gate' ? 'diamond' : step.kind === 'review' ? 'parallelogram' : 'box'
    const style = step.max_iterations !== undefined ? ', style=dashed' : ''
    out.push(`  ${dotString(step.id)} [shape=${shape}${style}, label=${dotString([step.id, ...details(step)].join('\n'))}];`)
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
  out.push('}')
  return `${out.join('\n')}\n`
}

export function renderGraph(pipeline: Pipeline, format: GraphFormat): string {
  return format === 'mermaid' ? toMermaid(pipeline) : toDot(pipeline)
}
