/**
 * The stats page: charts drawn here as SVG (no library, no script), each with its axis, ticks and
 * unit, and a filter to one pipeline (?pipeline=NAME). Every text in them is escaped.
 */
import {budgetText} from '../app/budget-stats.js'
import {tokensText, usdText} from '../util/prices.js'
import type {StatsReport} from '../app/stats.js'
import {escapeText, html, trusted, type Html} from './html.js'
import {ticks} from './parts.js'

/** A number as an axis shows it: 1200 as 1.2k, 3000000 as 3M. */
function short(v: number): string {
  const a = Math.abs(v)
  return a >= 1e6 ? `${Number((v / 1e6).toPrecision(3))}M` : a >= 1e4 ? `${Number((v / 1e3).toPrecision(3))}k` : String(Number(v.toPrecision(4)))
}

const LABEL_W = 220
const BAR_W = 420
const ROW_H = 22
const AXIS_H = 38

/**
 * A bar per label, with an axis of ticks under them and its unit. `outOf` is the value of a full
 * bar, drawn as a track behind each: a rate (out of 100 %) is drawn against 100, so 1 failed step
 * of 4 is a quarter bar, not the longest bar there is. Without it, the axis runs to a round value
 * at or above the largest.
 */
function bars(
  title: string,
  unit: string,
  data: Array<{label: string; value: number; bad?: boolean; text?: string}>,
  options: {outOf?: number; whole?: boolean} = {},
): Html {
  const outOf = options.outOf
  if (data.length === 0)
    return html`<h3>${title}</h3>
      <p class="muted">No data.</p>`
  const marks = ticks(outOf ?? Math.max(...data.map((d) => d.value)), options.whole)
  const max = outOf ?? marks.at(-1)!
  const x = (v: number): number => LABEL_W + (v / max) * BAR_W
  const top = data.length * ROW_H + 4
  const parts = data.map((d, i) => {
    const w = Math.max(1, Math.round((d.value / max) * BAR_W))
    const y = i * ROW_H + 4
    const track = outOf !== undefined ? `<rect class="track" x="${LABEL_W}" y="${y}" width="${BAR_W}" height="${ROW_H - 6}"/>` : ''
    return `${track}<text class="bar-label" x="${LABEL_W - 6}" y="${y + 14}" text-anchor="end">${escapeText(d.label.length > 34 ? `${d.label.slice(0, 33)}…` : d.label)}<title>${escapeText(d.label)}</title></text><rect class="bar${d.bad ? ' bad' : ''}" x="${LABEL_W}" y="${y}" width="${w}" height="${ROW_H - 6}"><title>${escapeText(`${d.label}: ${d.text ?? d.value}`)}</title></rect><text class="value" x="${LABEL_W + w + 6}" y="${y + 14}">${escapeText(d.text ?? String(d.value))}</text>`
  })
  const axis = [
    `<line class="axis" x1="${LABEL_W}" y1="${top}" x2="${LABEL_W + BAR_W}" y2="${top}"/>`,
    ...marks.map(
      (v) =>
        `<line class="tick" x1="${x(v).toFixed(1)}" y1="0" x2="${x(v).toFixed(1)}" y2="${top + 4}"/><text class="tick-label" x="${x(v).toFixed(1)}" y="${top + 16}" text-anchor="middle">${escapeText(short(v))}</text>`,
    ),
    `<text class="axis-label" x="${LABEL_W + BAR_W / 2}" y="${top + 32}" text-anchor="middle">${escapeText(unit)}</text>`,
  ]
  const height = top + AXIS_H
  const width = LABEL_W + BAR_W + 150
  return html`<h3>${title}</h3>
    <svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="${title}" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}">
      ${trusted(axis.join('') + parts.join(''))}
    </svg>`
}

/** A value per run, oldest to newest: a y axis with ticks and unit, an x axis numbering the runs. */
function line(title: string, unit: string, points: Array<{label: string; value: number}>): Html {
  if (points.length === 0)
    return html`<h3>${title}</h3>
      <p class="muted">No data.</p>`
  const [w, h, left, right, top, bottom] = [680, 200, 56, 16, 10, 44]
  const marks = ticks(Math.max(...points.map((p) => p.value)), true)
  const max = marks.at(-1)!
  const inner = w - left - right
  const x = (i: number): number => left + (points.length > 1 ? (i / (points.length - 1)) * inner : inner / 2)
  const y = (v: number): number => h - bottom - (v / max) * (h - top - bottom)
  const path = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${x(i).toFixed(1)},${y(p.value).toFixed(1)}`).join(' ')
  const dots = points
    .map(
      (p, i) =>
        `<circle class="bar" cx="${x(i).toFixed(1)}" cy="${y(p.value).toFixed(1)}" r="3"><title>${escapeText(`${p.label}: ${p.value} ${unit}`)}</title></circle>`,
    )
    .join('')
  // Run numbers along the bottom: every one when few, else about eight, the last always.
  const every = Math.max(1, Math.ceil(points.length / 8))
  const xs = points.map((_, i) => i).filter((i) => i % every === 0 || i === points.length - 1)
  const axes = [
    `<line class="axis" x1="${left}" y1="${h - bottom}" x2="${w - right}" y2="${h - bottom}"/><line class="axis" x1="${left}" y1="${top}" x2="${left}" y2="${h - bottom}"/>`,
    ...marks.map(
      (v) =>
        `<line class="tick" x1="${left}" y1="${y(v).toFixed(1)}" x2="${w - right}" y2="${y(v).toFixed(1)}"/><text class="tick-label" x="${left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${escapeText(short(v))}</text>`,
    ),
    ...xs.map((i) => `<text class="tick-label" x="${x(i).toFixed(1)}" y="${h - bottom + 15}" text-anchor="middle">${i + 1}</text>`),
    `<text class="axis-label" x="${left + inner / 2}" y="${h - 8}" text-anchor="middle">run, oldest (1) to newest (${points.length})</text>`,
    `<text class="axis-label" transform="translate(14 ${top + (h - top - bottom) / 2}) rotate(-90)" text-anchor="middle">${escapeText(unit)}</text>`,
  ]
  return html`<h3>${title}</h3>
    <svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" aria-label="${title}" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}">
      ${trusted(`${axes.join('')}<path class="series" d="${path}"/>${dots}`)}
    </svg>`
}

/** The pipeline filter: every pipeline of the store (`names`), the chosen one selected. */
function filterForm(names: readonly string[], chosen: string | null): Html {
  return html`<form class="filters" method="get" action="/stats">
    <label
      >pipeline<select name="pipeline">
        ${['', ...names].map((p) => html`<option value="${p}" ${p === (chosen ?? '') ? ' selected' : ''}>${p === '' ? 'any' : p}</option>`)}
      </select></label
    >
    <button>filter</button>
  </form>`
}

/** `names`: every pipeline of the store, for the filter (the report may hold one only). */
export function statsBody(report: StatsReport, names: readonly string[] = report.pipelines.map((p) => p.pipeline)): Html {
  const t = report.totals
  const pct = (v: number | null): string => (v === null ? '-' : `${Math.round(v * 100)}%`)
  const chosen = report.filter.pipeline
  return html`<div class="stats">
    <h1>Stats${chosen !== null ? html` of <code>${chosen}</code>` : ''}</h1>
    ${filterForm(names, chosen)}
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
      'tasks passed (%)',
      report.pipelines
        .filter((p) => p.task_pass_rate !== null)
        .map((p) => ({label: p.pipeline, value: (p.task_pass_rate ?? 0) * 100, text: `${pct(p.task_pass_rate)} of ${p.tasks}`})),
      {outOf: 100},
    )}
    ${bars(
      'Step failure rate by pipeline',
      'steps failed (%)',
      report.pipelines.map((p) => ({
        label: p.pipeline,
        value: p.steps === 0 ? 0 : (p.failed_steps / p.steps) * 100,
        bad: true,
        text: `${p.failed_steps} of ${p.steps} steps (${p.steps === 0 ? 0 : Math.round((p.failed_steps / p.steps) * 100)}%)`,
      })),
      {outOf: 100},
    )}
    ${bars(
      'Mean attempts per task by pipeline',
      'attempts per task',
      report.pipelines
        .filter((p) => p.mean_attempts !== null)
        .map((p) => ({label: p.pipeline, value: p.mean_attempts ?? 0, text: (p.mean_attempts ?? 0).toFixed(2)})),
    )}
    ${bars(
      'QA failures by category',
      'failed QA verdicts',
      Object.entries(t.failure_categories)
        .sort((a, b) => b[1] - a[1])
        .map(([label, value]) => ({label, value, bad: true})),
      {whole: true},
    )}
    ${bars(
      'Mean QA duration by pipeline',
      'milliseconds',
      report.pipelines
        .filter((p) => p.mean_qa_ms !== null)
        .map((p) => ({label: p.pipeline, value: Math.round(p.mean_qa_ms ?? 0), text: `${Math.round(p.mean_qa_ms ?? 0)} ms`})),
    )}
    ${budgets(report)}
    ${line(
      'Tokens per run',
      'tokens',
      report.runs.map((r) => ({label: `${r.run_id} (${r.pipeline})`, value: r.total_tokens})),
    )}
    ${line(
      'Steps per run',
      'steps',
      report.runs.map((r) => ({label: `${r.run_id} (${r.pipeline})`, value: r.steps})),
    )}
  </div>`
}

/**
 * Spend against budget, as pipe stats says it: per pipeline how many runs had one and passed one,
 * and per run the pipeline's budget and each step's own, with the grants on top of the limits.
 */
function budgets(report: StatsReport): Html {
  const runs = report.runs.filter((r) => r.budget)
  if (runs.length === 0) return html``
  const pipelines = report.pipelines.filter((p) => p.budget)
  return html`<h3>Spend against budget</h3>
    <table class="budgets">
      <thead><tr><th>pipeline</th><th>runs with a budget</th><th>over</th><th>spent</th></tr></thead>
      <tbody>
        ${pipelines.map(
          (p) =>
            html`<tr><td><code>${p.pipeline}</code></td><td>${p.budget!.runs}</td><td>${p.budget!.over}</td><td>${tokensText(p.budget!.spent_tokens)}, ${usdText(p.budget!.spent_usd)}</td></tr>`,
        )}
      </tbody>
    </table>
    <table class="budgets">
      <thead><tr><th>run</th><th>budget</th><th>spent / limit</th></tr></thead>
      <tbody>
        ${runs.flatMap((r) => [
          ...(r.budget!.pipeline
            ? [html`<tr><td><a href="/runs/${r.run_id}">${r.run_id}</a></td><td>pipeline ${r.pipeline}</td><td>${budgetText(r.budget!.pipeline)}</td></tr>`]
            : []),
          ...Object.entries(r.budget!.steps).map(
            ([step, b]) => html`<tr><td><a href="/runs/${r.run_id}">${r.run_id}</a></td><td>step ${step}</td><td>${budgetText(b)}</td></tr>`,
          ),
        ])}
      </tbody>
    </table>`
}
