/**
 * What a step said to a model and what it did with tools: the prompts as sent, the replies, and
 * an agent's tool calls, readable (JSON arguments and results as YAML, the exact JSON one click away).
 */
import YAML from 'yaml'
import type {Snapshot} from '../types/snapshot.js'
import {html, jsonBlock, type Html} from './html.js'
import {duration} from './parts.js'
import type {ModelCallView} from './run-data.js'

/** JSON text parsed, when it is an object or a list (a tool's arguments, a result, a final answer). */
function jsonIn(text: string): object | undefined {
  if (!/^\s*[[{]/.test(text)) return undefined
  try {
    const parsed: unknown = JSON.parse(text)
    return typeof parsed === 'object' && parsed !== null ? parsed : undefined
  } catch {
    return undefined
  }
}

/**
 * A value as a person reads it: YAML, where a string of many lines (an edit block, a file, a test
 * log) keeps its line breaks instead of becoming one line of `\n`.
 */
function readable(value: unknown): string {
  return YAML.stringify(value, {lineWidth: 0, blockQuote: 'literal'})
}

/** JSON text shown readable, with the text exactly as it was sent a click away. */
function textBlock(text: string): Html {
  const parsed = jsonIn(text)
  if (parsed === undefined) return html`<pre>${text}</pre>`
  return html`<pre class="readable">${readable(parsed)}</pre>
    <details class="raw">
      <summary class="muted small">exactly as sent (JSON)</summary>
      <pre>${text}</pre>
    </details>`
}

function toolCallsBlock(calls: unknown): Html {
  if (!Array.isArray(calls)) return jsonBlock(calls)
  return html`${calls.map((c: {id?: unknown; function?: {name?: unknown; arguments?: unknown}}) => {
    const name = typeof c.function?.name === 'string' ? c.function.name : '?'
    const args = c.function?.arguments
    return html`<div class="tool-call">
      calls
      <code>${name}</code
      >${typeof c.id === 'string' ? html` <span class="muted small">(${c.id})</span>` : ''}${typeof args === 'string' ? textBlock(args) : jsonBlock(args)}
    </div>`
  })}`
}

function message(m: {role: string; content: unknown; tool_calls?: unknown; tool_call_id?: unknown}): Html {
  const text = typeof m.content === 'string' ? m.content : m.content === null || m.content === undefined ? '' : JSON.stringify(m.content, null, 2)
  return html`<div class="msg ${m.role}">
    <div class="role">${m.role}${typeof m.tool_call_id === 'string' ? ` → ${m.tool_call_id}` : ''}</div>
    ${text !== '' ? textBlock(text) : ''}${m.tool_calls !== undefined ? toolCallsBlock(m.tool_calls) : ''}
  </div>`
}

type ReplyMessage = {role?: string; content?: unknown; tool_calls?: unknown}

/** The reply: its message (chat-completions' choices[0].message, or the stored reply's message), then the rest. */
function replyOf(reply: unknown): Html {
  const r = reply as {choices?: Array<{message?: ReplyMessage}>; message?: ReplyMessage; finish_reason?: unknown; usage?: unknown; model?: unknown} | null
  const said = r?.choices?.[0]?.message ?? r?.message
  if (!said) return jsonBlock(reply)
  const {choices: _c, message: _m, ...rest} = r!
  return html`${message({role: said.role ?? 'assistant', content: said.content, ...(said.tool_calls !== undefined ? {tool_calls: said.tool_calls} : {})})}${Object.keys(rest).length > 0 ? html`<pre class="small">${readable(rest)}</pre>` : ''}`
}

/**
 * Whether each request repeats the one before and adds to it (an agent's turns): then the last
 * holds the whole conversation, turn by turn, and the others need not be shown again.
 */
function isConversation(calls: ModelCallView[]): boolean {
  if (calls.length < 2) return false
  return calls.every((c, i) => {
    if (i === 0) return true
    const before = calls[i - 1]!.request?.messages
    const now = c.request?.messages
    return before !== undefined && now !== undefined && now.length > before.length && before.every((m, j) => JSON.stringify(m) === JSON.stringify(now[j]))
  })
}

export function modelCalls(calls: ModelCallView[]): Html {
  if (calls.length === 0) return html``
  const conversation = isConversation(calls)
  const shown = conversation ? calls.slice(-1) : calls
  return html`<h3>Model calls (${calls.length})</h3>
    ${conversation ? html`<p class="muted small">The conversation as the last of ${calls.length} requests sent it; earlier requests are its beginnings: ${calls.slice(0, -1).map((c) => html`<code>${c.key.slice(0, 19)}…</code> `)}</p>` : ''}
    ${shown.map(
      (c, i) =>
        html`<div class="panel call">
          <div class="small muted">request <code>${c.key}</code> — answered from ${c.source}</div>
          ${
            c.missing
              ? html`<p class="muted">The prompt is not shown: ${c.missing}.</p>`
              : html`<h3>
                    Prompt as
                    sent${shown.length > 1 ? ` (${i + 1})` : ''}${c.request?.model ? html` <span class="muted small">to <code>${c.request.model}</code></span>` : ''}
                  </h3>
                  ${(c.request?.messages ?? []).map(message)}
                  <h3>Reply</h3>
                  ${replyOf(c.reply)}`
          }
        </div>`,
    )}`
}

export function toolCalls(snapshot: Snapshot): Html {
  const calls = snapshot.tool_calls ?? []
  if (calls.length === 0) return html``
  return html`<h3>Tool calls (${calls.length})</h3>
    <table>
      <tr>
        <th>turn</th>
        <th>tool</th>
        <th>arguments</th>
        <th>level</th>
        <th>decision</th>
        <th>by</th>
        <th>result</th>
        <th>duration</th>
      </tr>
      ${calls.map(
        (c) =>
          html`<tr>
            <td>${c.turn}</td>
            <td><code>${c.name}</code></td>
            <td><pre>${readable(c.arguments)}</pre></td>
            <td>${c.level ?? ''}</td>
            <td>${c.decision}${c.replayed_from !== undefined ? html` <span class="muted small">(recorded at #${c.replayed_from})</span>` : ''}</td>
            <td>${c.by ?? ''}${c.note ? html` <span class="muted small">${c.note}</span>` : ''}</td>
            <td class="${c.ok === false ? 'o-fail' : c.ok ? 'o-ok' : ''}">
              ${c.summary}${c.files_changed && c.files_changed.length > 0 ? html`<br /><span class="small muted">changed: ${c.files_changed.join(', ')}</span>` : ''}
            </td>
            <td>${duration(c.duration_ms)}</td>
          </tr>`,
      )}
    </table>`
}
