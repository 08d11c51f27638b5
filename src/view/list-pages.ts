/** The runs list: filters, children nested, live status, and each run's age, duration, worker and queue. */
import type {RunSummary} from '../store/queries.js'
import {html, safeHref, type Html} from './html.js'
import {STEP_NOW_UPDATE, stepNow} from './live.js'
import {childTable, statusBadge} from './run-page.js'
import {duration} from './parts.js'
import type {RunStore} from '../store/types.js'

export const RUN_STATUSES = ['pending', 'running', 'awaiting_input', 'blocked', 'interrupted', 'succeeded', 'failed', 'cancelled'] as const

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

/** A run as the list shows it: its summary, and on a shared store the worker holding it and its queue. */
export type ListedRun = RunSummary & {
  /** The queue it waits in, or the one it was detached on (answers and reviews hand it back there). */
  queue?: string
  /** The worker named is the last holder, whose lease ran out: it holds the run no more. */
  lease_expired?: boolean
  children?: ListedRun[]
}

/**
 * Where each run of a shared store stands (pipe view asks the store, as pipe runs show does): the
 * worker under a live lease, or the last one whose lease ran out, and its queue. A folder store
 * has neither, and its runs are left as they are.
 */
export async function placeRuns(store: RunStore, runs: ListedRun[]): Promise<void> {
  if (!store.holdings) return
  const flat = (list: ListedRun[]): ListedRun[] => list.flatMap((r) => [r, ...flat(r.children ?? [])])
  const listed = flat(runs)
  const held = await store.holdings(listed.map((r) => r.run_id))
  for (const r of listed) {
    const h = held.get(r.run_id)
    if (!h) continue
    const who = h.worker ?? (ENDED.has(r.status) ? null : (h.expired?.worker ?? null))
    if (who) r.worker = who.name ?? `${who.host}:${who.pid}`
    if (!h.worker && who) r.lease_expired = true
    const queue = h.queue ?? h.detached_queue
    if (queue) r.queue = queue
  }
}

const ENDED = new Set(['succeeded', 'failed', 'cancelled'])

function workerText(r: ListedRun): string {
  return r.worker === undefined ? '' : `${r.worker}${r.lease_expired ? ' (lease ran out)' : ''}`
}

/**
 * How long a run took (created to ended), from its records; a run not ended has its time so far
 * counted by the page's script against the server's clock, so the page as served holds no clock.
 */
function tookCell(r: RunSummary): Html {
  if (r.ended_at !== undefined) return html`<td class="duration">${duration(Date.parse(r.ended_at) - Date.parse(r.created_at))}</td>`
  return html`<td class="duration" data-since="${r.created_at}"></td>`
}

export function runsBody(
  runs: ListedRun[],
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
          <td class="when"><time class="ago" datetime="${r.created_at}" title="${r.created_at}">${r.created_at}</time></td>
          ${tookCell(r)}
          <td class="worker">${workerText(r)}</td>
          <td class="queue">${r.queue ?? ''}</td>
          <td><code>${r.spec_version ?? '-'}</code></td>
          <td>${r.reason ?? ''}</td>
        </tr>
        ${
          (r.children ?? []).length > 0
            ? html`<tr class="children">
                <td colspan="10">${childTable(r.children ?? [], {}, 1)}</td>
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
              <th>created</th>
              <th>duration</th>
              <th>worker</th>
              <th>queue</th>
              <th>spec</th>
              <th>reason</th>
            </tr>
            ${rows}
          </table>`
    }`
}

/**
 * The live list: every few seconds, the statuses, workers and queues of the runs on the page from
 * /api/runs (the same filter); a run that appeared or left reloads the page. Each run's age ("3 min
 * ago", the time itself on hover) and a running run's time so far are counted against the server's
 * clock (the Date of its answers), not this browser's. Text is set with textContent only.
 */
export const LIVE_SCRIPT = `
(() => {
  const shown = () => [...document.querySelectorAll('tr[data-run]')].map((r) => r.getAttribute('data-run'));
  const live = document.getElementById('live');
  const said = live ? live.textContent : '';
  // A page whose server stopped says so: its statuses are as of the last answer, not live.
  let last = new Date();
  let skew = null;
  const stopped = () => {
    if (!live) return;
    live.textContent = 'pipe view stopped answering: the statuses below are as of ' + last.toLocaleTimeString() + '. Start pipe view again and reload.';
    live.className = 'stopped';
  };
  const ago = (ms) => {
    const s = Math.max(0, Math.floor(ms / 1000));
    return s < 60 ? s + ' s ago' : s < 3600 ? Math.floor(s / 60) + ' min ago' : s < 86400 ? Math.floor(s / 3600) + ' h ago' : Math.floor(s / 86400) + ' d ago';
  };
  const took = (ms) => (ms < 1000 ? ms + ' ms' : ms < 60000 ? (ms / 1000).toFixed(1) + ' s' : Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s');
  function times() {
    if (skew === null) return;
    const now = Date.now() + skew;
    for (const t of document.querySelectorAll('time.ago')) {
      const text = ago(now - Date.parse(t.getAttribute('datetime')));
      if (t.textContent !== text) t.textContent = text;
    }
    for (const d of document.querySelectorAll('td.duration[data-since]')) {
      const text = took(Math.max(0, Math.floor((now - Date.parse(d.getAttribute('data-since'))) / 1000) * 1000)) + ' so far';
      if (d.textContent !== text) d.textContent = text;
    }
  }
  async function poll() {
    try {
      const response = await fetch('/api/runs' + location.search, {headers: {accept: 'application/json'}});
      if (!response.ok) { stopped(); return; }
      last = new Date();
      const date = Date.parse(response.headers.get('date') || '');
      if (!Number.isNaN(date)) skew = date - Date.now();
      if (live && live.className === 'stopped') { live.textContent = said; live.className = 'muted small'; }
      const body = await response.json();
      const flat = [];
      const walk = (list) => { for (const r of list) { flat.push(r); walk(r.children || []); } };
      walk(body.runs);
      const before = shown();
      if (flat.length !== before.length || flat.some((r) => !before.includes(r.run_id))) { location.reload(); return; }
      for (const r of flat) {
        const row = document.querySelector('tr[data-run="' + CSS.escape(r.run_id) + '"]');
        for (const badge of document.querySelectorAll('tr[data-run="' + CSS.escape(r.run_id) + '"] .badge')) {
          if (badge.getAttribute('data-status') !== r.status) {
            badge.setAttribute('data-status', r.status);
            badge.className = 'badge s-' + r.status;
            badge.textContent = r.status.replace('_', ' ');
          }
        }
        ${STEP_NOW_UPDATE}
        if (!row) continue;
        const worker = row.querySelector('td.worker');
        const workerText = r.worker === undefined ? '' : r.worker + (r.lease_expired ? ' (lease ran out)' : '');
        if (worker && worker.textContent !== workerText) worker.textContent = workerText;
        const queue = row.querySelector('td.queue');
        if (queue && queue.textContent !== (r.queue || '')) queue.textContent = r.queue || '';
        const lasted = row.querySelector('td.duration[data-since]');
        if (lasted && r.ended_at) {
          lasted.removeAttribute('data-since');
          lasted.textContent = took(Date.parse(r.ended_at) - Date.parse(r.created_at));
        }
      }
      times();
    } catch (e) { stopped(); }
  }
  poll();
  setInterval(poll, 2000);
})();
`
