/**
 * The forms of a run page that give a waiting run what it waits for (pipe view without
 * --read-only): a review decision, answers, a yes or no to a step or tool call. Each form carries
 * the hash of the request it was drawn for and a CSRF token bound to it (actions.ts checks both);
 * everything the run asked is text, escaped like the rest of the page.
 */
import {html, type Html} from './html.js'
import type {RunView} from './run-data.js'

/** What a form posts besides its fields: the hash of the request shown, and its CSRF token. */
export interface FormBinding {
  shown: string
  csrf: string
}

function hidden(binding: FormBinding, kind: string): Html {
  const input = (name: string, value: string): Html => html`<input type="hidden" name="${name}" value="${value}" />`
  return html`${input('kind', kind)}${input('shown', binding.shown)}${input('csrf', binding.csrf)}`
}

function noteField(label: string): Html {
  return html`<label class="note">${label} <textarea name="note" rows="2" cols="60" maxlength="4000"></textarea></label>`
}

/** The form for what the run waits for now; `binding` null: this browser has not the server's token. */
export function decisionPanel(view: RunView, binding: FormBinding | null, who: string): Html {
  const pending = view.status === 'awaiting_input' ? view.record.pending : undefined
  if (!pending) return html``
  if (!binding)
    return html`<div class="panel" id="decide">
      <p class="muted">
        To decide from this page, open it through the URL <code>pipe view</code> printed (it carries the server's token), or use the command above.
      </p>
    </div>`
  const action = `/runs/${encodeURIComponent(view.record.run_id)}/decide`
  const footer = html`<p class="muted small">Recorded as given by <code>${who}</code> via <code>view</code>, exactly as the command above records it.</p>`
  if (pending.kind === 'review')
    return html`<form class="panel decide" id="decide" method="post" action="${action}">
      <strong>Decide here:</strong> ${hidden(binding, 'review')} ${noteField('Note (why):')}
      <p>
        <button type="submit" name="decision" value="go">Go</button>
        <button type="submit" name="decision" value="hold">Hold</button>
        <button type="submit" name="decision" value="drop">Drop</button>
      </p>
      ${footer}
    </form>`
  if (pending.kind === 'confirm')
    return html`<form class="panel decide" id="decide" method="post" action="${action}">
      <strong>Confirm or refuse here${pending.action ? html` <code>${pending.action.tool}</code> (<code>${pending.action.call_id}</code>)` : ''}:</strong>
      ${hidden(binding, 'confirm')} ${noteField('Note (given to the model with a refusal):')}
      <label
        >The answer covers
        <select name="for">
          <option value="call" selected>this call</option>
          <option value="step">every confirmation of step ${pending.step} in this run</option>
          <option value="run">every confirmation in this run</option>
        </select></label
      >
      <p>
        <button type="submit" name="decision" value="yes">Yes, run it</button>
        <button type="submit" name="decision" value="no">No</button>
      </p>
      ${footer}
    </form>`
  const questions = pending.questions ?? []
  return html`<form class="panel decide" id="decide" method="post" action="${action}">
    <strong>Answer here:</strong> ${hidden(binding, 'answers')}
    ${questions.map(
      (q) =>
        html`<label class="answer"
          ><code>${q.id}</code> ${q.question}<br /><textarea name="${`answer:${q.id}`}" data-question="${q.id}" rows="2" cols="80"></textarea
        ></label>`,
    )}
    <p><button type="submit">Answer</button></p>
    ${footer}
  </form>`
}
