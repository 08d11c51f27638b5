/**
 * A pipeline's step graph as inline SVG, drawn here (no Mermaid in the page, no CDN, no network):
 * steps laid out by dagre, every route labelled with its outcome on its own edge, the path a run
 * took drawn thick with how often it went each way, the child runs a step started fanned out
 * under it, and the step running now marked. Every text in it is escaped.
 */
import {allEdges, startStepId} from '../config/graph.js'
import type {PathTaken} from '../config/graph-render.js'
import {kindCatalog} from '../steps/registry.js'
import type {Pipeline} from '../types/pipeline.js'
import {escapeText, safeHref, trusted, type Html} from './html.js'

const ENDS: Record<string, string> = {__start__: 'start', __end__: 'end', __failed__: 'failed', __cancelled__: 'cancelled', __blocked__: 'blocked'}
const NODE_W = 168
const NODE_H = 40
const CHILD_W = 124
const CHILD_H = 30
const MARGIN = 24
/** Child runs drawn as nodes under their step; past these, one "+N more" node links to the list. */
export const FAN_SHOWN = 5

interface Point {
  x: number
  y: number
}

/** What the page uses of dagre's graph (typed here: the part of its API this file relies on). */
interface LayoutGraph {
  setGraph(label: Record<string, unknown>): LayoutGraph
  setDefaultEdgeLabel(make: () => object): LayoutGraph
  setNode(id: string, label: {width: number; height: number}): LayoutGraph
  setEdge(from: string, to: string, label: object, name: string): LayoutGraph
  node(id: string): Point
  edge(e: {v: string; w: string; name: string}): {points?: Point[]; x?: number; y?: number}
  graph(): {width?: number; height?: number}
}

/** The layout library (@dagrejs/dagre), loaded with the page (not when the CLI starts). */
export interface Dagre {
  graphlib: {Graph: new (options: {multigraph: boolean}) => LayoutGraph}
  layout(g: LayoutGraph): void
}

export async function loadDagre(): Promise<Dagre> {
  const loaded = (await import('@dagrejs/dagre')) as unknown as Dagre & {default?: Dagre}
  return loaded.default ?? loaded
}

interface Node {
  id: string
  kind: string | null
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

const LABEL_CHAR_W = 6.6

/**
 * Where each step and each edge goes, by dagre's layered layout: edges that go back up are routed
 * around the steps between (dagre gives them bends through empty ranks), and each edge's label has
 * its own place on the edge, so no label sits on a node or on another label.
 */
function layout(
  dagre: Dagre,
  ids: string[],
  lines: Line[],
  small: ReadonlySet<string>,
): {
  nodes: Map<string, {x: number; y: number}>
  edges: Array<{points: Point[]; label: Point | undefined}>
  width: number
  height: number
} {
  const g = new dagre.graphlib.Graph({multigraph: true})
  g.setGraph({rankdir: 'TB', nodesep: 40, ranksep: 48, edgesep: 18, marginx: MARGIN, marginy: MARGIN})
  g.setDefaultEdgeLabel(() => ({}))
  for (const id of ids) g.setNode(id, small.has(id) ? {width: CHILD_W, height: CHILD_H} : {width: NODE_W, height: NODE_H})
  lines.forEach((l, i) => {
    const text = shownLabel(l)
    g.setEdge(l.from, l.to, text ? {width: text.length * LABEL_CHAR_W + 8, height: 16, labelpos: 'c'} : {}, `e${i}`)
  })
  dagre.layout(g)
  const nodes = new Map<string, {x: number; y: number}>()
  for (const id of ids) {
    const n = g.node(id)
    const [w, h] = small.has(id) ? [CHILD_W, CHILD_H] : [NODE_W, NODE_H]
    nodes.set(id, {x: n.x - w / 2, y: n.y - h / 2})
  }
  const edges = lines.map((l, i) => {
    const e = g.edge({v: l.from, w: l.to, name: `e${i}`})
    return {points: e.points ?? [], label: shownLabel(l) && e.x !== undefined && e.y !== undefined ? {x: e.x, y: e.y} : undefined}
  })
  const graph = g.graph()
  return {nodes, edges, width: Math.ceil(graph.width ?? NODE_W + 2 * MARGIN), height: Math.ceil(graph.height ?? NODE_H + 2 * MARGIN)}
}

/** The text an edge carries: its outcome (not the default route's "next"), and how often the run took it. */
function shownLabel(l: Line): string {
  const plain = l.label === 'start' || l.label === 'next'
  return plain ? (l.count > 1 ? `×${l.count}` : '') : `${l.label}${l.count > 1 ? ` ×${l.count}` : ''}`
}

/** A smooth path through dagre's points (a straight line for two). */
function pathThrough(points: Array<{x: number; y: number}>): string {
  const f = (n: number): string => n.toFixed(1)
  if (points.length === 0) return ''
  let d = `M${f(points[0]!.x)},${f(points[0]!.y)}`
  if (points.length === 2) return `${d} L${f(points[1]!.x)},${f(points[1]!.y)}`
  // Quadratic pieces through the midpoints, each bend's point its control: the curve stays inside the hull of dagre's route.
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i]!
    const q = points[i + 1]!
    const mid = i === points.length - 2 ? q : {x: (p.x + q.x) / 2, y: (p.y + q.y) / 2}
    d += ` Q${f(p.x)},${f(p.y)} ${f(mid.x)},${f(mid.y)}`
  }
  return d
}

function nodeLabel(node: Node): string {
  return ENDS[node.id] ?? node.id
}

/** A child run as its parent's graph draws it. */
export interface FanChild {
  run_id: string
  status: string
  /** The item it ran for (its index and key), or the child pipeline's name. */
  label: string
}

export interface GraphMarks {
  /** A step id to the id of its section on the page: a node that ran links there. */
  anchors?: ReadonlyMap<string, string>
  /** The step the run waits at (a person's answer, review or confirmation). */
  waitsAt?: string
  /** The step running now (the live script moves the mark as the run goes). */
  running?: string
  /** The child runs each step started (its last time), fanned out under it. */
  fan?: ReadonlyMap<string, readonly FanChild[]>
  /** The exported file: a child run is no link (there is no server to go to). */
  standalone?: boolean
}

/** A node for a child run or for the ones past FAN_SHOWN: its own id in the layout, never a step's. */
interface FanNode {
  id: string
  step: string
  child?: FanChild
  more?: number
}

function fanNodes(fan: ReadonlyMap<string, readonly FanChild[]>, steps: ReadonlySet<string>): FanNode[] {
  // Their layout ids have a space, which no step id has: a fan node never takes a step's place.
  const out: FanNode[] = []
  for (const [step, children] of fan) {
    if (!steps.has(step) || children.length === 0) continue
    children.slice(0, FAN_SHOWN).forEach((child, i) => out.push({id: `child of ${step} ${i}`, step, child}))
    if (children.length > FAN_SHOWN) out.push({id: `more of ${step}`, step, more: children.length - FAN_SHOWN})
  }
  return out
}

/**
 * dagre orders the nodes of a rank to cross few edges, not by item: the places it gave a step's fan
 * (one rank, one size) are handed out again left to right in item order, "+N more" last.
 */
function inItemOrder(fan: readonly FanNode[], nodes: Map<string, {x: number; y: number}>): void {
  for (const step of new Set(fan.map((f) => f.step))) {
    const mine = fan.filter((f) => f.step === step)
    const places = mine.map((f) => nodes.get(f.id)!).sort((a, b) => a.x - b.x || a.y - b.y)
    mine.forEach((f, i) => nodes.set(f.id, places[i]!))
  }
}

function fanBody(f: FanNode, at: {x: number; y: number}, standalone: boolean): string {
  const mid = at.x + CHILD_W / 2
  if (f.more !== undefined) {
    // The rest are in the child runs' table on this page (served or exported alike).
    const text = `+${f.more} more`
    return `<a href="#child-runs"><g class="fan-more" data-step="${escapeText(f.step)}"><title>${escapeText(`${f.more} more child run(s) of ${f.step}: see the list of child runs`)}</title><rect class="node child more" x="${at.x}" y="${at.y}" width="${CHILD_W}" height="${CHILD_H}" rx="15"/><text class="node-kind" x="${mid}" y="${at.y + 19}" text-anchor="middle">${escapeText(text)}</text></g></a>`
  }
  const c = f.child!
  const label = c.label.length > 18 ? `${c.label.slice(0, 17)}…` : c.label
  const body = `<g class="fan-child s-${escapeText(c.status)}" data-run="${escapeText(c.run_id)}" data-step="${escapeText(f.step)}"><title>${escapeText(`${c.run_id}: ${c.status.replace('_', ' ')} (${c.label})`)}</title><rect class="node child" x="${at.x}" y="${at.y}" width="${CHILD_W}" height="${CHILD_H}" rx="15"/><text class="node-kind child-label" x="${mid}" y="${at.y + 19}" text-anchor="middle">${escapeText(label)}</text></g>`
  return standalone ? body : `<a href="${escapeText(safeHref(`/runs/${encodeURIComponent(c.run_id)}`))}">${body}</a>`
}

/**
 * The graph of `pipeline` (or, without one, of the steps the run took) with the run's path over it,
 * the child runs of each step fanned out under it, and the waiting or running step marked.
 */
export function graphSvg(dagre: Dagre, pipeline: Pipeline | null, taken: PathTaken, marks: GraphMarks = {}): Html {
  const anchors = marks.anchors ?? new Map<string, string>()
  const waitsAt = marks.waitsAt
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
  const placed = [...new Set(['__start__', ...ids, ...merged.flatMap((m) => [m.from, m.to])])]
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
  // The fan-out is laid out with the steps (dagre places it under its step and routes around it),
  // drawn after the routes as edges of its own: no outcome, no count.
  const fan = fanNodes(marks.fan ?? new Map(), new Set(placed))
  const fanLines: Line[] = fan.map((f) => ({from: f.step, to: f.id, label: 'start', count: 0, declared: true}))
  const laid = layout(dagre, [...placed, ...fan.map((f) => f.id)], [...drawn, ...fanLines], new Set(fan.map((f) => f.id)))
  inItemOrder(fan, laid.nodes)
  const {width, height} = laid
  const nodes = new Map<string, Node>()
  for (const id of placed) {
    const p = laid.nodes.get(id)!
    nodes.set(id, {id, kind: kinds.get(id) ?? null, x: p.x, y: p.y, ran: taken.steps[id] ?? 0})
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
  drawn.forEach((l, i) => {
    const route = laid.edges[i]!
    if (route.points.length < 2) return
    const cls = ['edge', l.count > 0 ? 'taken' : '', l.declared ? '' : 'undeclared'].filter(Boolean).join(' ')
    parts.push(
      `<path class="${cls}" data-from="${escapeText(l.from)}" data-to="${escapeText(l.to)}" d="${pathThrough(route.points)}" marker-end="url(#${l.count > 0 ? 'arrow-taken' : 'arrow'})"><title>${escapeText(`${ENDS[l.from] ?? l.from} → ${ENDS[l.to] ?? l.to}: ${l.label}${l.count > 0 ? `, taken ${l.count}×` : ''}`)}</title></path>`,
    )
    if (route.label)
      parts.push(
        `<text class="edge-label${l.count > 0 ? ' taken' : ''}" x="${route.label.x.toFixed(1)}" y="${(route.label.y + 4).toFixed(1)}" text-anchor="middle">${escapeText(shownLabel(l))}</text>`,
      )
  })
  for (const f of fan) {
    // From the step's bottom to the child's top: the two are in neighbouring ranks, nothing between.
    const from = laid.nodes.get(f.step)!
    const to = laid.nodes.get(f.id)!
    const [x0, y0, x1, y1] = [from.x + NODE_W / 2, from.y + NODE_H, to.x + CHILD_W / 2, to.y]
    parts.push(
      `<path class="edge fan" data-from="${escapeText(f.step)}" data-to="${escapeText(f.child?.run_id ?? 'more')}" d="${pathThrough([
        {x: x0, y: y0},
        {x: x1, y: (y0 + y1) / 2},
        {x: x1, y: y1},
      ])}" marker-end="url(#arrow)"/>`,
    )
  }
  for (const f of fan) parts.push(fanBody(f, laid.nodes.get(f.id)!, marks.standalone === true))
  for (const n of nodes.values()) {
    const end = n.id in ENDS
    const waits = n.id === waitsAt
    const running = n.id === marks.running
    const cls = ['node', end ? `end end-${ENDS[n.id]}` : '', n.ran > 0 ? 'ran' : '', waits ? 'waiting' : '', running ? 'running' : ''].filter(Boolean).join(' ')
    const label = nodeLabel(n)
    const kindLine = `${n.kind ?? ''}${n.ran > 0 ? `  ran ${n.ran}×` : ''}`
    // The second line says what the node's state is; the live script swaps it with the running mark.
    const body = end
      ? `<rect class="${cls}" x="${n.x + NODE_W / 4}" y="${n.y + 4}" width="${NODE_W / 2}" height="${NODE_H - 8}" rx="16"/><text class="node-text" x="${n.x + NODE_W / 2}" y="${n.y + NODE_H / 2 + 4}" text-anchor="middle">${escapeText(label)}</text>`
      : `<rect class="${cls}" x="${n.x}" y="${n.y}" width="${NODE_W}" height="${NODE_H}" rx="6"/><text class="node-text" x="${n.x + NODE_W / 2}" y="${n.y + 17}" text-anchor="middle">${escapeText(label.length > 22 ? `${label.slice(0, 21)}…` : label)}</text><text class="node-kind" x="${n.x + NODE_W / 2}" y="${n.y + 32}" text-anchor="middle" data-kind-line="${escapeText(kindLine)}">${escapeText(waits ? 'the run waits here' : running ? 'running now' : kindLine)}</text>`
    const title = `<title>${escapeText(`${n.id}${n.kind ? ` (${n.kind})` : ''}${n.ran > 0 ? `: ran ${n.ran}×` : ': not run'}${waits ? '; the run waits here' : ''}`)}</title>`
    const anchor = anchors.get(n.id)
    const step = end ? '' : ` data-step="${escapeText(n.id)}"`
    parts.push(
      end
        ? `<g>${body}</g>`
        : anchor !== undefined
          ? `<a href="#${escapeText(encodeURIComponent(anchor))}"><g class="step-node"${step}>${title}${body}</g></a>`
          : `<g class="step-node"${step}>${title}${body}</g>`,
    )
  }
  parts.push('</svg>')
  return trusted(parts.join(''))
}

/** What the graph's marks mean, under it. */
export function graphLegend(): Html {
  return trusted(
    '<p class="legend small graph-legend"><span class="key"><span class="swatch ran"></span>ran (the path taken, thick)</span><span class="key"><span class="swatch running"></span>running now</span><span class="key"><span class="swatch waiting"></span>the run waits here</span><span class="key"><span class="swatch child-ok"></span>child run succeeded</span><span class="key"><span class="swatch child-bad"></span>child run failed</span><span class="key"><span class="swatch child-wait"></span>child run running or waiting</span></p>',
  )
}
