/** The run's records around its steps: the timeline, spec versions and their differences, evidence, deliveries. */
import {diffValues, type Change} from '../spec/diff.js'
import type {CanonicalSpec} from '../types/spec.js'
import {html, jsonBlock, type Html} from './html.js'
import type {RunPageOptions} from './parts.js'
import type {RunView} from './run-data.js'

/** What changed between two spec versions, field by field (their meta, which always differs, left out). */
export function specDiff(before: CanonicalSpec, after: CanonicalSpec): Change[] {
  const {meta: _a, ...a} = before
  const {meta: _b, ...b} = after
  return diffValues(a, b)
}

/** The changes as a table: the field's path, how it changed, the value before and after. */
export function specChanges(changes: Change[]): Html {
  return html`<table>
    ${changes.map(
      (c) =>
        html`<tr class="diff-${c.kind}">
          <td class="mono">${c.path || '(root)'}</td>
          <td>${c.kind}</td>
          <td>${c.before !== undefined ? jsonBlock(c.before) : ''}</td>
          <td>${c.after !== undefined ? jsonBlock(c.after) : ''}</td>
        </tr>`,
    )}
  </table>`
}

/** A spec version as the text its diff compares: its content as indented JSON, its meta (which always differs) left out. */
export function specText(spec: CanonicalSpec): string {
  const {meta: _m, ...content} = spec
  return `${JSON.stringify(content, null, 2)}\n`
}

export function timeline(view: RunView): Html {
  return html`<table class="timeline">
    <tr>
      <th>at</th>
      <th>event</th>
      <th>state</th>
      <th>step</th>
      <th>by</th>
      <th>what</th>
    </tr>
    ${view.events.map(
      (e) =>
        html`<tr>
          <td class="mono small">${e.at}</td>
          <td>${e.event}</td>
          <td>${e.from ?? ''}${e.to ? ` → ${e.to}` : ''}</td>
          <td>${e.step ?? ''}${e.seq !== undefined ? ` #${e.seq}` : ''}</td>
          <td>${e.by ?? ''}</td>
          <td>
            ${e.tool ? html`<code>${e.tool}</code> ${e.decision ?? ''} ` : ''}${e.reason ?? e.summary ?? ''}${e.trace_id ? html` <span class="muted small">${e.trace_id}</span>` : ''}
          </td>
        </tr>`,
    )}
  </table>`
}

export function specs(view: RunView, options: RunPageOptions): Html {
  if (view.specs.length === 0) return html`<p class="muted">This run wrote and read no spec version.</p>`
  const diffs = view.specs.slice(1).map((spec, i) => {
    const before = view.specs[i]!
    const changes = specDiff(before, spec)
    return html`<div class="panel">
      <strong><code>${before.meta.spec_version}</code> → <code>${spec.meta.spec_version}</code></strong> (${changes.length} field change(s))
      ${options.diff && options.textDiff ? options.diff(options.textDiff('spec.json', specText(before), specText(spec))) : ''} ${specChanges(changes)}
    </div>`
  })
  const picker = options.standalone
    ? html``
    : html`<form class="filters" method="get" action="/specs/diff">
        <label
          >from<select name="a">
            ${view.specs.map((s) => html`<option>${s.meta.spec_version}</option>`)}
          </select></label
        ><label
          >to<select name="b">
            ${view.specs.map((s, i) => html`<option${i === view.specs.length - 1 ? ' selected' : ''}>${s.meta.spec_version}</option>`)}
          </select></label
        ><button>compare</button>
      </form>`
  return html`${picker}${diffs}${view.specs.map(
    (s) =>
      html`<details class="step">
        <summary>
          <code>${s.meta.spec_version}</code> <span class="muted">${s.meta.status}, by step ${s.meta.created_by_step} at ${s.meta.created_at}</span>
        </summary>
        <div class="body">${jsonBlock(s)}</div>
      </details>`,
  )}`
}

export function evidence(view: RunView): Html {
  if (view.evidence.length === 0) return html`<p class="muted">No evidence records.</p>`
  return html`${view.evidence.map(
    (e) =>
      html`<details class="step" id="evidence-${e.evidence_id}">
        <summary>
          <code>${e.evidence_id}</code> ${'problem' in e ? html`<span class="o-fail">${e.problem}</span>` : html`<span class="muted">${e.type}</span>`}
        </summary>
        <div class="body">${jsonBlock(e)}</div>
      </details>`,
  )}`
}

export function ledger(view: RunView): Html {
  if (view.ledger.length === 0) return html`<p class="muted">No deliveries.</p>`
  return html`<table>
    <tr>
      <th>target</th>
      <th>spec</th>
      <th>status</th>
      <th>attempts</th>
      <th>external id</th>
    </tr>
    ${view.ledger.map(
      (l) =>
        html`<tr>
          <td>${l.target_type} <code>${l.target}</code></td>
          <td><code>${l.spec_version}</code></td>
          <td>${l.status}</td>
          <td>${l.attempts.length}</td>
          <td>${l.external_id ?? ''}</td>
        </tr>`,
    )}
  </table>`
}
