/**
 * pipe view, pipe export --html and snapshot show --prompt, in a real headless browser (Debian's
 * chromium-headless-shell, driven by puppeteer-core): the pages hold each step, the run id and the
 * prompt as sent, raise no console error, keep hostile content inert, and the server answers only
 * what a read-only loopback server should.
 *
 * `pipe view` is a process, as are the file's first `run`, `review`, `answer`, `export` and `snapshot
 * show`; the other commands run in this process (test/helpers/pipe-here.ts: the same command from
 * argv, its output and exit code), before or beside the view, one at a time.
 */
import {expect} from 'chai'
import type {ChildProcess} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {hostname} from 'node:os'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import puppeteer, {type Browser, type Page} from 'puppeteer-core'
import {examples, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {CHROMIUM, closePages, notBlank as notBlankIn, open as openIn, raw, runHereIn, runIn, startView as startViewIn, type Started} from '../helpers/view.js'
import {copyStore} from '../helpers/stores.js'

/** What a requirement, a model or a command may write to make a page run its code or lie. */
const HOSTILE = [
  "<script>window.__pwned = 'script'</script>",
  '<img src=x onerror="window.__pwned = \'img\'">',
  '[click](javascript:window.__pwned=1)',
  '<a href="javascript:window.__pwned=2">link</a>',
  'invoice\u202Etxt.exe',
].join(' ')

let dir: string
let cleanup: () => Promise<void>
let browser: Browser | undefined
const servers: ChildProcess[] = []
let model: ModelServer | undefined

before(async function () {
  if (!CHROMIUM) return
  browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
})
after(async () => {
  await browser?.close()
})
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-view-'))
})
afterEach(async () => {
  await closePages(browser)
  for (const s of servers.splice(0)) if (s.exitCode === null) s.kill('SIGKILL')
  await model?.close()
  model = undefined
  await cleanup()
})

const startView = (args: string[] = []): Promise<Started> => startViewIn(dir, servers, args)
const open = (url: string): Promise<{page: Page; problems: string[]}> => openIn(browser!, url)
const notBlank = async (page: Page, name: string): Promise<void> => void (await notBlankIn(browser!, page, name))
/** `pipe run ARGS` in this process, a run that succeeded or paused. */
const runHere = (at: string, args: string[], env: Record<string, string> = {}): Promise<{run_id: string; status: string}> => runHereIn(at, args, env)
const run = (args: string[], env: Record<string, string> = {}): Promise<{run_id: string; status: string}> => runHere(dir, args, env)

/*
 * A store several tests need is made once in this file, by real runs in a folder of its own, and
 * copied into each test's folder (helpers/stores.ts): each test still has a store of its own.
 */
let made: {dir: string; cleanup: () => Promise<void>} | undefined
const making = new Map<string, Promise<{run_id: string; status: string}>>()
after(async () => made?.cleanup())

async function fromFixture(name: string, make: (at: string) => Promise<{run_id: string; status: string}>): Promise<{run_id: string; status: string}> {
  made ??= await tempDir('pipe-view-made-')
  const at = path.join(made.dir, name)
  if (!making.has(name))
    making.set(
      name,
      mkdir(at).then(() => make(at)),
    )
  const result = await making.get(name)!
  await copyStore(path.join(at, '.pipe'), path.join(dir, '.pipe'))
  return result
}

/** A run of the default pipeline answered by the shipped cassette: model steps with prompts (the file's first run and review, processes). */
async function modelRun(): Promise<string> {
  const done = await fromFixture('model', async (at) => {
    const cassette = path.join(repoRoot, 'pipelines', 'cassettes', 'default-openai.jsonl')
    const paused = await runIn(at, [path.join(repoRoot, 'pipelines', 'default.yaml'), '--input', path.join(examples, 'full-prd.md'), '--replay', cassette])
    expect(paused.status).to.equal('awaiting_input')
    // The run keeps its cassette: the review's steps replay from it too.
    const go = await pipe(['review', paused.run_id, '--decision', 'go', '--json', '--store', path.join(at, '.pipe')], {cwd: at})
    expect(go.code, go.stderr).to.equal(0)
    return json<{run_id: string; status: string}>(go)
  })
  return done.run_id
}

/** A run of the default pipeline (offline) that waits for answers to its questions. */
function pausedRun(): Promise<{run_id: string; status: string}> {
  return fromFixture('paused', (at) => runHere(at, [path.join(repoRoot, 'pipelines', 'default.yaml'), '--text', 'Users can export invoices as CSV.']))
}

/** A run whose model reply is hostile, from a real chat-completions server on 127.0.0.1. */
async function hostileModelRun(): Promise<string> {
  model = await ModelServer.start()
  model.script('draft', {content: JSON.stringify({items: [{title: HOSTILE}]}), usage: {prompt_tokens: 10, completion_tokens: 5}})
  await mkdir(path.join(dir, 'p'), {recursive: true})
  await writeFile(path.join(dir, 'p', 'notes.md'), `Summarise for {{audience}}: ${HOSTILE}\n`)
  await writeFile(
    path.join(dir, 'p', 'notes.schema.json'),
    JSON.stringify({type: 'object', required: ['items'], properties: {items: {type: 'array', items: {type: 'object', properties: {title: {type: 'string'}}}}}}),
  )
  const file = path.join(dir, 'p', 'notes.yaml')
  await writeFile(
    file,
    'version: 1\nname: notes\nsteps:\n  - id: draft\n    kind: model\n    prompt: notes.md\n    vars: {audience: "<b>customers</b>"}\n    output_schema: notes.schema.json\n',
  )
  const r = await run([file], {OPENAI_BASE_URL: model.url, PIPE_HOME: path.join(dir, 'home')})
  expect(r.status).to.equal('succeeded')
  return r.run_id
}

async function inert(page: Page): Promise<void> {
  const state = await page.evaluate(() => ({
    pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null,
    scripts: document.querySelectorAll('script').length,
    images: document.querySelectorAll('img').length,
    jsLinks: [...document.querySelectorAll('a')].filter((a) => a.getAttribute('href')?.trim().toLowerCase().startsWith('javascript')).length,
    // textContent: collapsed sections (an evidence record, a step) count too.
    bodyText: document.body.textContent ?? '',
  }))
  expect(state.pwned, 'no hostile script ran').to.equal(null)
  expect(state.images, 'no element was injected').to.equal(0)
  expect(state.jsLinks, 'no javascript: link').to.equal(0)
  expect(state.scripts, "only pipe's own script, if any").to.be.at.most(1)
  expect(state.bodyText, 'hostile markup shows as text').to.contain("<script>window.__pwned = 'script'</script>")
  expect(state.bodyText, 'a bidi override is shown, not obeyed').to.contain('invoice⟨U+202E⟩txt.exe')
}

describe('pipe view and pipe export --html in a real browser', function () {
  this.timeout(180000)
  before(function () {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
  })

  it('the runs list and a run page hold each step, the run id, the prompt as sent and the audit verdict, with no console error', async () => {
    const runId = await modelRun()
    const {url} = await startView()
    expect(url).to.match(/^http:\/\/127\.0\.0\.1:\d+\/$/)
    const list = await open(url)
    expect(await list.page.$eval(`tr[data-run="${runId}"] .badge`, (b) => b.textContent)).to.equal('succeeded')
    await notBlank(list.page, 'runs-list')
    expect(list.problems).to.deep.equal([])
    const runPage = await open(`${url}runs/${runId}`)
    const text = (await runPage.page.evaluate(() => document.body.textContent)) ?? ''
    expect(text).to.contain(runId)
    for (const step of ['ingest', 'compile', 'validate_gates', 'plan_tasks', 'generate_vv', 'manual_review', 'publish']) {
      expect(await runPage.page.$(`details[data-step="${step}"]`), step).to.not.equal(null)
    }
    expect(text, 'the prompt as sent').to.contain('You turn a rough software requirement into a canonical spec.')
    expect(text).to.contain('Team Expense Tracker')
    expect(await runPage.page.$eval('[data-audit]', (e) => e.getAttribute('data-audit'))).to.equal('ok')
    expect(await runPage.page.$$eval('svg.graph .edge.taken', (e) => e.length), 'the path taken is drawn').to.be.greaterThan(3)
    await notBlank(runPage.page, 'run-page')
    expect(runPage.problems).to.deep.equal([])
  })

  it('a paused run shows what it waits for and the exact command; the list updates its status live when the run goes on', async () => {
    const paused = await pausedRun()
    expect(paused.status).to.equal('awaiting_input')
    const {url} = await startView()
    const runPage = await open(`${url}runs/${paused.run_id}`)
    expect(await runPage.page.$eval('#waits pre.command', (e) => e.textContent)).to.equal(
      `pipe answer ${paused.run_id} --file answers.yaml --store ${path.join(dir, '.pipe')}`,
    )
    const list = await open(`${url}?status=awaiting_input`)
    expect(await list.page.$eval(`tr[data-run="${paused.run_id}"] .badge`, (b) => b.getAttribute('data-status'))).to.equal('awaiting_input')
    await writeFile(
      path.join(dir, 'answers.yaml'),
      'answers:\n  Q-001: "Given an invoice, when exported, then a CSV downloads"\n  Q-002: "p95 under 2 s"\n  Q-003: "none"\n',
    )
    const answered = await pipe(['answer', paused.run_id, '--file', path.join(dir, 'answers.yaml'), '--json', '--store', path.join(dir, '.pipe')], {cwd: dir})
    expect([0, 10]).to.include(answered.code)
    const now = json<{status: string}>(answered).status
    // The page follows the store: the badge changes without a reload (waits on the DOM, no sleep).
    await list.page.waitForFunction(
      (id: string, status: string) => document.querySelector(`tr[data-run="${id}"] .badge`)?.getAttribute('data-status') === status,
      {timeout: 90000},
      paused.run_id,
      now,
    )
    expect(list.problems).to.deep.equal([])
  })

  it('hostile requirement text and a hostile model reply stay inert on the run page and in the exported file', async () => {
    const offline = await run([path.join(repoRoot, 'pipelines', 'default.yaml'), '--text', HOSTILE])
    const modelled = await hostileModelRun()
    const {url} = await startView()
    for (const id of [offline.run_id, modelled]) {
      const {page, problems} = await open(`${url}runs/${id}`)
      await inert(page)
      expect(problems, id).to.deep.equal([])
    }
    const file = path.join(dir, 'export.html')
    const exported = await pipe(['export', modelled, '--html', file, '--store', path.join(dir, '.pipe')], {cwd: dir})
    expect(exported.code, exported.stderr).to.equal(0)
    const {page, problems} = await open(pathToFileURL(file).href)
    await inert(page)
    expect(await page.evaluate(() => document.body.textContent)).to.contain('Summarise for <b>customers</b>:')
    expect(problems).to.deep.equal([])
  })

  it('pipe export --html writes one self-contained file: every step, the prompts, the graph, no external reference', async () => {
    const runId = await modelRun()
    const file = path.join(dir, 'out', 'run.html')
    await mkdir(path.dirname(file))
    const r = await pipeHere(['export', runId, '--html', file, '--store', path.join(dir, '.pipe'), '--json'], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    expect(json<{html: string; bytes: number}>(r).html).to.equal(file)
    const text = await readFile(file, 'utf8')
    expect(text, 'no external reference').to.not.match(/\b(?:src|href)\s*=\s*["']?(?:https?:)?\/\//i)
    expect(text).to.not.match(/@import|url\(\s*['"]?https?:/i)
    expect(text).to.contain('Content-Security-Policy')
    const {page, problems} = await open(pathToFileURL(file).href)
    for (const step of ['compile', 'plan_tasks', 'publish']) expect(await page.$(`details[data-step="${step}"]`), step).to.not.equal(null)
    expect(await page.evaluate(() => document.body.textContent)).to.contain('You turn a rough software requirement into a canonical spec.')
    expect(await page.$('svg.graph'), 'the graph, drawn inline').to.not.equal(null)
    await notBlank(page, 'export')
    expect(problems).to.deep.equal([])
  })
})

describe('pipe view: a read-only server on loopback', function () {
  this.timeout(120000)

  it('answers GET and HEAD only, to its own Host only, with a CSP; an unknown run is a 404 page; SIGTERM stops it with exit 0', async () => {
    const paused = await pausedRun()
    const {url, child} = await startView()
    const ok = await raw(`${url}runs/${paused.run_id}`)
    expect(ok.status).to.equal(200)
    expect(String(ok.headers['content-security-policy'])).to.match(/default-src 'none'; style-src 'nonce-[^']+'; script-src 'nonce-[^']+'/)
    expect(ok.headers['x-content-type-options']).to.equal('nosniff')
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const r = await raw(url, {method})
      expect(r.status, method).to.equal(405)
      expect(r.headers['allow']).to.equal('GET, HEAD')
    }
    expect((await raw(url, {method: 'HEAD'})).status).to.equal(200)
    const port = new URL(url).port
    expect((await raw(url, {host: `evil.example:${port}`})).status, 'DNS rebinding').to.equal(421)
    expect((await raw(url, {host: 'localhost:1'})).status, 'another port').to.equal(421)
    expect((await raw(url, {host: `localhost:${port}`})).status).to.equal(200)
    expect((await raw(`${url}runs/R-20000101-0001`)).status).to.equal(404)
    expect((await raw(`${url}runs/..%2F..%2Fetc%2Fpasswd`)).status).to.equal(404)
    expect((await raw(`${url}specs/diff?a=x&b=y`)).status).to.equal(400)
    const api = JSON.parse((await raw(`${url}api/runs`)).body) as {runs: Array<{run_id: string}>}
    expect(api.runs.map((r) => r.run_id)).to.deep.equal([paused.run_id])
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    expect(await exited).to.equal(0)
  })

  it("--json prints {url}; RUN makes it the run's page; --host beyond loopback warns; a missing run or store is an error", async () => {
    const paused = await pausedRun()
    const {url} = await startView(['--json', paused.run_id])
    expect(JSON.parse(url)).to.deep.equal({url: JSON.parse(url).url})
    expect((JSON.parse(url) as {url: string}).url).to.match(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/runs/${paused.run_id}\\?view_token=[\\w-]{32}$`))
    const wide = await startView(['--host', '0.0.0.0'])
    // 0.0.0.0 is not an address a browser can go to: the URL names this machine.
    expect(wide.url.startsWith(`http://${hostname().toLowerCase()}:`), wide.url).to.equal(true)
    expect(wide.url).to.match(/:\d+\/$/)
    await wide.stderrHas('not loopback')
    const missing = await pipe(['view', 'R-20000101-0001', '--store', path.join(dir, '.pipe'), '--json'], {cwd: dir})
    expect(missing.code).to.equal(2)
    expect(json<{error: {code: string}}>(missing).error.code).to.equal('E_NOT_FOUND')
  })

  it('snapshot show --prompt prints the messages as sent and the reply; a step that asked no model says so', async () => {
    const runId = await modelRun()
    const r = await pipe(['snapshot', 'show', runId, '--step', 'compile', '--prompt', '--store', path.join(dir, '.pipe')], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stdout).to.match(/^#2 compile \(compile\) {2}request 1 of 1 {2}sha256:[0-9a-f]{64} {2}answered from cassette\n--- system\n/)
    expect(r.stdout).to.contain('--- user\nYou turn a rough software requirement into a canonical spec.')
    expect(r.stdout).to.contain('--- reply\n{')
    const asJson = json<Array<{step: string; calls: Array<{request: {messages: Array<{role: string}>}}>}>>(
      await pipeHere(['snapshot', 'show', runId, '--step', 'compile', '--prompt', '--json', '--store', path.join(dir, '.pipe')], {cwd: dir}),
    )
    expect(asJson[0]!.step).to.equal('compile')
    expect(asJson[0]!.calls[0]!.request.messages.map((m) => m.role)).to.deep.equal(['system', 'user'])
    const none = await pipeHere(['snapshot', 'show', runId, '--step', 'ingest', '--prompt', '--store', path.join(dir, '.pipe'), '--json'], {cwd: dir})
    expect(none.code).to.equal(2)
    expect(json<{error: {code: string; message: string}}>(none).error.message).to.equal(`run ${runId} has no model request recorded for step "ingest"`)
  })
})
