/**
 * A run as it moves, for pages that stay open: the least a page polls (GET /api/runs/:id/state)
 * and the panel that names the step running now. Kept apart from the run page's layout, which
 * places the panel and the script but knows nothing of how they follow the run.
 */
import {effectiveStatus, type RunSummary} from '../store/queries.js'
import type {RunStore} from '../store/types.js'
import type {RunRecord, RunStatus} from '../types/run.js'
import {html, type Html} from './html.js'

export interface LiveState {
  run_id: string
  status: RunStatus
  updated_at: string
  /** The step the run is in (recorded before it acts), or null when it is in none. */
  current_step: NonNullable<RunRecord['current_step']> | null
  /**
   * Moves whenever the run's records do: its timeline's length plus its last snapshot's seq (each
   * grows only), so a page compares one number instead of guessing from times.
   */
  version: number
}

/** Cheap: the run record, and for a running run whether its driver lives; never its snapshots or evidence. */
export async function liveState(store: RunStore, runId: string): Promise<LiveState> {
  const record = await store.readRun(runId)
  const status = await effectiveStatus(store, record)
  return {
    run_id: record.run_id,
    status,
    updated_at: record.updated_at,
    current_step: record.status === 'running' ? (record.current_step ?? null) : null,
    version: (record.head?.events ?? 0) + (record.head?.seq ?? 0),
  }
}

/**
 * What a served run page (not an exported one) holds for RUN_LIVE_SCRIPT: the state it was read
 * at, the panel saying the run moved on, the one saying the server stopped, and the running step.
 */
export function livePanels(record: RunRecord, status: RunStatus): Html {
  return html`<div
      id="run-live"
      hidden
      data-run="${record.run_id}"
      data-status="${status}"
      data-updated="${record.updated_at}"
      data-version="${(record.head?.events ?? 0) + (record.head?.seq ?? 0)}"
    ></div>
    <div class="panel wait" id="moved" hidden>
      <strong>This run has moved on since the page was read:</strong> now <span class="now"></span>. <a href="">Reload</a> to see it.
    </div>
    <div class="panel bad" id="said" hidden></div>
    ${nowPanel(record, status)}`
}

/** How the page says where a step runs: the worker's name when it has one, then its host and pid. */
function where(worker: NonNullable<RunRecord['current_step']>['worker']): string {
  return `${worker.name ? `worker ${worker.name} ` : ''}(host ${worker.host}, pid ${worker.pid})`
}

/** What the panel says of a run on a queue (pipe run --detach) that no worker has taken yet. */
const QUEUED = 'Queued: it waits for a worker to take it.'

/**
 * The step a run is in, since when and where (or that it waits on its queue); the live script keeps it current. A run whose
 * process is gone was in that step when it stopped, and says so rather than that it runs.
 */
export function nowPanel(record: RunRecord, status: RunStatus): Html {
  const at = record.status === 'running' ? record.current_step : undefined
  const text = at
    ? `${status === 'running' ? 'Running' : 'Was running when its process stopped:'} step ${at.step} (#${at.seq}) since ${at.since} on ${where(at.worker)}`
    : status === 'pending'
      ? QUEUED
      : ''
  return text !== ''
    ? html`<div class="panel wait" id="now"><strong class="step-now">${text}</strong></div>`
    : html`<div class="panel wait" id="now" hidden><strong class="step-now"></strong></div>`
}

/**
 * The run page's follower: polls the state, updates the panel of the running step, the graph's
 * running mark and the timeline's waterfall, shows the
 * "moved on" panel when the run's records moved (a reload would close what the reader opened, so
 * the reload is theirs), and says so when the server stops answering.
 */
export const RUN_LIVE_SCRIPT = `
(() => {
  const here = document.getElementById('run-live');
  if (!here) return;
  const moved = document.getElementById('moved');
  const now = document.getElementById('now');
  const said = document.getElementById('said');
  const version = here.getAttribute('data-version');
  let last = new Date();
  let drawn = version;
  const where = (w) => (w.name ? 'worker ' + w.name + ' ' : '') + '(host ' + w.host + ', pid ' + w.pid + ')';
  function stopped() {
    said.textContent = 'pipe view stopped answering: this page is as of ' + last.toLocaleTimeString() + '. Start pipe view again and reload.';
    said.hidden = false;
  }
  async function poll() {
    let state;
    try {
      const response = await fetch('/api/runs/' + encodeURIComponent(here.getAttribute('data-run')) + '/state', {headers: {accept: 'application/json'}});
      if (!response.ok) { stopped(); return; }
      state = await response.json();
    } catch (e) { stopped(); return; }
    last = new Date();
    said.hidden = true;
    if (now) {
      const at = state.current_step;
      now.hidden = !at && state.status !== 'pending';
      if (at) now.querySelector('.step-now').textContent = (state.status === 'running' ? 'Running' : 'Was running when its process stopped:') + ' step ' + at.step + ' (#' + at.seq + ') since ' + at.since + ' on ' + where(at.worker);
      else if (state.status === 'pending') now.querySelector('.step-now').textContent = ${JSON.stringify(QUEUED)};
    }
    // The status in the heading is the run's now; the rest of the page is as read (the panel below says so).
    const badge = document.querySelector('h1 .badge');
    if (badge && badge.getAttribute('data-status') !== state.status) {
      badge.setAttribute('data-status', state.status);
      badge.className = 'badge s-' + state.status;
      badge.textContent = state.status.replace('_', ' ');
    }
    // The graph's running mark follows the step the run is in (a waiting node keeps its own words).
    const running = state.status === 'running' && state.current_step ? state.current_step.step : null;
    for (const node of document.querySelectorAll('svg.graph g.step-node')) {
      const box = node.querySelector('rect.node');
      const line = node.querySelector('.node-kind');
      const on = node.getAttribute('data-step') === running;
      if (!box || box.classList.contains('running') === on) continue;
      box.classList.toggle('running', on);
      if (line && !box.classList.contains('waiting')) line.textContent = on ? 'running now' : line.getAttribute('data-kind-line');
    }
    if (String(state.version) === version && state.status === here.getAttribute('data-status')) return;
    // The timeline only grows and holds nothing a reader opens: it is redrawn from the page as served now.
    if (String(state.version) !== drawn) {
      drawn = String(state.version);
      try {
        // Only the waterfall's own markup is parsed (the rest of the page holds styles of another response's nonce).
        const text = await (await fetch(location.href, {headers: {accept: 'text/html'}})).text();
        const from = text.indexOf('<div id="waterfall">');
        const to = text.indexOf('<!--/waterfall-->', from);
        const shown = document.getElementById('waterfall');
        if (from >= 0 && to > from && shown) {
          const template = document.createElement('template');
          template.innerHTML = text.slice(from, to);
          const fresh = template.content.getElementById('waterfall');
          if (fresh) shown.replaceWith(document.importNode(fresh, true));
        }
      } catch (e) { drawn = null; }
    }
    moved.querySelector('.now').textContent = state.status.replace('_', ' ') + (state.current_step ? ' at step ' + state.current_step.step : '') + ' (updated ' + state.updated_at + ')';
    moved.hidden = false;
  }
  setInterval(poll, 2000);
})();
`

/** In the runs list, beside a running run's status: the step it is in (the list's script keeps it current). */
export function stepNow(r: RunSummary): Html {
  const at = r.status === 'running' ? r.current_step : undefined
  return html`<span class="step-now muted small">${at ? ` at ${at.step}` : ''}</span>`
}

/** The runs list script's part for stepNow: run inside its loop over the listed runs, `r` being one of /api/runs. */
export const STEP_NOW_UPDATE = `for (const step of document.querySelectorAll('tr[data-run="' + CSS.escape(r.run_id) + '"] .step-now')) {
          const text = r.status === 'running' && r.current_step ? ' at ' + r.current_step.step : '';
          if (step.textContent !== text) step.textContent = text;
        }`
