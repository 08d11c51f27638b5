/** Small pieces every page of a run shares: a status badge, a link to a run, a duration. */
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
