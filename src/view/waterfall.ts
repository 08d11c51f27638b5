/**
 * The run's time as a waterfall (as Jaeger and Temporal draw it): one bar per step from its start
 * to its end, the foreach children and an agent's tool calls under the step that made them, and the
 * spans the run spent queued for a worker or waiting for a person drawn as such — where the time went
 * at a glance. Drawn in SVG from the records' own times (no clock: the same run draws the same).
 */
import type {RunEvent} from '../types/run.js'
import {html, type Html} from './html.js'
import {duration, ticks} from './parts.js'
import type {RunView} from './run-data.js'

export type BarKind = 'step' | 'step-failed' | 'child' | 'tool' | 'queued' | 'waiting'

export interface Bar {
  label: string
  kind: BarKind
  start: number
  end: number
  depth: number
}

const ms = (iso: string | undefined): number | undefined => {
  const t = iso === undefined ? NaN : Date.parse(iso)
  return Number.isNaN(t) ? undefined : t
}

/** What the run waited on between its events: a worker (queued) or a person (awaiting input, blocked). */
function waits(events: RunEvent[], createdAt: number, end: number): Bar[] {
  const out: Bar[] = []
  let status: string | undefined
  let since = createdAt
  const close = (at: number): void => {
    if (status === 'queued') out.push({label: 'queued for a worker', kind: 'queued', start: since, end: at, depth: 0})
    if (status === 'awaiting_input' || status === 'blocked')
      out.push({label: `waiting for a person (${status.replace('_', ' ')})`, kind: 'waiting', start: since, end: at, depth: 0})
  }
  for (const e of events) {
    const at = ms(e.at)
    if (at === undefined || e.to === undefined) continue
    if (status === undefined && e.from !== undefined) status = e.from
    close(at)
    status = e.to
    since = at
  }
  close(end)
  return out
}

/** An agent's tool calls, each from its request to its result, under the step that made it. */
function toolCalls(events: RunEvent[], step: string, seq: number): Bar[] {
  const open = new Map<string, {at: number; tool: string}>()
  const out: Bar[] = []
  for (const e of events) {
    if (e.step !== step || (e.seq !== undefined && e.seq !== seq) || !e.call_id) continue
    const at = ms(e.at)
    if (at === undefined) continue
    if (e.event === 'tool_call_request') open.set(e.call_id, {at, tool: e.tool ?? 'tool'})
    if (e.event === 'tool_call_result') {
      const req = open.get(e.call_id)
      open.delete(e.call_id)
      out.push({label: `${e.tool ?? req?.tool ?? 'tool'} ${e.decision ?? ''}`.trim(), kind: 'tool', start: req?.at ?? at, end: at, depth: 1})
    }
  }
  return out
}

export function bars(view: RunView): Bar[] {
  const created = ms(view.record.created_at) ?? 0
  const times = [
    ms(view.record.ended_at),
    ms(view.record.updated_at),
    ...view.events.map((e) => ms(e.at)),
    ...view.steps.map((s) => ms(s.snapshot.step.ended_at)),
  ]
  const end = Math.max(created, ...times.filter((t): t is number => t !== undefined))
  const out: Bar[] = waits(view.events, created, end)
  for (const {snapshot: s} of view.steps) {
    const start = ms(s.step.started_at)
    if (start === undefined) continue
    const failed = s.errors.length > 0 || /fail|error|denied|blocked/.test(s.decisions.at(-1)?.decision ?? '')
    out.push({label: `#${s.step.seq} ${s.step.name}`, kind: failed ? 'step-failed' : 'step', start, end: ms(s.step.ended_at) ?? start, depth: 0})
    out.push(...toolCalls(view.events, s.step.name, s.step.seq))
    for (const c of view.children.filter((c) => c.parent?.step === s.step.name && c.parent?.seq === s.step.seq)) {
      const from = ms(c.created_at)
      if (from === undefined) continue
      const item = c.parent?.index !== undefined ? `item ${c.parent.index}${c.parent.key ? ` ${c.parent.key}` : ''}` : c.run_id
      out.push({label: `${item}: ${c.status.replace('_', ' ')}`, kind: 'child', start: from, end: ms(c.updated_at) ?? from, depth: 1})
    }
  }
  return out.sort((a, b) => a.start - b.start || a.depth - b.depth)
}

const LEGEND: Array<[BarKind, string]> = [
  ['step', 'step'],
  ['step-failed', 'failed step'],
  ['child', 'foreach item (child run)'],
  ['tool', 'tool call'],
  ['queued', 'queued for a worker'],
  ['waiting', 'waiting for a person'],
]

/** The waterfall: a label column, a bar per span on a shared time axis, a legend of the bar kinds. */
export function waterfall(view: RunView): Html {
  const all = bars(view)
  if (all.length === 0) return html`<p class="muted">No step has run yet.</p>`
  const t0 = Math.min(...all.map((b) => b.start))
  const span = Math.max(1, Math.max(...all.map((b) => b.end)) - t0)
  const labelW = 260
  const trackW = 720
  const rowH = 20
  const top = 24
  // The axis runs to a round time at or past the end, in whole milliseconds: a short run's ticks
  // were quarters of its span, rounded, and read +0 ms, +0 ms, +1 ms, +1 ms.
  const marks = ticks(span, true)
  const axis = marks.at(-1)!
  const x = (t: number): number => labelW + ((t - t0) / axis) * trackW
  const tickMarks = marks.map((v) => ({at: labelW + (v / axis) * trackW, text: `+${duration(v)}`}))
  const height = top + all.length * rowH + 8
  const used = new Set(all.map((b) => b.kind))
  return html`<div class="graph-wrap">
      <svg class="waterfall" role="img" aria-label="timeline of the run" xmlns="http://www.w3.org/2000/svg" width="${labelW + trackW + 70}" height="${height}" viewBox="0 0 ${labelW + trackW + 70} ${height}">
        ${tickMarks.map(
          (t) =>
            html`<line class="tick" x1="${t.at}" y1="${top - 6}" x2="${t.at}" y2="${height}" /><text class="tick-label" x="${t.at}" y="${top - 10}" text-anchor="middle">${t.text}</text>`,
        )}
        ${all.map((b, i) => {
          const y = top + i * rowH
          const w = Math.max(2, x(b.end) - x(b.start))
          return html`<g class="span ${b.kind}" data-kind="${b.kind}" data-ms="${b.end - b.start}">
            <title>${b.label}: ${duration(b.end - b.start)}</title>
            <text class="span-label" x="${8 + b.depth * 14}" y="${y + 14}">${b.label.length > 34 ? `${b.label.slice(0, 33)}…` : b.label}</text>
            <rect class="bar ${b.kind}" x="${x(b.start).toFixed(1)}" y="${y + 3}" width="${w.toFixed(1)}" height="${rowH - 6}" rx="3" />
            <text class="span-time" x="${(x(b.start) + w + 4).toFixed(1)}" y="${y + 14}">${duration(b.end - b.start)}</text>
          </g>`
        })}
      </svg>
    </div>
    <p class="legend small">
      ${LEGEND.filter(([k]) => used.has(k)).map(([k, text]) => html`<span class="key"><svg class="swatch" width="14" height="10" aria-hidden="true"><rect class="bar ${k}" width="14" height="10" rx="2" /></svg> ${text}</span> `)}
    </p>`
}
