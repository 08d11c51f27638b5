/**
 * Decisions from pipe view's run page: a review, answers, a yes or no to a waiting step or tool
 * call, taken by the same use cases as pipe review, pipe answer and pipe confirm (src/app/sessions),
 * so the same checks run and the same records are written, with `via: view` beside the OS user.
 *
 * Who may post: a browser that holds the server's token (a random one per server, in the URL pipe
 * view prints; kept as an HttpOnly SameSite=Strict cookie after the first visit), with the CSRF
 * token of the form it posts (an HMAC under the server's token of the run and of the hash of the
 * request the form was drawn for). A form drawn before the run moved on is refused: what the person
 * saw is no longer what the run asks.
 */
import {createHash, createHmac, randomBytes, timingSafeEqual} from 'node:crypto'
import type {IncomingMessage} from 'node:http'
import type {RunOutcome} from '../engine/engine.js'
import {PipeError} from '../errors.js'
import type {RunStore} from '../store/types.js'
import type {RunRecord} from '../types/run.js'
import {currentUser} from '../util/user.js'
import {decisionPanel} from './decision-forms.js'
import {html, type Html} from './html.js'
import type {RunView} from './run-data.js'

/** What decisions from the page need: where the sessions find the store, and the server's secret. */
export interface Decisions {
  /** The store as the sessions open it (the --store pipe view was given, or found). */
  store: string
  /** The working directory the sessions resolve a relative store against. */
  cwd: string
  /** The OS user running pipe view: who every decision from the page is recorded as given by. */
  user: string
  token: string
  /** The cookie that holds the token: one per port, as cookies are per host, not per port. */
  cookie: string
}

/**
 * The query parameter of the URL pipe view prints. Not `token`: every byte pipe writes is redacted,
 * and a `?token=` is a credential's shape (util/redact.ts), so the URL would print without it.
 */
export const TOKEN_PARAM = 'view_token'

export function newDecisions(options: {store: string; cwd: string}, port: number): Decisions {
  return {...options, user: currentUser(), token: randomBytes(24).toString('base64url'), cookie: `pipe_view_${port}`}
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=')
    if (key === name) return value.join('=')
  }
  return undefined
}

/** Whether the request comes from a browser holding this server's token. */
export function holdsToken(decisions: Decisions, req: IncomingMessage): boolean {
  const given = cookieOf(req, decisions.cookie)
  return given !== undefined && same(given, decisions.token)
}

/** The Set-Cookie that keeps the token in the browser that opened the URL pipe view printed. */
export function tokenCookie(decisions: Decisions): string {
  return `${decisions.cookie}=${decisions.token}; HttpOnly; SameSite=Strict; Path=/`
}

/** Whether a URL's ?view_token= is this server's. */
export function isToken(decisions: Decisions, given: string | null): boolean {
  return given !== null && same(given, decisions.token)
}

/** The hash of what a run asks a person now (its pending request, whole): what a form is bound to. */
export function shownHash(record: RunRecord): string {
  const pending = record.status === 'awaiting_input' ? (record.pending ?? null) : null
  return `sha256:${createHash('sha256')
    .update(JSON.stringify({run_id: record.run_id, pending}))
    .digest('hex')}`
}

function csrfFor(decisions: Decisions, runId: string, shown: string): string {
  return createHmac('sha256', decisions.token).update(`${runId}\n${shown}`).digest('base64url')
}

/** The decision form of a run page; without the token, only a note on how to get it. */
export function decisionForms(decisions: Decisions, view: RunView, withToken: boolean): Html {
  const shown = shownHash(view.record)
  return decisionPanel(view, withToken ? {shown, csrf: csrfFor(decisions, view.record.run_id, shown)} : null, decisions.user)
}

export interface Answered {
  status: number
  title: string
  body: Html
}

/** The largest form body read: a note and answers, never a file. */
const BODY_MAX = 256 * 1024

async function formBody(req: IncomingMessage): Promise<URLSearchParams | null> {
  const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase()
  if (type !== 'application/x-www-form-urlencoded') return null
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > BODY_MAX) throw new PipeError('E_INVALID_ARGS', `the form is larger than ${BODY_MAX} bytes`, {hint: 'Shorten the note or the answers.'})
    chunks.push(chunk)
  }
  // A browser sends a textarea's lines ended by CRLF (as HTML says): the text is recorded as a file or a terminal gives it, by LF.
  const form = new URLSearchParams()
  for (const [key, value] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) form.append(key, value.replace(/\r\n?/g, '\n'))
  return form
}

function refused(status: number, message: string): Answered {
  return {
    status,
    title: 'pipe: refused',
    body: html`<h1>Refused</h1>
      <div class="panel bad" id="refused">${message} Nothing was recorded.</div>
      <p><a href="/">All runs</a></p>`,
  }
}

/**
 * A form posted to /runs/RUN/decide: refused 403 without the token or the form's CSRF token, and
 * recording nothing; 409 when the run no longer asks what the form showed; otherwise the use case
 * of the command that gives it, whose error (and hint) is the page's when it refuses.
 */
export async function decide(decisions: Decisions, store: RunStore, runId: string, req: IncomingMessage, host: string): Promise<Answered> {
  if (!holdsToken(decisions, req)) return refused(403, "This browser does not hold the server's token: open the URL pipe view printed.")
  // A browser names the site a form was posted from; another site's page is refused whatever it holds.
  // Our pages say `null` (they are served with Referrer-Policy: no-referrer); a cross-site one sends no
  // SameSite=Strict cookie, so it was refused above.
  const origin = req.headers.origin
  if (origin !== undefined && origin !== 'null' && origin !== `http://${host}`)
    return refused(403, `The form was posted from ${origin}, not from this server's pages.`)
  const form = await formBody(req)
  if (form === null) return refused(415, 'Not a form (application/x-www-form-urlencoded).')
  const shown = form.get('shown') ?? ''
  const csrf = form.get('csrf') ?? ''
  if (csrf === '' || !same(csrf, csrfFor(decisions, runId, shown)))
    return refused(403, "The form's CSRF token is missing or is not this server's for this run.")
  const record = await store.readRun(runId)
  if (shownHash(record) !== shown)
    return {
      status: 409,
      title: 'pipe: the run moved on',
      body: html`<h1>The run no longer asks what the page showed</h1>
        <div class="panel bad" id="refused">
          Run <code>${runId}</code> is ${record.status}${record.pending ? html`, waiting for ${record.pending.kind} at step <code>${record.pending.step}</code>` : ''}
          now: someone decided, or it asked again, since the page was drawn. Nothing was recorded.
        </div>
        <p><a href="/runs/${encodeURIComponent(runId)}">Reload the run</a> to see what it asks now.</p>`,
    }
  const base = {cwd: decisions.cwd, store: decisions.store, runId, via: 'view' as const}
  const note = (form.get('note') ?? '').trim()
  // What the form answers: the pause's kind (review, answers, confirm), not a step's.
  const gate = form.get('kind')
  const decision = form.get('decision') ?? ''
  let outcome: RunOutcome
  let given: string
  try {
    if (gate === 'review') {
      if (decision !== 'go' && decision !== 'hold' && decision !== 'drop')
        throw new PipeError('E_INVALID_ARGS', `"${decision}" is no review decision`, {hint: 'Choose go, hold or drop.'})
      const {reviewSession} = await import('../app/sessions/review.js')
      outcome = await reviewSession({...base, decision, ...(note ? {note} : {})})
      given = `review ${decision}`
    } else if (gate === 'confirm') {
      if (decision !== 'yes' && decision !== 'no')
        throw new PipeError('E_INVALID_ARGS', `"${decision}" is no answer to a confirmation`, {hint: 'Choose yes or no.'})
      const scope = form.get('for') ?? 'call'
      if (scope !== 'call' && scope !== 'step' && scope !== 'run')
        throw new PipeError('E_INVALID_ARGS', `"${scope}" is no scope`, {hint: 'Choose call, step or run.'})
      const {confirmSession} = await import('../app/sessions/confirm.js')
      outcome = await confirmSession({...base, decision, ...(note ? {note} : {}), ...(scope !== 'call' ? {scope} : {})})
      given = `confirmation ${decision}`
    } else if (gate === 'answers') {
      const answers: Record<string, string> = {}
      for (const [key, value] of form) if (key.startsWith('answer:') && value.trim() !== '') answers[key.slice('answer:'.length)] = value
      const {answerSession} = await import('../app/sessions/answer.js')
      outcome = await answerSession({...base, answers})
      given = `answers to ${Object.keys(answers).join(', ')}`
    } else return refused(400, 'The form names no decision this page gives.')
  } catch (error) {
    if (!(error instanceof PipeError)) throw error
    const status = error.code === 'E_INVALID_ARGS' || error.code === 'E_CONFIG' ? 400 : error.code === 'E_NOT_FOUND' ? 404 : 409
    return {
      status,
      title: 'pipe: not recorded',
      body: html`<h1>Not recorded</h1>
        <div class="panel bad" id="refused">
          <strong>${error.code}</strong> ${error.message}${error.hint ? html`<br /><span class="muted">Try this: ${error.hint}</span>` : ''}
        </div>
        <p><a href="/runs/${encodeURIComponent(runId)}">Back to the run</a></p>`,
    }
  }
  return {
    status: 200,
    title: `pipe: ${runId}`,
    body: html`<h1>Recorded</h1>
      <div class="panel good" id="decided" data-status="${outcome.status}">
        ${given} for run <code>${runId}</code>, by <code>${decisions.user}</code> via <code>view</code>. The run is now
        <strong>${outcome.status}</strong>${outcome.reason ? html`: ${outcome.reason}` : ''}.
      </div>
      <p><a href="/runs/${encodeURIComponent(runId)}">Back to the run</a></p>`,
  }
}
