/**
 * pipe view as an attacker and as a new user meet it: odd URLs and Host headers, a damaged store,
 * slow clients and signals, a server that stops under an open page, the links and commands a page
 * offers (does clicking, copying and running them work?), in Debian's chromium-headless-shell.
 *
 * `pipe view` is a process, as are the file's first `run` (the coding example's), `export`,
 * `resume`, `answer`, `review` and `snapshot show`; the other commands run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code), beside the
 * view, one at a time.
 */
import {expect} from 'chai'
import {execFileSync, type ChildProcess} from 'node:child_process'
import {chmod, cp, mkdir, readFile, stat, writeFile} from 'node:fs/promises'
import {connect} from 'node:net'
import {networkInterfaces} from 'node:os'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import puppeteer, {type Browser, type Page} from 'puppeteer-core'
import {json, pipe, repoRoot, tempDir, type CliResult, codingExampleRun} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {copyStore, runsIn} from '../helpers/stores.js'
import {CHROMIUM, closePages, open as openIn, raw, runHereIn, startView as startViewIn, type Started} from '../helpers/view.js'

/** Two routes of one step to one step, and an end step that fails the run with its own reason. */
const TWO_ROUTES = `version: 1
name: two-routes
steps:
  - {id: check, kind: noop, outcome: partial, on: {partial: publish, error: publish}}
  - {id: publish, kind: noop, next: done}
  - {id: done, kind: end, status: failed, reason: "nothing to publish"}
`

describe('pipe view under attack and in a new user’s hands', function () {
  this.timeout(120000)
  let dir: string
  let cleanup: () => Promise<void>
  let browser: Browser | undefined
  const servers: ChildProcess[] = []

  /**
   * The runs the tests show, made once by real `pipe run`s in a folder of its own (`shared`), oldest
   * first: examples/coding-agent from its cassette (a coding run whose task child run has an agent
   * step), a failed run of TWO_ROUTES (two.yaml), a run of it whose file was changed after
   * (changed/two.yaml, named changed-routes), a run with hostile text in its input and reason, the
   * default pipeline paused at its questions (1 failed step of 4), and, newest, a run of `other`.
   * The tests that only read them use one `pipe view` of that folder (`view`); a test that stops or
   * starts its own server with its own flags serves that folder too (a view writes nothing); a test
   * that changes the store changes a copy of the folder in its own. The runs' working folder stays
   * `shared` (a copy's review publishes there).
   */
  let shared: {dir: string; cleanup: () => Promise<void>}
  let view: Started
  const sharedServers: ChildProcess[] = []
  const ids = {coding: '', task: '', twoRoutes: '', changed: '', hostile: '', paused: '', other: ''}
  const HOSTILE = `</style></script>]]><script>window.__pwned=1</script><svg onload="window.__pwned=2"><a href="javascript:window.__pwned=3">x</a> <style>*{display:none}</style> a\u061Cb c\u2067d\u2069`
  /** The top-level runs of the shared store, newest first, as the runs list orders them. */
  let topLevel: string[]

  before(async function () {
    // The runs above, the coding example's above all, on a loaded machine: the hook's bound, not the
    // runs', says when it failed.
    this.timeout(1200000)
    if (CHROMIUM) browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
    shared = await tempDir('pipe-view-attack-shared-')
    const at = shared.dir
    /** `pipe run ARGS` in this process, its exit code one of `codes`. */
    const runAt = (args: string[], codes = [0, 10]): Promise<{run_id: string; status: string}> => runHereIn(at, args, {}, codes)
    const example = path.join(repoRoot, 'examples', 'coding-agent')
    const repo = path.join(at, 'median')
    await cp(path.join(example, 'scratch'), repo, {recursive: true})
    execFileSync('git', ['init', '-q'], {cwd: repo})
    const env = {
      GIT_AUTHOR_NAME: 'pipe test',
      GIT_AUTHOR_EMAIL: 'pipe-test@example.invalid',
      GIT_COMMITTER_NAME: 'pipe test',
      GIT_COMMITTER_EMAIL: 'pipe-test@example.invalid',
    }
    const done = await pipe([...codingExampleRun(), '--json', '--store', path.join(at, '.pipe')], {cwd: repo, env, timeoutMs: 1200000})
    expect(done.code, done.stderr).to.equal(0)
    ids.coding = json<{run_id: string}>(done).run_id

    await writeFile(path.join(at, 'two.yaml'), TWO_ROUTES)
    const two = await runAt([path.join(at, 'two.yaml')], [1])
    expect(two.status).to.equal('failed')
    ids.twoRoutes = two.run_id

    await mkdir(path.join(at, 'changed'))
    const changedFile = path.join(at, 'changed', 'two.yaml')
    await writeFile(changedFile, TWO_ROUTES.replace('name: two-routes', 'name: changed-routes'))
    ids.changed = (await runAt([changedFile], [1])).run_id
    await writeFile(changedFile, `${TWO_ROUTES.replace('name: two-routes', 'name: changed-routes')}# changed after the run\n`)

    await writeFile(
      path.join(at, 'say.yaml'),
      'version: 1\nname: say\ninputs:\n  title: {type: string}\nsteps:\n  - {id: check, kind: noop, next: done}\n  - {id: done, kind: end, status: failed, reason: "${{ inputs.title }}"}\n',
    )
    ids.hostile = (await runAt([path.join(at, 'say.yaml'), '-i', `title=${HOSTILE}`], [1])).run_id

    const paused = await runAt([path.join(repoRoot, 'pipelines', 'default.yaml'), '--input', path.join(repoRoot, 'examples', 'one-sentence.txt')])
    expect(paused.status).to.equal('awaiting_input')
    ids.paused = paused.run_id

    await writeFile(path.join(at, 'other.yaml'), 'version: 1\nname: other\nsteps:\n  - {id: only, kind: noop}\n')
    ids.other = (await runAt([path.join(at, 'other.yaml')])).run_id

    const runs = await runsIn(at)
    ids.task = runs.find((r) => r.parent?.run_id === ids.coding)!.run_id
    topLevel = runs
      .filter((r) => !r.parent)
      .map((r) => r.run_id)
      .reverse()
    expect(topLevel).to.deep.equal([ids.other, ids.paused, ids.hostile, ids.changed, ids.twoRoutes, ids.coding])
    view = await startViewIn(at, sharedServers)
  })
  after(async () => {
    await browser?.close()
    for (const s of sharedServers.splice(0)) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
    await shared?.cleanup()
  })
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-view-attack-'))
  })
  afterEach(async () => {
    await closePages(browser)
    for (const s of servers.splice(0)) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
    await cleanup()
  })

  const store = (): string => path.join(dir, '.pipe')
  const sharedStore = (): string => path.join(shared.dir, '.pipe')
  /** A `pipe view` of this test's own folder (a copy of the shared one the test changes). */
  const startView = (args: string[] = [], env: Record<string, string> = {}): Promise<Started> => startViewIn(dir, servers, args, env)
  /** A `pipe view` of its own (stopped by the test, or with flags of its own) of the shared folder, which it only reads. */
  const startSharedView = (args: string[] = [], env: Record<string, string> = {}): Promise<Started> => startViewIn(shared.dir, servers, args, env)
  /** This test's own copy of the shared folder, to change. */
  const copyShared = (): Promise<void> => copyStore(shared.dir, dir)
  const open = (url: string, options: {status?: number} = {}): Promise<{page: Page; problems: string[]}> => openIn(browser!, url, options)
  const browserOnly = function (this: Mocha.Context): void {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
  }
  /** Waits until `fn` holds in the page, checked as the page changes (not on every frame). */
  const until = (page: Page, fn: () => boolean): Promise<unknown> => page.waitForFunction(fn, {polling: 'mutation'})

  it('a node of the graph opens its step: the click lands on the step’s section, opened; two routes to one step are one readable label', async function () {
    browserOnly.call(this)
    const runId = ids.twoRoutes
    const {page, problems} = await open(`${view.url}runs/${runId}`)
    expect(await page.$eval('details[data-step="publish"]', (d) => d.open)).to.equal(false)
    await page.click('svg.graph a[href="#step-publish-2"]')
    await until(page, () => document.querySelector<HTMLDetailsElement>('details[data-step="publish"]')?.open === true)
    expect(await page.evaluate(() => location.hash)).to.equal('#step-publish-2')
    const labels = await page.$$eval('svg.graph text.edge-label', (ts) => ts.map((t) => t.textContent))
    expect(
      labels.filter((l) => l?.includes('partial')),
      'one label names both routes',
    ).to.deep.equal(['partial, error'])
    expect(
      await page.$$eval('svg.graph path.edge.taken', (es) => [...new Set(es.map((e) => e.getAttribute('marker-end')))]),
      'a taken edge has its own head, not one scaled by its width',
    ).to.deep.equal(['url(#arrow-taken)'])
    expect(problems).to.deep.equal([])
    // The exported file links the same way, with no server.
    const file = path.join(dir, 'run.html')
    expect((await pipe(['export', runId, '--html', file, '--store', sharedStore()], {cwd: dir})).code).to.equal(0)
    const exported = await open(pathToFileURL(file).href)
    await exported.page.click('svg.graph a[href="#step-check-1"]')
    await until(exported.page, () => document.querySelector<HTMLDetailsElement>('details[data-step="check"]')?.open === true)
    expect(exported.problems).to.deep.equal([])
  })

  it('a damaged run record is named on the runs list, the stats page and the API, which still show every other run', async () => {
    await copyShared()
    const damaged = ids.twoRoutes
    const good = topLevel.filter((id) => id !== damaged)
    await writeFile(path.join(store(), 'runs', damaged, 'run.json'), `{"run_id": "${damaged}", "status": `)
    const {url} = await startView()
    const list = await raw(url)
    expect(list.status, list.body.slice(-800)).to.equal(200)
    for (const id of good) expect(list.body).to.contain(`data-run="${id}"`)
    expect(list.body).to.match(new RegExp(`id="damaged"[^]*${damaged}[^]*E_INTEGRITY`))
    const stats = await raw(`${url}stats`)
    expect(stats.status, stats.body.slice(-800)).to.equal(200)
    expect(stats.body).to.contain(damaged)
    const api = await raw(`${url}api/runs`)
    expect(api.status, api.body.slice(-800)).to.equal(200)
    const body = JSON.parse(api.body) as {runs: Array<{run_id: string}>; damaged: Array<{run_id: string; code: string}>}
    expect(body.runs.map((r) => r.run_id)).to.deep.equal(good)
    expect(body.damaged.map((d) => [d.run_id, d.code])).to.deep.equal([[damaged, 'E_INTEGRITY']])
    // The damaged run's own page says what is wrong rather than pretending it is not there.
    const page = await raw(`${url}runs/${damaged}`)
    expect(page.status).to.equal(500)
    expect(page.body).to.contain('E_INTEGRITY')
  })

  it('odd URLs and Host headers get a plain answer: a malformed escape is a 400, never a 500; a Host that differs only in letter case is the same host', async () => {
    const runId = ids.twoRoutes
    const {url} = view
    const port = new URL(url).port
    const answers: Array<[string, number]> = [
      ['/runs/%E0%A4%A', 400],
      ['/%ff', 400],
      ['//runs', 404],
      [`//runs/${runId}`, 404],
      [`/runs/${runId}%00`, 404],
      [`/runs/${runId}/..`, 404],
      ['/runs/..%2f..%2fetc%2fpasswd', 404],
      [`/runs/${runId}?${'x=1&'.repeat(2000)}`, 200],
      [`/?status=%3Cscript%3E&pipeline=${'%22'.repeat(100)}&since=9999-99-99`, 200],
      ['/stats?x=%E0', 200],
    ]
    for (const [at, status] of answers) {
      const r = await raw(url, {path: at})
      expect(r.status, at).to.equal(status)
      expect(r.body, at).to.not.contain('<script>')
    }
    expect((await raw(url, {host: `LOCALHOST:${port}`})).status, 'host names are case-insensitive').to.equal(200)
    expect((await raw(url, {host: `127.0.0.1.:${port}`})).status, 'a trailing dot is another name').to.equal(421)
    expect((await raw(url, {host: `127.0.0.1:${port}@evil.example`})).status).to.equal(421)
    expect((await raw(url, {host: null})).status, 'no Host at all').to.be.oneOf([400, 421])
    for (const method of ['OPTIONS', 'TRACE']) expect((await raw(url, {method})).status, method).to.equal(405)
    // A tunnel is refused: Node closes a CONNECT that no one listens for.
    const tunnel = await raw(url, {method: 'CONNECT', path: `127.0.0.1:${port}`}).then(
      (r) => r.status,
      () => 'closed',
    )
    expect(tunnel).to.be.oneOf([400, 405, 'closed'])
  })

  it('the command a page offers runs as it is copied, from any folder; a failed run pipe resume would refuse says why instead of offering it', async function () {
    browserOnly.call(this)
    await copyShared()
    const failed = ids.twoRoutes
    const paused = {run_id: ids.paused}
    const {url} = await startView()
    const elsewhere = path.join(dir, 'elsewhere')
    await mkdir(elsewhere)
    /** Runs the text of a page's command as a shell would split it (no quoting in these commands), in `elsewhere`. */
    const runShown = async (command: string): Promise<CliResult> => {
      expect(command.startsWith('pipe '), command).to.equal(true)
      return pipe(command.slice('pipe '.length).split(/\s+/).filter(Boolean), {cwd: elsewhere})
    }

    const failedPage = await open(`${url}runs/${failed}`)
    expect(await failedPage.page.$('#waits pre.command'), 'no command that would fail').to.equal(null)
    expect(await failedPage.page.$eval('#waits', (e) => e.textContent)).to.contain('was ended failed by its end step done')
    expect((await pipe(['resume', failed, '--store', store()], {cwd: elsewhere})).code, 'pipe resume does refuse it').to.equal(2)

    const answerPage = await open(`${url}runs/${paused.run_id}`)
    await answerPage.page.click('#jumps a.jump')
    await until(answerPage.page, () => document.querySelector<HTMLDetailsElement>('details[data-step="validate_gates"]')?.open === true)
    expect(await answerPage.page.$$eval('#jumps a.jump', (as) => as.map((a) => a.textContent)), 'a long run starts at its failure').to.deep.equal([
      'the first failed step: #3 validate_gates',
      'the last step: #4 clarify_questions',
    ])
    expect(
      await answerPage.page.$$eval('svg.graph rect.waiting', (r) => r.map((e) => e.parentElement?.querySelector('title')?.textContent)),
      'the graph marks where it waits',
    ).to.deep.equal(['apply_answers (apply_answers): not run; the run waits here'])
    const answer = await answerPage.page.$eval('#waits pre.command', (e) => e.textContent ?? '')
    const template = await answerPage.page.$eval('#waits pre.answers', (e) => e.textContent ?? '')
    expect(template).to.match(/^answers:\n {2}Q-001: "\.\.\."/)
    await writeFile(path.join(elsewhere, 'answers.yaml'), await readFile(path.join(repoRoot, 'examples', 'one-sentence.answers.yaml')))
    const answered = await runShown(answer)
    expect(answered.code, answered.stderr).to.equal(10)

    const reviewPage = await open(`${url}runs/${paused.run_id}`)
    const review = await reviewPage.page.$eval('#waits pre.command', (e) => e.textContent ?? '')
    expect(review).to.contain('--decision go')
    const alternatives = await reviewPage.page.$$eval('#waits pre.command.alt', (es) => es.map((e) => e.textContent ?? ''))
    expect(alternatives.map((a) => /--decision (\w+)/.exec(a)?.[1])).to.deep.equal(['hold', 'drop'])
    const reviewed = await runShown(review)
    expect(reviewed.code, reviewed.stderr).to.equal(0)
    for (const p of [failedPage, answerPage, reviewPage]) expect(p.problems).to.deep.equal([])
  })

  it('SIGTERM stops the server with exit 0 while slow clients hold connections half-sent; while they do, it still answers', async () => {
    const {url, child} = await startSharedView()
    const port = Number(new URL(url).port)
    const slow = await Promise.all(
      Array.from(
        {length: 50},
        () =>
          new Promise<ReturnType<typeof connect>>((resolve, reject) => {
            const socket = connect(port, '127.0.0.1', () => {
              socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `)
              resolve(socket)
            })
            socket.on('error', reject)
          }),
      ),
    )
    for (const s of slow) s.on('error', () => undefined)
    expect((await raw(url)).status, 'answers while 50 requests are half-sent').to.equal(200)
    const exited = new Promise<[number | null, string | null]>((resolve) => child.on('exit', (code, signal) => resolve([code, signal])))
    child.kill('SIGTERM')
    expect(await exited).to.deep.equal([0, null])
    for (const s of slow) s.destroy()
  })

  it('--host 0.0.0.0 answers the addresses a browser reaches it by (loopback, this machine’s own), and still no other name', async () => {
    const wide = await startSharedView(['--host', '0.0.0.0'])
    await wide.stderrHas('not loopback')
    const port = new URL(wide.url).port
    expect((await raw(`http://127.0.0.1:${port}/`)).status, 'by loopback').to.equal(200)
    expect((await raw(`http://127.0.0.1:${port}/`, {host: `localhost:${port}`})).status, 'as localhost').to.equal(200)
    const lan = Object.values(networkInterfaces())
      .flat()
      .find((a) => a?.family === 'IPv4' && !a.internal)
    if (lan) expect((await raw(`http://${lan.address}:${port}/`)).status, `by ${lan.address}`).to.equal(200)
    expect((await raw(`http://127.0.0.1:${port}/`, {host: `evil.example:${port}`})).status, 'DNS rebinding').to.equal(421)
  })

  it('--open with no browser to open says so and keeps serving', async function () {
    if (process.platform !== 'linux') this.skip() // elsewhere --open asks open or start, not xdg-open
    const fakeBin = path.join(dir, 'bin')
    await mkdir(fakeBin)
    // What xdg-open does on a machine with no browser: a message no one sees, exit 3.
    await writeFile(path.join(fakeBin, 'xdg-open'), '#!/bin/sh\necho "xdg-open: no method available for opening \'$1\'" >&2\nexit 3\n')
    await chmod(path.join(fakeBin, 'xdg-open'), 0o755)
    const {url, printed, stderr, stderrHas} = await startSharedView(['--open'], {PATH: `${fakeBin}${path.delimiter}${process.env.PATH ?? ''}`})
    await stderrHas('could not open a browser')
    // The URL to open by hand is the one printed, with the token that lets that browser decide.
    expect(stderr()).to.contain(`(xdg-open exited 3): open ${printed} yourself`)
    expect((await raw(url)).status).to.equal(200)
  })

  it('an open runs list says so when its server stops, instead of showing stale statuses as live', async function () {
    browserOnly.call(this)
    const runId = ids.twoRoutes
    const {url, child} = await startSharedView()
    const {page} = await open(url)
    expect(await page.$eval(`tr[data-run="${runId}"] .badge`, (b) => b.getAttribute('data-status'))).to.equal('failed')
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    expect(await exited).to.equal(0)
    await page.waitForFunction(() => document.getElementById('live')?.textContent?.startsWith('pipe view stopped answering') === true, {
      timeout: 90000,
      polling: 'mutation',
    })
  })

  it('the stats page draws a rate against 100 %: 1 failed step of 4 is a quarter bar, not the longest bar there is', async () => {
    // The default pipeline offline: the gate fails (1 step of 4), the run asks its questions. The
    // other pipelines of the store have bars of their own: the default's is read by its title.
    const stats = await raw(`${view.url}stats`)
    const chart = /<h3>Step failure rate by pipeline<\/h3>\s*(<svg[^]*?<\/svg>)/.exec(stats.body)?.[1] ?? ''
    expect(chart).to.contain('default: 1 of 4 steps (25%)')
    const bar = Number(/<rect class="bar bad"[^>]* width="(\d+(?:\.\d+)?)"[^>]*><title>default: 1 of 4 steps \(25%\)<\/title>/.exec(chart)?.[1])
    const track = Number(/<rect class="track"[^>]* width="(\d+(?:\.\d+)?)"/.exec(chart)?.[1])
    expect(bar / track).to.be.closeTo(0.25, 0.01)
  })

  it('an open run page says when the run moves on (answered, resumed, ended), without reloading itself', async function () {
    browserOnly.call(this)
    await copyShared()
    const paused = {run_id: ids.paused}
    const {url} = await startView()
    const {page, problems} = await open(`${url}runs/${paused.run_id}`)
    expect(await page.$eval('div#moved', (e) => e.hidden)).to.equal(true)
    const answered = await pipeHere(['answer', paused.run_id, '--file', path.join(repoRoot, 'examples', 'one-sentence.answers.yaml'), '--store', store()], {
      cwd: dir,
    })
    expect(answered.code, answered.stderr).to.equal(10)
    // A poll made while pipe answer ran shows the panel already, saying "running at step compile":
    // wait for the state the run ended in, not for the panel.
    await page.waitForFunction(
      () => document.getElementById('moved')?.hidden === false && /^awaiting input \(updated /.test(document.querySelector('#moved .now')?.textContent ?? ''),
      {timeout: 90000, polling: 'mutation'},
    )
    expect(await page.$eval('#waits pre.command', (e) => e.textContent), 'the page itself is as it was read').to.contain('pipe answer')
    expect(problems).to.deep.equal([])
  })

  it('export --html: - is standard output, a new folder is made, a folder given as the file is a clear error', async () => {
    const runId = ids.twoRoutes
    const from = sharedStore()
    const toStdout = await pipeHere(['export', runId, '--html', '-', '--store', from], {cwd: dir})
    expect(toStdout.code, toStdout.stderr).to.equal(0)
    expect(toStdout.stdout).to.match(/^<!doctype html>\n[^]*<\/html>\n$/)
    expect(toStdout.stdout).to.contain(runId)
    expect(
      await stat(path.join(dir, '-')).then(
        () => 'written',
        () => 'none',
      ),
      'no file named -',
    ).to.equal('none')
    const nested = path.join(dir, 'out', 'tickets', 'run.html')
    const made = await pipeHere(['export', runId, '--html', nested, '--store', from], {cwd: dir})
    expect(made.code, made.stderr).to.equal(0)
    expect(made.stdout).to.equal(`${nested}\n`)
    const sameNonce = (page: string): string => page.replace(/nonce-[A-Za-z0-9+/=]+/g, 'nonce-N').replace(/nonce="[^"]+"/g, 'nonce="N"')
    expect(sameNonce(await readFile(nested, 'utf8')), 'the file is the page - printed').to.equal(sameNonce(toStdout.stdout))
    const folder = await pipeHere(['export', runId, '--html', dir, '--store', from, '--json'], {cwd: dir})
    expect(folder.code).to.equal(2)
    expect(json<{error: {code: string; message: string}}>(folder).error).to.deep.include({
      code: 'E_INVALID_ARGS',
      message: `--html ${dir} is a folder, not a file`,
    })
    const both = await pipeHere(['export', runId, '--html', '-', '--store', from, '--json'], {cwd: dir})
    expect(both.code).to.equal(2)
    expect(json<{error: {code: string}}>(both).error.code).to.equal('E_INVALID_ARGS')
  })

  it('an agent’s tool calls read as written: an edit block keeps its line breaks (not one line of \\n), the JSON as sent a click away', async function () {
    browserOnly.call(this)
    const {url} = view
    const listed = JSON.parse((await raw(`${url}api/runs`)).body) as {runs: Array<{run_id: string; children?: Array<{run_id: string}>}>}
    const task = listed.runs.find((r) => r.run_id === ids.coding)!.children![0]!.run_id
    const {page, problems} = await open(`${url}runs/${task}`)
    const edit = await page.$$eval('details[data-step="implement"] .tool-call', (calls) =>
      calls
        .filter((c) => c.querySelector('code')?.textContent === 'apply_edit_blocks')
        .map((c) => ({readable: c.querySelector('pre.readable')?.textContent ?? '', raw: c.querySelector('details.raw pre')?.textContent ?? ''})),
    )
    expect(edit.length, 'the edit call, in each implement attempt').to.be.greaterThan(0)
    const lines = edit[0]!.readable.split('\n').map((l) => l.trim())
    expect(lines).to.include('<<<<<<< SEARCH')
    expect(lines).to.include('>>>>>>> REPLACE')
    expect(JSON.parse(edit[0]!.raw), 'as sent: the arguments JSON itself').to.have.property('blocks').that.contains('<<<<<<< SEARCH\n')
    const table = await page.$$eval('details[data-step="implement"] table tr', (rows) =>
      rows.filter((r) => r.textContent?.includes('apply_edit_blocks')).map((r) => r.querySelector('pre')?.textContent ?? ''),
    )
    expect(table[0]!.split('\n').map((l) => l.trim())).to.include('<<<<<<< SEARCH')
    expect(problems).to.deep.equal([])
  })

  it('hostile text in a run’s inputs and reasons stays text on the page, in the graph and in the exported file; every bidi control shows as its code point', async function () {
    browserOnly.call(this)
    const r = {run_id: ids.hostile}
    const {url} = view
    const file = path.join(dir, 'say.html')
    expect((await pipeHere(['export', r.run_id, '--html', file, '--store', sharedStore()], {cwd: dir})).code).to.equal(0)
    for (const at of [`${url}runs/${r.run_id}`, url, pathToFileURL(file).href]) {
      const {page, problems} = await open(at)
      const state = await page.evaluate(() => ({
        pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null,
        injected: document.querySelectorAll(
          'main script, main style, main svg:not(.graph):not(.chart):not(.waterfall):not(.swatch):not(.d2h-icon), main a[href^="javascript"]',
        ).length,
        hidden: getComputedStyle(document.querySelector('main')!).display,
        text: document.body.textContent ?? '',
      }))
      expect(state.pwned, at).to.equal(null)
      expect(state.injected, at).to.equal(0)
      expect(state.hidden, at).to.equal('block')
      expect(state.text, at).to.contain('</style></script>]]><script>window.__pwned=1</script>')
      expect(state.text, at).to.contain('a⟨U+061C⟩b c⟨U+2067⟩d⟨U+2069⟩')
      expect(problems, at).to.deep.equal([])
    }
  })

  it('the runs list says when it shows only the newest runs, links to more, and filters among every run, not only those shown', async () => {
    // The newest run is of `other`; the one run of two-routes is older than it (and than others).
    const [older, newer] = [ids.twoRoutes, ids.other]
    const {url} = view
    const rows = (body: string): string[] => [...body.matchAll(/<tr data-run="(R-[^"]+)"/g)].map((m) => m[1]!)
    const first = await raw(`${url}?limit=1`)
    expect(rows(first.body)).to.deep.equal([newer])
    expect(first.body).to.match(/id="more"[^]*href="\/\?limit=2"/)
    const filtered = await raw(`${url}?limit=1&pipeline=two-routes`)
    expect(rows(filtered.body), 'an older run the filter names').to.deep.equal([older])
    expect(filtered.body).to.not.contain('id="more"')
    const whole = await raw(url)
    expect(rows(whole.body)).to.deep.equal(topLevel)
    expect(whole.body, 'which store the list is of').to.contain(`<p class="muted small" id="store">store <code>${sharedStore()}</code></p>`)
    expect(whole.body).to.not.contain('id="more"')
    const api = JSON.parse((await raw(`${url}api/runs?limit=1`)).body) as {runs: Array<{run_id: string}>; more: boolean}
    expect([api.runs.map((r) => r.run_id), api.more]).to.deep.equal([[newer], true])
  })

  it('snapshot show --prompt prints an agent’s conversation once (the last request holds it), not once per turn; a reply as its message', async () => {
    const task = ids.task
    const r = await pipe(['snapshot', 'show', task, '--step', 'implement', '--prompt', '--store', sharedStore()], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    const implementRuns = (r.stdout.match(/^#\d+ implement \(agent\) {2}request 1 of/gm) ?? []).length
    expect(implementRuns, 'two attempts of the task').to.equal(2)
    expect((r.stdout.match(/^--- system$/gm) ?? []).length, 'the system prompt once per attempt').to.equal(implementRuns)
    expect(r.stdout).to.match(
      /request 1 of 3 {2}sha256:[0-9a-f]{64} {2}answered from cassette\n {2}\(its 2 message\(s\) are the first 2 of request 3, below; its reply is the message after them\)\n/,
    )
    expect(r.stdout, 'the reply is what the model said, not the stored envelope').to.not.contain('"finish_reason"')
    const asJson = json<Array<{calls: Array<{request: {messages: unknown[]}}>}>>(
      await pipeHere(['snapshot', 'show', task, '--step', 'implement', '--prompt', '--json', '--store', sharedStore()], {cwd: dir}),
    )
    expect(
      asJson[0]!.calls.map((c) => c.request.messages.length),
      '--json keeps every request whole',
    ).to.deep.equal([2, 4, 6])
  })

  it('a run whose pipeline file changed since draws the path it took as moves, not as moves no route declares', async function () {
    browserOnly.call(this)
    const runId = ids.changed
    const {page, problems} = await open(`${view.url}runs/${runId}`)
    expect(await page.$eval('h2 + p.muted', (p) => p.textContent)).to.equal(
      'the pipeline file two.yaml has changed since this run: the path taken is drawn alone.',
    )
    expect(await page.$$eval('svg.graph path.edge.taken', (es) => es.length)).to.equal(4)
    expect(await page.$$eval('svg.graph path.edge.undeclared', (es) => es.length), 'no edge drawn as undeclared').to.equal(0)
    expect(problems).to.deep.equal([])
  })
})
