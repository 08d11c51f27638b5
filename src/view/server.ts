/**
 * pipe view's web server: read-only pages over one store, on loopback. It answers GET and HEAD
 * only, only to a Host header naming the address it listens on (a page of another site that
 * resolves its own name to 127.0.0.1 — DNS rebinding — gets nothing), and every page carries a
 * Content-Security-Policy under which only pipe's own script and style run.
 */
import {randomBytes} from 'node:crypto'
import {createServer, type IncomingMessage, type Server, type ServerResponse} from 'node:http'
import type {AddressInfo} from 'node:net'
import {hostname, networkInterfaces} from 'node:os'
import {collectStats} from '../app/stats.js'
import {PipeError} from '../errors.js'
import {ID_PATTERNS} from '../store/file/ids.js'
import {listRuns, type RunSummary} from '../store/queries.js'
import type {RunStore} from '../store/types.js'
import {redact} from '../util/redact.js'
import {html, type Html} from './html.js'
import {decide, decisionForms, holdsToken, isToken, newDecisions, TOKEN_PARAM, tokenCookie, type Decisions} from './actions.js'
import {contentSecurityPolicy, page} from './layout.js'
import {filterRuns, LIVE_SCRIPT, placeRuns, runsBody, type ListedRun, type ListFilter} from './list-pages.js'
import {statsBody} from './stats-page.js'
import {liveState} from './live.js'
import {loadRunView} from './run-data.js'
import {diffTools} from './diff-view.js'
import {pageTools} from './page-tools.js'
import {RUN_SCRIPT, runBody} from './run-page.js'
import {specChanges, specDiff, specText} from './run-records.js'
import {setAsideDamaged, type DamagedRun} from './tolerant-store.js'

export interface ViewServerOptions {
  store: RunStore
  /** The store as the commands a page shows name it, and as the runs page names it (storeInCommand: never a database's local folder). */
  storeArg?: string
  host: string
  port: number
  /** Decisions from the run page (actions.ts): the store and folder the sessions open. Only on 127.0.0.1. */
  decide?: {store: string; cwd: string}
}

export interface ViewServer {
  url: string
  /** The token a browser must hold to decide from the page (absent: read-only). */
  token?: string
  server: Server
  close(): Promise<void>
}

/** How many top-level runs the list shows unless ?limit= asks for another number (up to LIST_MAX). */
const LIST_LIMIT = 500
const LIST_MAX = 100000

interface Listed {
  runs: ListedRun[]
  /** Every run read, for the filter's choices. */
  all: RunSummary[]
  /** More runs match than the list shows. */
  more: boolean
  limit: number
  damaged: DamagedRun[]
}

/**
 * The runs the list shows: the filter chooses among every run of the store, then the newest
 * `limit` of those are shown (a filter applied to the newest 500 only found nothing older).
 */
async function listed(store: RunStore, url: URL): Promise<Listed> {
  const filter = filterFrom(url)
  const asked = Number(url.searchParams.get('limit'))
  const limit = Number.isInteger(asked) && asked >= 1 ? Math.min(asked, LIST_MAX) : LIST_LIMIT
  const damaged: DamagedRun[] = []
  const filtered = Object.keys(filter).length > 0
  const all = await listRuns(setAsideDamaged(store, damaged), {limit: filtered ? LIST_MAX : limit + 1})
  const matching = filterRuns(all, filter)
  const runs = matching.slice(0, limit)
  await placeRuns(store, runs)
  return {runs, all, more: matching.length > limit, limit, damaged}
}

function nonce(): string {
  return randomBytes(16).toString('base64')
}

function send(res: ServerResponse, status: number, type: string, body: string, head: boolean, extra: Record<string, string> = {}): void {
  // Every page and document the view serves is redacted as it leaves: records are redacted when
  // written, but a page also shows what it composes as it is read (commands to copy, a store's name).
  const bytes = Buffer.from(redact(body), 'utf8')
  res.writeHead(status, {
    'content-type': type,
    'content-length': String(bytes.length),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY',
    'cross-origin-resource-policy': 'same-origin',
    ...extra,
  })
  res.end(head ? undefined : bytes)
}

function sendPage(res: ServerResponse, status: number, title: string, body: Html, head: boolean, script?: {text: string; live: boolean}): void {
  const n = nonce()
  const live = script?.live === true
  send(res, status, 'text/html; charset=utf-8', page({title, nonce: n, body, live, ...(script !== undefined ? {script: script.text} : {})}), head, {
    'content-security-policy': contentSecurityPolicy(n, live),
  })
}

const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]']

/**
 * The Host values this server answers: the address it listens on, by number or as localhost. On a
 * wildcard address (0.0.0.0, ::) that is every address of this machine and its name — what a
 * browser that reached it sends — while a name of someone else's (DNS rebinding) still gets nothing.
 */
function allowedHosts(host: string, port: number): Set<string> {
  const names = new Set([host.includes(':') ? `[${host}]` : host])
  if (host === '127.0.0.1' || host === '::1' || host === 'localhost') for (const n of LOOPBACK_NAMES) names.add(n)
  if (host === '0.0.0.0' || host === '::' || host === '[::]') {
    for (const n of LOOPBACK_NAMES) names.add(n)
    for (const list of Object.values(networkInterfaces()))
      for (const a of list ?? []) names.add(a.family === 'IPv6' ? `[${a.address.replace(/%.*$/, '')}]` : a.address)
    names.add(hostname())
  }
  return new Set([...names].map((n) => `${n.toLowerCase()}:${port}`))
}

function filterFrom(url: URL): ListFilter {
  const pick = (name: string): string | undefined => {
    const v = url.searchParams.get(name)
    return v === null || v === '' ? undefined : v
  }
  const out: ListFilter = {}
  const status = pick('status')
  const pipeline = pick('pipeline')
  const feature = pick('feature')
  const since = pick('since')
  if (status !== undefined) out.status = status
  if (pipeline !== undefined) out.pipeline = pipeline
  if (feature !== undefined) out.feature = feature
  if (since !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(since)) out.since = since
  return out
}

/** The runs a page leaves out because their records fail their checks, named with what is wrong. */
function damagedPanel(damaged: DamagedRun[]): Html {
  if (damaged.length === 0) return html``
  return html`<div class="panel bad" id="damaged">
    <strong>${damaged.length} run record(s) fail their checks and are left out below.</strong> <span class="muted">pipe audit verify lists all damage.</span>
    <ul>
      ${damaged.map((d) => html`<li><code>${d.run_id}</code> <strong>${d.code}</strong> ${d.message}</li>`)}
    </ul>
  </div>`
}

/** What a request brings to the pages of a server that takes decisions: whether it holds the token. */
interface Asking {
  decisions?: Decisions
  withToken: boolean
}

async function route(options: ViewServerOptions, url: URL, res: ServerResponse, head: boolean, asking: Asking): Promise<void> {
  const store = options.store
  const commands = options.storeArg !== undefined ? {store: options.storeArg} : {}
  // Every segment as written: `//runs/R-…` or `/runs//R-…` is no page of this server (an empty
  // segment is not skipped), and a trailing slash is allowed.
  const parts =
    url.pathname === '/'
      ? []
      : url.pathname
          .slice(1)
          .replace(/\/$/, '')
          .split('/')
          .map((p) => decodeURIComponent(p))
  if (parts.length === 0) {
    const list = await listed(store, url)
    return sendPage(
      res,
      200,
      'pipe: runs',
      html`${damagedPanel(list.damaged)}${runsBody(list.runs, list.all, filterFrom(url), {more: list.more, limit: list.limit, search: url.searchParams, ...(options.storeArg !== undefined ? {store: options.storeArg} : {})})}`,
      head,
      {text: LIVE_SCRIPT, live: true},
    )
  }
  if (parts[0] === 'api' && parts[1] === 'runs' && parts.length === 2) {
    const list = await listed(store, url)
    return send(res, 200, 'application/json; charset=utf-8', `${JSON.stringify({runs: list.runs, more: list.more, damaged: list.damaged})}\n`, head)
  }
  if (parts[0] === 'runs' && parts.length === 2 && ID_PATTERNS.run.test(parts[1]!)) {
    const view = await loadRunView(store, parts[1]!, commands)
    const decide = asking.decisions ? {decide: decisionForms(asking.decisions, view, asking.withToken)} : {}
    return sendPage(res, 200, `pipe: ${view.record.run_id}`, runBody(view, {...(await pageTools()), ...decide}), head, {text: RUN_SCRIPT, live: true})
  }
  if (parts[0] === 'api' && parts[1] === 'runs' && parts.length === 4 && (parts[3] === 'state' || parts[3] === 'head') && ID_PATTERNS.run.test(parts[2]!)) {
    // What a run page polls: the least that changes when the run moves on (head: the older name of it).
    return send(res, 200, 'application/json; charset=utf-8', `${JSON.stringify(await liveState(store, parts[2]!))}\n`, head)
  }
  if (parts[0] === 'api' && parts[1] === 'runs' && parts.length === 3 && ID_PATTERNS.run.test(parts[2]!)) {
    const view = await loadRunView(store, parts[2]!, commands)
    return send(res, 200, 'application/json; charset=utf-8', `${JSON.stringify(view)}\n`, head)
  }
  if (parts[0] === 'stats' && parts.length === 1) {
    const damaged: DamagedRun[] = []
    const every = await collectStats(setAsideDamaged(store, damaged), {})
    // ?pipeline=NAME: the charts of one pipeline; the filter still offers every pipeline of the store.
    const pipeline = url.searchParams.get('pipeline') ?? ''
    const stats = pipeline === '' ? every : await collectStats(setAsideDamaged(store, []), {pipeline})
    return sendPage(
      res,
      200,
      'pipe: stats',
      html`${damagedPanel(damaged)}${statsBody(
        stats,
        every.pipelines.map((p) => p.pipeline),
      )}`,
      head,
    )
  }
  if (parts[0] === 'specs' && parts[1] === 'diff' && parts.length === 2) {
    const a = url.searchParams.get('a') ?? ''
    const b = url.searchParams.get('b') ?? ''
    if (!ID_PATTERNS.spec.test(a) || !ID_PATTERNS.spec.test(b))
      return sendPage(
        res,
        400,
        'pipe: bad request',
        html`<h1>Not two spec versions</h1>
          <p>Give ?a=VERSION&amp;b=VERSION.</p>`,
        head,
      )
    const [before, after] = [await store.readSpec(a), await store.readSpec(b)]
    const changes = specDiff(before, after)
    const {diff, textDiff} = await diffTools()
    return sendPage(
      res,
      200,
      `pipe: ${a} → ${b}`,
      html`<h1><code>${a}</code> → <code>${b}</code></h1>
        <p>${changes.length} field change(s).</p>
        ${diff(textDiff('spec.json', specText(before), specText(after)))} ${specChanges(changes)}`,
      head,
    )
  }
  return sendPage(
    res,
    404,
    'pipe: not found',
    html`<h1>Not found</h1>
      <p>No page at <code>${url.pathname}</code>. <a href="/">All runs</a>.</p>`,
    head,
  )
}

/** The run a POST decides for: /runs/RUN/decide, the one route that is not GET. */
const DECIDE = /^\/runs\/(R-[^/]+)\/decide$/

async function handle(
  options: ViewServerOptions,
  decisions: Decisions | undefined,
  hosts: Set<string>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const posting = decisions !== undefined && req.method === 'POST'
  if (req.method !== 'GET' && req.method !== 'HEAD' && !posting)
    return decisions
      ? send(res, 405, 'text/plain; charset=utf-8', "pipe view takes GET and HEAD, and POST of a run page's decision form\n", false, {
          allow: DECIDE.test((req.url ?? '').split('?')[0]!) ? 'POST' : 'GET, HEAD',
        })
      : send(res, 405, 'text/plain; charset=utf-8', 'pipe view is read-only: GET and HEAD only\n', false, {allow: 'GET, HEAD'})
  const head = req.method === 'HEAD'
  // Host names are case-insensitive (RFC 3986); nothing else about the name is loosened.
  if (!hosts.has((req.headers.host ?? '').toLowerCase()))
    return send(res, 421, 'text/plain; charset=utf-8', 'pipe view answers only to the address it listens on\n', head)
  let url: URL
  try {
    // The request target as a path on this server: `//runs` is a path, not a host named runs.
    url = new URL(`http://pipe.invalid${req.url?.startsWith('/') ? req.url : '/'}`)
    url.pathname.split('/').forEach((p) => decodeURIComponent(p))
  } catch {
    return send(res, 400, 'text/plain; charset=utf-8', 'bad request: the path is not a valid URL path (a % escape that is no UTF-8?)\n', head)
  }
  try {
    if (posting) {
      const run = DECIDE.exec(url.pathname)?.[1]
      if (run === undefined || !ID_PATTERNS.run.test(run))
        return send(res, 405, 'text/plain; charset=utf-8', "only a run page's decision form is posted\n", false, {allow: 'GET, HEAD'})
      const answered = await decide(decisions, options.store, run, req, (req.headers.host ?? '').toLowerCase())
      return sendPage(res, answered.status, answered.title, answered.body, false)
    }
    // The URL pipe view printed: its token becomes a cookie of this browser's, and the address bar forgets it.
    if (decisions && url.searchParams.has(TOKEN_PARAM)) {
      const given = url.searchParams.get(TOKEN_PARAM)
      url.searchParams.delete(TOKEN_PARAM)
      const location = `${url.pathname}${url.search}`
      if (isToken(decisions, given))
        return send(res, 303, 'text/plain; charset=utf-8', `see ${location}\n`, head, {location, 'set-cookie': tokenCookie(decisions)})
    }
    await route(options, url, res, head, {...(decisions ? {decisions} : {}), withToken: decisions !== undefined && holdsToken(decisions, req)})
  } catch (error) {
    const e = error as PipeError
    const notFound = e instanceof PipeError && e.code === 'E_NOT_FOUND'
    sendPage(
      res,
      notFound ? 404 : 500,
      'pipe: error',
      html`<h1>${notFound ? 'Not found' : 'Could not read the store'}</h1>
        <div class="panel bad">
          <strong>${e.code ?? 'E_INTERNAL'}</strong> ${e.message}${e.hint ? html`<br /><span class="muted">Try this: ${e.hint}</span>` : ''}
        </div>
        <p><a href="/">All runs</a></p>`,
      head,
    )
  }
}

/** Starts the server; resolves once it listens, with the URL it answers on. */
export async function startViewServer(options: ViewServerOptions): Promise<ViewServer> {
  // A page that changes runs answers only on this machine's loopback address, never on one others reach.
  if (options.decide && options.host !== '127.0.0.1')
    throw new PipeError('E_INVALID_ARGS', `decisions from the page are served on 127.0.0.1 only, not on ${options.host}`, {
      hint: 'Give --read-only to serve the pages alone on that address, or leave --host out.',
    })
  let hosts = new Set<string>()
  let decisions: Decisions | undefined
  let answering = 0
  let closing = false
  const server = createServer((req, res) => {
    answering++
    res.on('close', () => {
      answering--
      if (closing && answering === 0) server.closeAllConnections()
    })
    handle(options, decisions, hosts, req, res).catch(() => {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'internal error\n', false)
      else res.destroy()
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new PipeError(error.code === 'EADDRINUSE' ? 'E_CONFLICT' : 'E_IO', `pipe view cannot listen on ${options.host}:${options.port}: ${error.message}`, {
          hint: error.code === 'EADDRINUSE' ? 'Another program uses that port: give --port 0 for a free one.' : 'Check --host and --port.',
        }),
      ),
    )
    server.listen(options.port, options.host, () => resolve())
  })
  const {port} = server.address() as AddressInfo
  hosts = allowedHosts(options.host, port)
  if (options.decide) decisions = newDecisions(options.decide, port)
  // A wildcard address is no place a browser can go: the machine's name is what others reach it by.
  const wildcard = options.host === '0.0.0.0' || options.host === '::' || options.host === '[::]'
  const shown = wildcard ? hostname().toLowerCase() : options.host.includes(':') ? `[${options.host}]` : options.host
  return {
    url: `http://${shown}:${port}/`,
    ...(decisions ? {token: decisions.token} : {}),
    server,
    // Requests being answered get their answer; then every connection goes, idle or not: one still
    // sending its request (a stalled or slowloris client) would otherwise hold the process open.
    close: () =>
      new Promise<void>((resolve) => {
        closing = true
        server.close(() => resolve())
        server.closeIdleConnections()
        if (answering === 0) server.closeAllConnections()
      }),
  }
}
