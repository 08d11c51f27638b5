/** The runs list (filters, children nested, live status) and the stats page (charts drawn here as SVG). */
import type {StatsReport} from '../app/stats.js'
import type {RunSummary} from '../store/queries.js'
import {escapeText, html, safeHref, trusted, type Html} from './html.js'
import {STEP_NOW_UPDATE, stepNow} from './live.js'
import {childTable, statusBadge} from './run-page.js'

export const RUN_STATUSES = ['running', 'awaiting_input', 'blocked', 'interrupted', 'succeeded', 'failed', 'cancelled'] as const

export interface ListFilter {
  status?: string
  pipeline?: string
  feature?: string
  /** YYYY-MM-DD: runs created that day or later. */
  since?: string
}

/** The runs that pass the filter (top-level runs; their children come along). */
export function filterRuns(runs: RunSummary[], filter: ListFilter): RunSummary[] {
  return runs.filter(
    (r) =>
      (!filter.status || r.status === filter.status) &&
      (!filter.pipeline || r.pipeline === filter.pipeline) &&
      (!filter.feature || r.feature_id === filter.feature) &&
      (!filter.since || r.created_at.slice(0, 10) >= filter.since),
  )
}

export function runsBody(
  runs: RunSummary[],
  all: RunSummary[],
  filter: ListFilter,
  page: {more: boolean; limit: number; search: URLSearchParams; store?: string} = {more: false, limit: runs.length, search: new URLSearchParams()},
): Html {
  const more = new URLSearchParams(page.search)
  more.set('limit', String(page.limit * 2))
  const pipelines = [...new Set(all.map((r) => r.pipeline))].sort()
  const features = [...new Set(all.map((r) => r.feature_id))].sort()
  const option = (value: string, current: string | undefined): Html =>
    html`<option value="${value}" ${value === current ? ' selected' : ''}>${value === '' ? 'any' : value}</option>`
  const rows = runs.map(
    (r) =>
      html`<tr data-run="${r.run_id}">
          <td>
            <a href="/runs/${encodeURIComponent(r.run_id)}"><code>${r.run_id}</code></a>
          </td>
          <td class="status">${statusBadge(r.status)}${stepNow(r)}</td>
          <td><code>${r.pipeline}</code></td>
          <td><code>${r.feature_id}</code></td>
          <td><code>${r.spec_version ?? '-'}</code></td>
          <td class="mono small">${r.created_at}</td>
          <td>${r.reason ?? ''}</td>
        </tr>
        ${
          (r.children ?? []).length > 0
            ? html`<tr class="children">
                <td colspan="7">${childTable(r.children ?? [], {}, 1)}</td>
              </tr>`
            : ''
        }`,
  )
  // Which store: pipe view finds the nearest .pipe from where it starts, which may not be the one meant.
  return html`<h1>Runs</h1>
    ${page.store !== undefined ? html`<p class="muted small" id="store">store <code>${page.store}</code></p>` : ''}
    <form class="filters" method="get" action="/">
      <label
        >status<select name="status">
          ${['', ...RUN_STATUSES].map((s) => option(s, filter.status))}
        </select></label
      >
      <label
        >pipeline<select name="pipeline">
          ${['', ...pipelines].map((p) => option(p, filter.pipeline))}
        </select></label
      >
      <label
        >feature<select name="feature">
          ${['', ...features].map((f) => option(f, filter.feature))}
        </select></label
      >
      <label>since<input type="date" name="since" value="${filter.since ?? ''}" /></label>
      <button>filter</button>
    </form>
    <p class="muted small" id="live">${runs.length} run(s), newest first; statuses update while runs go.</p>
    ${page.more ? html`<p class="panel wait" id="more">The newest ${page.limit} run(s) that match are shown; there are more. <a href="${safeHref(`/?${more.toString()}`)}">Show up to ${page.limit * 2}</a>, or narrow the filter.</p>` : ''}
    ${
      runs.length === 0
        ? filter.status || filter.pipeline || filter.feature || filter.since
          ? html`<p>No runs match the filter. <a href="/">All runs</a>.</p>`
          : html`<p>
              No runs in this store yet. Start one, e.g. <code>pipe run pipelines/default.yaml --text "Users can export invoices as CSV."</code>, and it appears
              here.
            </p>`
        : html`<table class="runs">
            <tr>
              <th>run</th>
              <th>status</th>
              <th>pipeline</th>
              <th>feature</th>
              <th>spec</th>
              <th>created</th>
              <th>reason</th>
            </tr>
            ${rows}
          </table>`
    }`
}

/**
 * The live list: every few seconds, the statuses of the runs on the page from /api/runs (the same
 * filter); a run that appeared or left reloads the page. Text is set with textContent only.
 */
export const LIVE_SCRIPT = `
(() => {
  const shown = () => [...document.querySelectorAll('tr[data-run]')].map((r) => r.getAttribute('data-run'));
  const live = document.getElementById('live');
  const said = live ? live.textContent : '';
  // A page whose server stopped says so: its statuses are as of the last answer, not live.
  let last = new Date();
  const stopped = () => {
    if (!live) return;
    live.textContent = 'pipe view stopped answering: the statuses below are as of ' + last.toLocaleTimeString() + '. Start pipe view again and reload.';
    live.className = 'stopped';
  };
  async function poll() {
    try {
      const response = await fetch('/api/runs' + location.search, {headers: {accept: 'application/json'}});
      if (!response.ok) { stopped(); return; }
      last = new Date();
      if (live && live.className === 'stopped') { live.textContent = said; live.className = 'muted small'; }
      const body = await response.json();
      const flat = [];
      const walk = (list) => { for (const r of list) { flat.push(r); walk(r.children || []); } };
      walk(body.runs);
      const before = shown();
      if (flat.length !== before.length || flat.some((r) => !before.includes(r.run_id))) { location.reload(); return; }
      for (const r of flat) {
        for (const badge of document.querySelectorAll('tr[data-run="' + CSS.escape(r.run_id) + '"] .badge')) {
          if (badge.getAttribute('data-status') !== r.status) {
            badge.setAttribute('data-status', r.status);
            badge.className = 'badge s-' + r.status;
            badge.textContent = r.status.replace('_', ' ');
          }
        }
        ${STEP_NOW_UPDATE}
      }
    } catch (e) { stopped(); }
  }
  setInterval(poll, 2000);
})();
`

/**
 * A bar per label. `outOf` is the value of a full bar, drawn as a track behind each: a rate (out of
 * 100 %) is drawn against 100, so 1 failed step of 4 is a quarter bar, not the longest bar there is.
 * Without it, bars are relative to the largest value.
 */
function bars(title: string, data: Array<{label: string; value: number; bad?: boolean; text?: string}>, outOf?: number): Html {
  if (data.length === 0)
    return html`<h3>${title}</h3>
      <p class="muted">No data.</p>`
  const max = outOf ?? Math.max(...data.map((d) => d.value), 1)
  const rowH = 22
  const labelW = 220
  const barW = 420
  const height = data.length * rowH + 8
  const parts = data.map((d, i) => {
    const w = Math.max(1, Math.round((d.value / max) * barW))
    const y = i * rowH + 4
    const track = outOf !== undefined ? `<rect class="track" x="${labelW}" y="${y}" width="${barW}" height="${rowH - 6}"/>` : ''
    return `${track}<text x="${labelW - 6}" y="${y + 14}" text-anchor="end">${escapeText(d.label.length > 34 ? `${d.label.slice(0, 33)}…` : d.label)}</text><rect class="bar${d.bad ? ' bad' : ''}" x="${labelW}" y="${y}" width="${w}" height="${rowH - 6}"><title>${escapeText(`${d.label}: ${d.text ?? d.value}`)}</title></rect><text x="${labelW + w + 6}" y="${y + 14}">${escapeText(d.text ?? String(d.value))}</text>`
  })
  return html`<h3>${title}</h3>
    <svg
      xmlns="http://www.w3.org/2000/svg"
      class="chart"
      role="img"
      aria-label="${title}"
      viewBox="0 0 ${labelW + barW + 120} ${height}"
      width="${labelW + barW + 120}"
      height="${height}"
    >
      ${trusted(parts.join(''))}
    </svg>`
}

function line(title: string, points: Array<{label: string; value: number}>): Html {
  if (points.length === 0)
    return html`<h3>${title}</h3>
      <p class="muted">No data.</p>`
  const w = 640
  const h = 160
  const max = Math.max(...points.map((p) => p.value), 1)
  const step = points.length > 1 ? (w - 40) / (points.length - 1) : 0
  const xy = points.map((p, i) => [20 + i * step, h - 20 - (p.value / max) * (h - 40)] as const)
  const path = xy.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${x.toFixed(1)},${y.toFixed(1)}`).join(' ')
  const dots = xy
    .map(
      ([x, y], i) =>
        `<circle class="bar" cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3"><title>${escapeText(`${points[i]!.label}: ${points[i]!.value}`)}</title></circle>`,
    )
    .join('')
  return html`<h3>${title}</h3>
    <svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="${title}" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">
      ${trusted(`<line class="axis" x1="20" y1="${h - 20}" x2="${w - 20}" y2="${h - 20}"/><path d="${path}" fill="none" stroke="currentColor" stroke-width="1.5"/>${dots}<text x="20" y="12">max ${max}</text>`)}
    </svg>`
}

export function statsBody(report: StatsReport): Html {
  const t = report.totals
  const pct = (v: number | null): string => (v === null ? '-' : `${Math.round(v * 100)}%`)
  return html`<div class="stats">
    <h1>Stats</h1>
    <dl class="facts">
      <dt>runs</dt>
      <dd>${t.runs}</dd>
      <dt>steps</dt>
      <dd>${t.steps} (${t.failed_steps} failed)</dd>
      <dt>tasks</dt>
      <dd>${t.tasks}, passed ${t.tasks_passed} (${pct(t.task_pass_rate)})</dd>
      <dt>attempts</dt>
      <dd>${t.attempts}${t.mean_attempts !== null ? ` (mean ${t.mean_attempts.toFixed(2)} per task)` : ''}</dd>
      <dt>model calls</dt>
      <dd>${t.model_calls}, ${t.total_tokens} tokens${t.cost !== null ? `, cost ${t.cost} ${t.currency ?? ''}` : ''}</dd>
    </dl>
    ${bars(
      'Task pass rate by pipeline',
      report.pipelines
        .filter((p) => p.task_pass_rate !== null)
        .map((p) => ({label: p.pipeline, value: (p.task_pass_rate ?? 0) * 100, text: `${pct(p.task_pass_rate)} of ${p.tasks}`})),
      100,
    )}
    ${bars(
      'Step failure rate by pipeline',
      report.pipelines.map((p) => ({
        label: p.pipeline,
        value: p.steps === 0 ? 0 : (p.failed_steps / p.steps) * 100,
        bad: true,
        text: `${p.failed_steps} of ${p.steps} steps (${p.steps === 0 ? 0 : Math.round((p.failed_steps / p.steps) * 100)}%)`,
      })),
      100,
    )}
    ${bars(
      'Mean attempts per task by pipeline',
      report.pipelines
        .filter((p) => p.mean_attempts !== null)
        .map((p) => ({label: p.pipeline, value: p.mean_attempts ?? 0, text: (p.mean_attempts ?? 0).toFixed(2)})),
    )}
    ${bars(
      'QA failures by category',
      Object.entries(t.failure_categories)
        .sort((a, b) => b[1] - a[1])
        .map(([label, value]) => ({label, value, bad: true})),
    )}
    ${bars(
      'Mean QA duration by pipeline (ms)',
      report.pipelines.filter((p) => p.mean_qa_ms !== null).map((p) => ({label: p.pipeline, value: Math.round(p.mean_qa_ms ?? 0)})),
    )}
    ${line(
      'Tokens per run, oldest to newest',
      report.runs.map((r) => ({label: `${r.run_id} (${r.pipeline})`, value: r.total_tokens})),
    )}
    ${line(
      'Steps per run, oldest to newest',
      report.runs.map((r) => ({label: `${r.run_id} (${r.pipeline})`, value: r.steps})),
    )}
  </div>`
}
