/**
 * The run page: everything an auditor asks of one run, from its sealed records — what it was
 * started with, whether its records verify, the path it took, each step with its reasons, outputs,
 * errors and evidence, the prompts as sent and the replies, an agent's tool calls, the timeline,
 * the spec versions with their differences, deliveries, and what it waits for.
 */
import type {RunSummary} from '../store/queries.js'
import type {Snapshot} from '../types/snapshot.js'
import {modelCalls, toolCalls} from './conversation.js'
import {graphLegend, graphSvg, type FanChild, type GraphMarks} from './graph-svg.js'
import {diffsIn} from './diff-view.js'
import {html, jsonBlock, type Html} from './html.js'
import {duration, runLink, statusBadge, type RunPageOptions} from './parts.js'
import type {RunView, StepView} from './run-data.js'
import {evidence, ledger, specs, timeline} from './run-records.js'
import {livePanels, RUN_LIVE_SCRIPT} from './live.js'
import {waterfall} from './waterfall.js'

export {statusBadge, type RunPageOptions} from './parts.js'
function header(view: RunView, options: RunPageOptions): Html {
  const r = view.record
  const inputs = r.inputs && Object.keys(r.inputs).length > 0 ? jsonBlock(r.inputs) : html`<span class="muted">none</span>`
  return html`<h1>Run <code>${r.run_id}</code> ${statusBadge(view.status)}</h1>
    <dl class="facts">
      <dt>pipeline</dt>
      <dd><code>${r.pipeline.name}</code> <span class="muted small">${r.pipeline.hash}</span></dd>
      <dt>feature</dt>
      <dd><code>${r.feature_id}</code></dd>
      <dt>spec</dt>
      <dd><code>${r.spec_version ?? '-'}</code></dd>
      <dt>run by</dt>
      <dd>
        ${r.owner.user}
        <span class="muted small">on ${r.owner.host}</span
        >${r.parent ? html` — child of ${runLink(r.parent.run_id, options)} step <code>${r.parent.step}</code>${r.parent.index !== undefined ? ` item ${r.parent.index}${r.parent.key ? ` (${r.parent.key})` : ''}` : ''}` : ''}
      </dd>
      <dt>created</dt>
      <dd>${r.created_at}</dd>
      <dt>updated</dt>
      <dd>${r.updated_at}${r.ended_at ? ` — ended ${r.ended_at}` : ''}</dd>
      <dt>policy</dt>
      <dd>
        <code>${r.policy_version}</code
        >${r.policy_path ? html` <span class="muted small">${r.policy_path}</span>` : html` <span class="muted small">(built-in)</span>`}
      </dd>
      <dt>provider</dt>
      <dd>
        ${r.provider.kind}${r.provider.model ? html` <code>${r.provider.model}</code>` : ''}${r.provider.cassette ? html` <span class="muted small">(${r.provider.cassette.mode} a cassette)</span>` : ''}
      </dd>
      <dt>model usage</dt>
      <dd>
        ${view.usage.calls > 0 ? `${view.usage.prompt_tokens} prompt + ${view.usage.completion_tokens} completion = ${view.usage.total_tokens} tokens in ${view.usage.calls} call(s)${view.usage.cost !== undefined ? `, cost ${view.usage.cost} ${view.usage.currency ?? ''}` : ''}` : 'none'}
      </dd>
      ${
        r.status_reason
          ? html`<dt>reason</dt>
              <dd>${r.status_reason}</dd>`
          : ''
      }
      <dt>inputs</dt>
      <dd>${inputs}</dd>
    </dl>`
}

function auditPanel(view: RunView): Html {
  const a = view.audit
  const verdict = !a.ok
    ? `${a.problems.length} problem(s)`
    : a.unverifiable > 0
      ? `${a.unverifiable} keyed seal(s) not checked (PIPE_AUDIT_KEY is not set)`
      : 'all intact'
  const cls = !a.ok ? 'bad' : a.unverifiable > 0 ? 'wait' : 'good'
  return html`<div class="panel ${cls}" id="audit">
    <strong>pipe audit verify ${view.record.run_id}:</strong> <span data-audit="${a.ok ? 'ok' : 'problems'}">${verdict}</span>
    <span class="muted small"
      >— checked ${a.runs} run(s), ${a.events} timeline line(s), ${a.snapshots} snapshot(s), ${a.specs} spec version(s), ${a.evidence} evidence record(s),
      ${a.ledger} ledger entr${a.ledger === 1 ? 'y' : 'ies'}${a.keyed ? ' with the audit key' : ''}</span
    >
    ${
      a.problems.length > 0
        ? html`<table>
            <tr>
              <th>record</th>
              <th>file</th>
              <th>field</th>
              <th>problem</th>
            </tr>
            ${a.problems.map(
              (p) =>
                html`<tr>
                  <td>${p.record}</td>
                  <td class="mono small">${p.file}</td>
                  <td>${p.field}</td>
                  <td>${p.message}</td>
                </tr>`,
            )}
          </table>`
        : ''
    }
  </div>`
}

function waitsPanel(view: RunView): Html {
  if (view.cannot_continue) {
    const c = view.cannot_continue
    return html`<div class="panel bad" id="waits"><strong>It cannot be resumed:</strong> ${c.message}.${c.hint ? html`<p>${c.hint}</p>` : ''}</div>`
  }
  if (!view.next_command) return html``
  const pending = view.record.pending
  const questions = pending?.questions ?? []
  const answers = questions.length > 0 ? `answers:\n${questions.map((q) => `  ${q.id}: "..."   # ${q.field ?? q.question.slice(0, 60)}`).join('\n')}\n` : ''
  return html`<div class="panel wait" id="waits">
    <strong>Waits for:</strong>
    ${view.waits_for ?? ''}${pending ? html` <span class="muted">(step <code>${pending.step}</code>, since ${pending.since}: ${pending.reason})</span>` : ''}
    ${
      (pending?.votes ?? []).length > 0
        ? html`<p>Voted under the policy's <code>approvals.${pending?.rule ?? ''}</code>: ${(pending?.votes ?? []).map((v) => `${v.by.id} ${v.decision} at ${v.at}`).join(', ')}</p>`
        : ''
    }
    ${
      questions.length > 0
        ? html`<ul>
              ${questions.map((q) => html`<li><code>${q.id}</code>${q.field ? html` <span class="muted">[${q.field}]</span>` : ''} ${q.question}</li>`)}
            </ul>
            <p>Write the answers in a file, <code>answers.yaml</code>, keyed by question id (or by field):</p>
            <pre class="answers">${answers}</pre>`
        : ''
    }
    ${
      pending?.action
        ? html`<p>${pending.action.rule ? html`Step <code>${pending.step}</code> asks to run (${pending.action.rule}, ${pending.action.level})` : html`The agent asks to run (${pending.action.level}, call <code>${pending.action.call_id}</code>)`}: <code>${pending.action.tool}</code></p>
            ${jsonBlock(pending.action.arguments)}`
        : ''
    }
    <p>Continue with:</p>
    <pre class="command">${view.next_command}</pre>
    ${
      (view.alternatives ?? []).length > 0
        ? html`<p class="muted small">or instead:</p>
            ${(view.alternatives ?? []).map((a) => html`<pre class="command alt">${a}</pre>`)}`
        : ''
    }
  </div>`
}

function stepFailed(s: Snapshot): boolean {
  return s.errors.length > 0 || /fail|error|denied|blocked/.test(s.decisions.at(-1)?.decision ?? '')
}

/** Where a long run's reader starts: its first failed step and its last step, a click away. */
function stepJumps(view: RunView): Html {
  if (view.steps.length < 2) return html``
  const first = view.steps.find((s) => stepFailed(s.snapshot))?.snapshot
  const last = view.steps.at(-1)!.snapshot
  const to = (label: string, s: Snapshot): Html => html`<a class="jump" href="#${stepAnchor(s)}">${label}: #${s.step.seq} ${s.step.name}</a>`
  return html`<p class="small" id="jumps">Go to ${first ? html`${to('the first failed step', first)} · ` : ''}${to('the last step', last)}</p>`
}

function stepSection(step: StepView, children: RunSummary[], options: RunPageOptions): Html {
  const s = step.snapshot
  const last = s.decisions.at(-1)
  const outcome = last?.decision ?? ''
  const failed = stepFailed(s)
  const mine = children.filter((c) => c.parent?.step === s.step.name && c.parent?.seq === s.step.seq)
  return html`<details class="step" id="${stepAnchor(s)}" data-step="${s.step.name}">
    <summary>
      <strong>#${s.step.seq} ${s.step.name}</strong> <span class="muted">${s.step.kind}</span> <span class="${failed ? 'o-fail' : 'o-ok'}">${outcome}</span>
      <span class="muted small"
        >${duration(s.step.duration_ms)}${(s.step.attempts ?? 1) > 1 ? ` — ${s.step.attempts} attempts` : ''}${s.errors.length > 0 ? ` — ${s.errors.length} error(s)` : ''}</span
      >
      <span class="small">${last?.reason ?? ''}</span>
    </summary>
    <div class="body">
      <dl class="facts">
        <dt>started</dt>
        <dd>${s.step.started_at}</dd>
        <dt>ended</dt>
        <dd>${s.step.ended_at}</dd>
        <dt>spec in → out</dt>
        <dd><code>${s.spec_version_in ?? '-'}</code> → <code>${s.spec_version_out ?? '-'}</code></dd>
        <dt>seal</dt>
        <dd class="mono small">${s.meta.record_hash ?? ''}</dd>
      </dl>
      <h3>Decisions</h3>
      <table>
        <tr>
          <th>decision</th>
          <th>next</th>
          <th>by</th>
          <th>reason</th>
        </tr>
        ${s.decisions.map(
          (d) =>
            html`<tr>
              <td>${d.decision}</td>
              <td><code>${d.next_step ?? d.run_status ?? '-'}</code></td>
              <td>${d.by ?? ''}${d.at ? html` <span class="muted small">${d.at}</span>` : ''}</td>
              <td>${d.reason}${d.note ? html`<br /><span class="muted">${d.note}</span>` : ''}</td>
            </tr>`,
        )}
      </table>
      ${
        s.errors.length > 0
          ? html`<h3>Errors</h3>
              ${s.errors.map((e) => html`<div class="panel bad"><strong>${e.code}</strong> ${e.message}${e.hint ? html`<br /><span class="muted">Try this: ${e.hint}</span>` : ''}${e.trace_id ? html`<br /><span class="small muted">trace ${e.trace_id}</span>` : ''}</div>`)}`
          : ''
      }
      ${contextShown(s.inputs.context_ref)}
      <h3>Inputs (resolved)</h3>
      ${jsonBlock(s.inputs)}
      ${outputDiffs(s.outputs, options)}
      <h3>Outputs</h3>
      ${jsonBlock(s.outputs)}
      ${
        s.evidence_links.length > 0
          ? html`<h3>Evidence</h3>
              <ul>
                ${s.evidence_links.map(
                  (l) =>
                    html`<li>
                      ${l.type}: <a href="#evidence-${l.evidence_id}"><code>${l.evidence_id}</code></a>
                    </li>`,
                )}
              </ul>`
          : ''
      }
      ${modelCalls(step.calls)} ${toolCalls(s)}
      ${
        mine.length > 0
          ? html`<h3>Child runs</h3>
              ${childTable(mine, options)}`
          : ''
      }
    </div>
  </details>`
}

export function childTable(children: RunSummary[], options: RunPageOptions, depth = 0): Html {
  const rows = (list: RunSummary[], d: number): Html[] =>
    list.flatMap((c) => [
      html`<tr class="${d === 1 ? 'child' : d > 1 ? 'grandchild' : ''}" data-run="${c.run_id}">
        <td>${runLink(c.run_id, options)}</td>
        <td>${statusBadge(c.status)}</td>
        <td><code>${c.pipeline}</code></td>
        <td>${c.parent ? `${c.parent.step}${c.parent.index !== undefined ? ` #${c.parent.index}${c.parent.key ? ` ${c.parent.key}` : ''}` : ''}` : ''}</td>
        <td>${c.reason ?? ''}</td>
      </tr>`,
      ...rows(c.children ?? [], d + 1),
    ])
  return html`<table>
    <tr>
      <th>run</th>
      <th>status</th>
      <th>pipeline</th>
      <th>step / item</th>
      <th>reason</th>
    </tr>
    ${rows(children, depth)}
  </table>`
}

function stepAnchor(snapshot: Snapshot): string {
  return `step-${snapshot.step.name}-${snapshot.step.seq}`
}

/** What the graph marks: where the run waits or runs now, and the child runs each step started (its last time), in item order. */
function graphMarks(view: RunView, options: RunPageOptions): GraphMarks {
  const last = new Map<string, number>()
  for (const c of view.children) if (c.parent) last.set(c.parent.step, Math.max(last.get(c.parent.step) ?? 0, c.parent.seq))
  const fan = new Map<string, FanChild[]>()
  for (const c of view.children) {
    if (!c.parent || c.parent.seq !== last.get(c.parent.step)) continue
    const label = c.parent.index !== undefined ? `#${c.parent.index}${c.parent.key ? ` ${c.parent.key}` : ''}` : c.pipeline
    fan.set(c.parent.step, [...(fan.get(c.parent.step) ?? []), {run_id: c.run_id, status: c.status, label}])
  }
  const running = view.status === 'running' ? view.record.current_step?.step : undefined
  const waitsAt = view.status === 'awaiting_input' || view.status === 'blocked' ? view.record.pending?.step : undefined
  return {
    anchors: stepAnchors(view),
    fan,
    ...(running !== undefined ? {running} : {}),
    ...(waitsAt !== undefined ? {waitsAt} : {}),
    ...(options.standalone ? {standalone: true} : {}),
  }
}

/** Each step that ran, to its first section on the page (where a click on its node in the graph goes). */
function stepAnchors(view: RunView): Map<string, string> {
  const out = new Map<string, string>()
  for (const {snapshot} of view.steps) if (!out.has(snapshot.step.name)) out.set(snapshot.step.name, stepAnchor(snapshot))
  return out
}

/**
 * The run page's own script: a link to a step or an evidence record (a node of the graph, an
 * evidence id) opens its collapsed section, which a browser would scroll to but leave shut.
 */
export const RUN_SCRIPT = `
(() => {
  function reveal() {
    let id = location.hash.slice(1);
    try { id = decodeURIComponent(id); } catch (e) { return; }
    const target = id && document.getElementById(id);
    if (!target) return;
    for (let at = target; at; at = at.parentElement) if (at.tagName === 'DETAILS') at.open = true;
    target.scrollIntoView();
  }
  addEventListener('hashchange', reveal);
  reveal();
})();
${RUN_LIVE_SCRIPT}`

export function runBody(view: RunView, options: RunPageOptions = {}): Html {
  const live = options.standalone ? html`` : livePanels(view.record, view.status)
  return html`${live}${header(view, options)} ${auditPanel(view)} ${waitsPanel(view)} ${options.decide ?? ''}
    <h2>Graph</h2>
    ${view.graph.problem ? html`<p class="muted">${view.graph.problem}.</p>` : ''}
    <div class="graph-wrap">
      ${options.dagre ? graphSvg(options.dagre, view.graph.pipeline, view.graph.taken, graphMarks(view, options)) : ''}
    </div>
    ${options.dagre ? graphLegend() : ''}
    <h2>Steps (${view.steps.length})</h2>
    ${stepJumps(view)}${view.steps.map((s) => stepSection(s, view.children, options))}
    ${
      view.children.length > 0
        ? html`<h2 id="child-runs">Child runs (${view.children.length})</h2>
            ${childTable(view.children, options)}`
        : ''
    }
    <h2 id="timeline">Timeline</h2>
    <div id="waterfall">${waterfall(view)}</div><!--/waterfall-->
    <details class="step" id="events">
      <summary>Every timeline line (${view.events.length})</summary>
      <div class="body">${timeline(view)}</div>
    </details>
    <h2>Spec versions (${view.specs.length})</h2>
    ${specs(view, options)}
    <h2>Evidence (${view.evidence.length})</h2>
    ${evidence(view)}
    <h2>Deliveries (${view.ledger.length})</h2>
    ${ledger(view)}`
}

/** The diffs a step made (an edit's files, an agent's patch), drawn as diffs above its outputs. */
function outputDiffs(outputs: unknown, options: RunPageOptions): Html {
  const found = diffsIn(outputs)
  if (found.length === 0 || !options.diff) return html``
  return html`<h3>Diff</h3>
    ${found.map((d) => html`<div class="diff" data-output="${d.path}"><p class="muted small">outputs.${d.path}</p>${options.diff!(d.patch)}</div>`)}`
}

/** What the model was shown of the repository (a context step's evidence, by id and sha256), and the run's project context ref. */
function contextShown(ref: Snapshot['inputs']['context_ref']): Html | '' {
  if (!ref) return ''
  const bundle = ref.hash
    ? html`repository context
        ${ref.evidence_id ? html`<a href="#evidence-${ref.evidence_id}"><code>${ref.evidence_id}</code></a>` : ''} <code>${ref.hash}</code>
        (${String(ref.bytes ?? '?')} bytes, step ${ref.step ?? '?'}${ref.seq !== undefined ? ` #${ref.seq}` : ''})`
    : ''
  const project = ref.project ? html`project <code>${ref.project.project_id}@${ref.project.context_version}</code>` : ''
  return html`<h3>Context</h3>
    <p>${bundle}${bundle && project ? '; ' : ''}${project}</p>`
}
