/** Small pieces every page of a run shares: a status badge, a link to a run, a duration, an axis's ticks. */
import type {DiffRenderer} from './diff-view.js'
import type {Dagre} from './graph-svg.js'
import {html, safeHref, type Html} from './html.js'

export interface RunPageOptions {
  /** The exported file: no links to other pages of a server. */
  standalone?: boolean
  /** The form that gives what the run waits for (pipe view without --read-only; decision-forms.ts). */
  decide?: Html
  /** Draws a unified diff (diff2html, loaded with the page); without it a diff shows as its text. */
  diff?: DiffRenderer
  /** Two spec versions' JSON as a unified diff. */
  textDiff?: (name: string, before: string, after: string) => string
  /** Lays out the step graph; without it the page has no graph. */
  dagre?: Dagre
}

export function statusBadge(status: string): Html {
  return html`<span class="badge s-${status}" data-status="${status}">${status.replace('_', ' ')}</span>`
}

export function runLink(id: string, options: RunPageOptions): Html {
  return options.standalone ? html`<code>${id}</code>` : html`<a href="${safeHref(`/runs/${encodeURIComponent(id)}`)}"><code>${id}</code></a>`
}

export function duration(ms: number | undefined): string {
  if (ms === undefined) return ''
  return ms < 1000 ? `${ms} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`
}

/**
 * Round steps for an axis from 0 to at least `max`: 1, 2, 2.5 or 5 times a power of ten, about four
 * of them (whole numbers only for a count: no axis of steps reads 0.5).
 */
export function ticks(max: number, whole = false, about = 4): number[] {
  if (!(max > 0)) return [0, 1]
  const rough = max / about
  const power = 10 ** Math.floor(Math.log10(rough))
  const found = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= rough) ?? 10 * power
  const step = whole ? Math.max(1, Math.round(found)) : found
  const out: number[] = []
  for (let v = 0; v < max + step / 2; v += step) out.push(Number(v.toPrecision(12)))
  if (out.at(-1)! < max) out.push(Number((out.at(-1)! + step).toPrecision(12)))
  return out
}
