/**
 * A pipeline's step graph as inline SVG, drawn here (no Mermaid in the page, no CDN, no network):
 * steps in rows by their distance from the start, every route labelled with its outcome, and the
 * path a run took drawn thick with how often it went each way. Every text in it is escaped.
 */
import {allEdges, startStepId} from '../config/graph.js'
import type {PathTaken} from '../config/graph-render.js'
import {kindCatalog} from '../steps/registry.js'
import type {Pipeline} from '../types/pipeline.js'
import {escapeText, trusted, type Html} from './html.js'

const ENDS: Record<string, string> = {__start__: 'start', __end__: 'end', __failed__: 'failed', __cancelled__: 'cancelled', __blocked__: 'blocked'}
const NODE_W = 168
const NODE_H = 40
const GAP_X = 36
const ROW_H = 92
const MARGIN = 24

interface Node {
  id: string
  kind: string | null
  row: number
  col: number
  x: number
  y: number
  ran: number
}

interface Line {
  from: string
  to: string
  label: string
  count: number
  declared: boolean
}

/** Rows by breadth-first distance from the start; a step no route reaches goes below the rest, in declared order. */
function layout(ids: string[], start: string, lines: Line[]): Map<string, {row: number; col: number}> {
  const out = new Map<string, {row: number; col: number}>()
  const rowOf = new Map<string, number>([[start, 0]])
  const queue = [start]
  while (queue.length > 0) {
    const at = queue.shift()!
    for (const l of lines) {
      if (l.from !== at || rowOf.has(l.to)) continue
      rowOf.set(l.to, rowOf.get(at)! + 1)
      queue.push(l.to)
    }
  }
  let last = Math.max(0, ...rowOf.values())
  for (const id of ids) if (!rowOf.has(id)) rowOf.set(id, ++last)
  const perRow = new Map<number, number>()
  const order = [...ids, ...[...rowOf.keys()].filter((id) => !ids.includes(id))]
  for (const id of order) {
    const row = rowOf.get(id)!
    const col = perRow.get(row) ?? 0
    perRow.set(row, col + 1)
    out.set(id, {row, col})
  }
  return out
}

function nodeLabel(node: Node): string {
  return ENDS[node.id] ?? node.id
}

/**
 * The graph of `pipeline` (or, without one, of the steps the run took) with the run's path over it.
 * `anchors` maps a step id to the id of its section on the page: a node that ran links there.
 */
export function graphSvg(pipeline: Pipeline | null, taken: PathTaken, anchors: ReadonlyMap<string, string> = new Map(), waitsAt?: string): Html {
  const ids = pipeline ? pipeline.steps.map((s) => s.id) : [...new Set(taken.taken.flatMap((t) => [t.from, t.to]).filter((id) => !(id in ENDS)))]
  const start = pipeline ? startStepId(pipeline) : (taken.taken.find((t) => t.from === '__start__')?.to ?? ids[0] ?? '__start__')
  const merged: Line[] = [{from: '__start__', to: start, label: 'start', count: 0, declared: true}]
  if (pipeline) for (const e of allEdges(pipeline, kindCatalog)) merged.push({from: e.from, to: e.to, label: e.label, count: 0, declared: true})
  // A move the run made counts on the route that took it: the outcome's own, else the step's default
  // (next); a move no route declares (an unrouted failure, a wait) is drawn on its own, dotted.
  for (const t of taken.taken) {
    const between = merged.filter((m) => m.from === t.from && m.to === t.to)
    const route = between.find((m) => m.label === t.label) ?? between.find((m) => m.label === 'next') ?? between.find((m) => m.label === 'start')
    if (route) route.count += t.count
    // Without the pipeline (its file changed or is gone) no route is known: a move is only a move,
    // not one no route declares (dotted, every edge read as an unrouted failure).
    else merged.push({from: t.from, to: t.to, label: t.label, count: t.count, declared: pipeline === null})
  }
  const kinds = new Map((pipeline?.steps ?? []).map((s) => [s.id, s.kind as string]))
  const places = layout(['__start__', ...ids], '__start__', merged)
  const rows = Math.max(...[...places.values()].map((p) => p.row)) + 1
  const widest = Math.max(...Array.from({length: rows}, (_, r) => [...places.values()].filter((p) => p.row === r).length))
  const width = MARGIN * 2 + widest * NODE_W + (widest - 1) * GAP_X + 120
  const height = MARGIN * 2 + rows * ROW_H
  const nodes = new Map<string, Node>()
  for (const [id, p] of places) {
    const inRow = [...places.values()].filter((q) => q.row === p.row).length
    const rowWidth = inRow * NODE_W + (inRow - 1) * GAP_X
    const x = MARGIN + (width - 120 - MARGIN * 2 - rowWidth) / 2 + p.col * (NODE_W + GAP_X)
    nodes.set(id, {id, kind: kinds.get(id) ?? null, row: p.row, col: p.col, x, y: MARGIN + p.row * ROW_H, ran: taken.steps[id] ?? 0})
  }
  const parts: string[] = []
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="graph" role="img" aria-label="${escapeText(`step graph${pipeline ? ` of ${pipeline.name}` : ''}`)}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">`,
  )
  // Arrowheads in the drawing's units: sized by the line's width (the default) a taken edge's head was
  // three times as large as its neighbours', covering the node it points to.
  parts.push(
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead"/></marker><marker id="arrow-taken" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="11" markerHeight="11" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arrowhead taken"/></marker></defs>',
  )
  // Routes between the same two steps (success and partial both to publish) are one drawn edge
  // with their labels joined: drawn apart, their labels sat on one spot, unreadable.
  const drawn: Line[] = []
  for (const l of merged) {
    const same = drawn.find((d) => d.from === l.from && d.to === l.to && d.declared === l.declared)
    if (!same) drawn.push({...l})
    else {
      same.label =
        same.label === 'next' || same.label === 'start' ? l.label : l.label === 'next' || l.label === 'start' ? same.label : `${same.label}, ${l.label}`
      same.count += l.count
    }
  }
  for (const l of drawn) {
    const a = nodes.get(l.from)
    const b = nodes.get(l.to)
    if (!a || !b) continue
    const x1 = a.x + NODE_W / 2
    const y1 = a.y + NODE_H
    const x2 = b.x + NODE_W / 2
    const y2 = b.y
    const back = b.row <= a.row
    const d = back
      ? `M${a.x + NODE_W},${a.y + NODE_H / 2} C${a.x + NODE_W + 60},${a.y + NODE_H / 2} ${b.x + NODE_W + 60},${b.y + NODE_H / 2} ${b.x + NODE_W},${b.y + NODE_H / 2}`
      : `M${x1},${y1} C${x1},${y1 + 30} ${x2},${y2 - 30} ${x2},${y2}`
    const cls = ['edge', l.count > 0 ? 'taken' : '', l.declared ? '' : 'undeclared'].filter(Boolean).join(' ')
    parts.push(
      `<path class="${cls}" d="${d}" marker-end="url(#${l.count > 0 ? 'arrow-taken' : 'arrow'})"><title>${escapeText(`${ENDS[l.from] ?? l.from} → ${ENDS[l.to] ?? l.to}: ${l.label}${l.count > 0 ? `, taken ${l.count}×` : ''}`)}</title></path>`,
    )
    // A straight-down edge gets its label beside it, not across it.
    const straight = !back && Math.abs(x1 - x2) < 4
    const lx = back ? Math.max(a.x, b.x) + NODE_W + 48 : straight ? x1 + 8 : (x1 + x2) / 2
    const ly = back ? (a.y + b.y + NODE_H) / 2 : (y1 + y2) / 2 + 4
    const anchor = straight ? 'start' : 'middle'
    if (l.label !== 'start' && l.label !== 'next')
      parts.push(
        `<text class="edge-label${l.count > 0 ? ' taken' : ''}" x="${lx}" y="${ly}" text-anchor="${anchor}">${escapeText(l.label)}${l.count > 1 ? ` ×${l.count}` : ''}</text>`,
      )
    else if (l.count > 1) parts.push(`<text class="edge-label taken" x="${lx}" y="${ly}" text-anchor="${anchor}">×${l.count}</text>`)
  }
  for (const n of nodes.values()) {
    const end = n.id in ENDS
    const waits = n.id === waitsAt
    const cls = ['node', end ? `end end-${ENDS[n.id]}` : '', n.ran > 0 ? 'ran' : '', waits ? 'waiting' : ''].filter(Boolean).join(' ')
    const label = nodeLabel(n)
    const body = end
      ? `<rect class="${cls}" x="${n.x + NODE_W / 4}" y="${n.y + 4}" width="${NODE_W / 2}" height="${NODE_H - 8}" rx="16"/><text class="node-text" x="${n.x + NODE_W / 2}" y="${n.y + NODE_H / 2 + 4}" text-anchor="middle">${escapeText(label)}</text>`
      : `<rect class="${cls}" x="${n.x}" y="${n.y}" width="${NODE_W}" height="${NODE_H}" rx="6"/><text class="node-text" x="${n.x + NODE_W / 2}" y="${n.y + 17}" text-anchor="middle">${escapeText(label.length > 22 ? `${label.slice(0, 21)}…` : label)}</text><text class="node-kind" x="${n.x + NODE_W / 2}" y="${n.y + 32}" text-anchor="middle">${escapeText(waits ? 'the run waits here' : `${n.kind ?? ''}${n.ran > 0 ? `  ran ${n.ran}×` : ''}`)}</text>`
    const title = `<title>${escapeText(`${n.id}${n.kind ? ` (${n.kind})` : ''}${n.ran > 0 ? `: ran ${n.ran}×` : ': not run'}${waits ? '; the run waits here' : ''}`)}</title>`
    const anchor = anchors.get(n.id)
    parts.push(
      end
        ? `<g>${body}</g>`
        : anchor !== undefined
          ? `<a href="#${escapeText(encodeURIComponent(anchor))}"><g>${title}${body}</g></a>`
          : `<g>${title}${body}</g>`,
    )
  }
  parts.push('</svg>')
  return trusted(parts.join(''))
}
