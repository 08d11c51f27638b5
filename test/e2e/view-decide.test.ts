/**
 * Issue 41 item 6: decisions from pipe view's run page. A review, answers and a confirmation given
 * on the page in Debian's chromium-headless-shell are recorded exactly as the commands record them
 * (compared field by field with runs decided by the CLI, times aside), plus via: view; a POST
 * without the server's token or the form's CSRF token is refused and records nothing (plain HTTP
 * requests); and the commands a page offers name the store the view reads, a PostgreSQL URL too.
 *
 * `pipe view` is a process, as are the file's first `run`, `answer`, `review`, `keys generate` and
 * `confirm`; the other commands run in this process (test/helpers/pipe-here.ts: the same command
 * from argv, its output and exit code), beside the view, one at a time.
 */
import {expect} from 'chai'
import {execFileSync, type ChildProcess} from 'node:child_process'
import {existsSync} from 'node:fs'
import {cp, mkdir, readFile, writeFile} from 'node:fs/promises'
import {request} from 'node:http'
import path from 'node:path'
import puppeteer, {type Browser, type Page} from 'puppeteer-core'
import {parse, stringify} from 'yaml'
import {defaultPipeline, examples, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {confirmedPipeline} from '../helpers/decisions.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {startCluster, type Cluster} from '../helpers/postgres.js'
import {expectAuditPasses, madeOnce, readIn} from '../helpers/stores.js'
import {CHROMIUM, closePages, notBlank, open as openIn, raw, shotOf, startView, type Started} from '../helpers/view.js'
import type {RunEvent, RunRecord} from '../../src/types/run.js'

const sentence = path.join(examples, 'one-sentence.txt')
const answersFile = path.join(examples, 'one-sentence.answers.yaml')
const POLICY = `version: 1\nallowed_commands:\n  - [node, -e, "..."]\n`
const ONE_STEP = confirmedPipeline('confirm-one', 'the person said no')

let dir: string
let cleanup: () => Promise<void>
const servers: ChildProcess[] = []
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-view-decide-'))
})
afterEach(async () => {
  for (const s of servers.splice(0)) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
  await cleanup()
})

const store = (): string => path.join(dir, '.pipe')
/** `pipe ARGS --json --store dir/.pipe`: its JSON, in this process or (`command` pipe) as a process. */
const cli = (args: string[], codes = [0, 10], command: typeof pipeHere = pipeHere): Promise<unknown> =>
  command([...args, '--json', '--store', store()], {cwd: dir, env: {PIPE_INTERACTIVE: '0'}}).then((r) => {
    expect(codes, `${args.join(' ')}: ${r.stderr}`).to.include(r.code)
    return json(r)
  })
const started = (args: string[] = []): Promise<Started> => startView(dir, servers, args)
async function record(runId: string): Promise<RunRecord> {
  return JSON.parse(await readFile(path.join(store(), 'runs', runId, 'run.json'), 'utf8')) as RunRecord
}
async function events(runId: string): Promise<RunEvent[]> {
  return (await readFile(path.join(store(), 'runs', runId, 'events.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as RunEvent)
}
/** A person's record with what varies between runs (the time) and where it was given set aside. */
function decided<T extends {at?: string; via?: string}>(r: T | undefined): Omit<T, 'at' | 'via'> {
  expect(r, 'a decision was recorded').to.not.equal(undefined)
  const {at: _at, via: _via, ...rest} = r!
  return rest
}
/** The timeline lines a person's input wrote, without their times and the hashes that chain them to their run. */
async function given(runId: string, kinds: string[]): Promise<Array<Omit<RunEvent, 'at'>>> {
  return (await events(runId))
    .filter((e) => kinds.includes(e.event))
    .map((e) => {
      const {at: _at, ...rest} = e
      for (const chained of ['hash', 'prev', 'run_state']) delete (rest as Record<string, unknown>)[chained]
      return rest
    })
}
function withoutVia(lines: Array<Omit<RunEvent, 'at'>>): Array<Omit<RunEvent, 'at' | 'via'>> {
  return lines.map(({via, ...rest}) => {
    expect(via).to.equal('view')
    return rest
  })
}

/** A plain POST with the headers given (no browser: no cookie, no form unless given). */
function post(url: string, body: string, headers: Record<string, string> = {}): Promise<{status: number; body: string}> {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const req = request(
      {hostname: u.hostname, port: u.port, path: u.pathname, method: 'POST', headers: {'content-type': 'application/x-www-form-urlencoded', ...headers}},
      (res) => {
        let text = ''
        res.on('data', (d: Buffer) => (text += d.toString()))
        res.on('end', () => resolve({status: res.statusCode ?? 0, body: text}))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** The cookie a browser keeps after opening the URL pipe view printed: from the server's own answer. */
async function tokenCookie(view: Started): Promise<string> {
  const r = await raw(view.printed)
  expect(r.status).to.equal(303)
  const set = String((r.headers['set-cookie'] as string[])[0])
  expect(set).to.match(/; HttpOnly; SameSite=Strict; Path=\/$/)
  return set.split(';')[0]!
}

/** The fields of a run page's decision form, as a browser holding `cookie` is served it. */
async function formOf(view: Started, runId: string, cookie: string): Promise<Record<string, string>> {
  const page = (await rawWith(`${view.url}runs/${runId}`, cookie)).body
  const field = (name: string): string => new RegExp(`name="${name}" value="([^"]*)"`).exec(page)?.[1] ?? ''
  return {kind: field('kind'), shown: field('shown'), csrf: field('csrf')}
}
function rawWith(url: string, cookie: string): Promise<{status: number; body: string}> {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const req = request({hostname: u.hostname, port: u.port, path: u.pathname, headers: {cookie}}, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => (text += d.toString()))
      res.on('end', () => resolve({status: res.statusCode ?? 0, body: text}))
    })
    req.on('error', reject)
    req.end()
  })
}

describe('decisions from pipe view’s run page', function () {
  this.timeout(240000)
  let browser: Browser | undefined
  before(async () => {
    if (CHROMIUM) browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
  })
  after(async () => browser?.close())
  afterEach(async () => closePages(browser))
  const browserOnly = function (this: Mocha.Context): void {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
  }
  const open = (url: string): Promise<{page: Page; problems: string[]}> => openIn(browser!, url)
  const paused = async (): Promise<string> =>
    json<{run_id: string}>(await pipeHere(['run', defaultPipeline, '--input', sentence, '--json', '--store', store()], {cwd: dir})).run_id
  /**
   * Two runs of the default pipeline paused at its questions, made once (in a folder of its own, their
   * working folder) and copied into the test's folder. Only tests that never publish from them share
   * them but the one that publishes both: a store numbers its published versions itself, so two
   * copies publishing the same run into that one working folder would clash. The first is the
   * file's first `run`, a process; the second runs in this process.
   */
  const twoPaused = madeOnce(async (at): Promise<[string, string]> => {
    const one = async (command: typeof pipeHere): Promise<string> =>
      json<{run_id: string}>(await command(['run', defaultPipeline, '--input', sentence, '--json', '--store', path.join(at, '.pipe')], {cwd: at})).run_id
    return [await one(pipe), await one(pipeHere)]
  })

  it('answers and a review given on the page are recorded as pipe answer and pipe review record them, by the OS user, via view', async function () {
    browserOnly.call(this)
    const [onPage, byCli] = await twoPaused(dir)
    const view = await started()
    const {page, problems} = await open(view.printed.replace('/?', `/runs/${onPage}?`))
    expect(page.url(), 'the token left the address bar for a cookie').to.equal(`${view.url}runs/${onPage}`)
    const wanted = (parse(await readFile(answersFile, 'utf8')) as {answers: Record<string, string>}).answers
    const pending = (await record(onPage)).pending!
    for (const q of pending.questions ?? []) await page.type(`#decide textarea[data-question="${q.id}"]`, wanted[q.field!]!)
    await shotOf(page, '#decide', 'decide-answers-form')
    await Promise.all([page.waitForNavigation(), page.click('#decide button[type=submit]')])
    if ((await page.$('#decided')) === null) throw new Error(await page.$eval('main', (e) => e.textContent ?? ''))
    expect(await page.$eval('#decided', (e) => e.getAttribute('data-status'))).to.equal('awaiting_input')
    // The page answers each question by its id: so does the answers file of the run the CLI continues.
    const byId = Object.fromEntries((pending.questions ?? []).map((q) => [q.id, wanted[q.field!]!]))
    await writeFile(path.join(dir, 'by-id.yaml'), stringify({answers: byId}))
    await cli(['answer', byCli, '--file', path.join(dir, 'by-id.yaml')], [0, 10], pipe)
    expect((await record(onPage)).answers).to.deep.equal((await record(byCli)).answers)
    expect(withoutVia(await given(onPage, ['answers_given']))).to.deep.equal(await given(byCli, ['answers_given']))

    await page.goto(`${view.url}runs/${onPage}`)
    await page.type('#decide textarea[name=note]', 'matches the brief')
    await notBlank(browser!, page, 'decide-review-page')
    await shotOf(page, '#decide', 'decide-review-form')
    await Promise.all([page.waitForNavigation(), page.click('#decide button[value=go]')])
    await shotOf(page, 'body', 'decide-review-done')
    expect(await page.$eval('#decided', (e) => e.textContent ?? '')).to.match(/review go for run R-\d{8}-\d{4}, by \S+ via view\. The run is now\s+succeeded/)
    await cli(['review', byCli, '--decision', 'go', '--note', 'matches the brief'], [0, 10], pipe)
    const [a, b] = [await record(onPage), await record(byCli)]
    expect(a.review?.via).to.equal('view')
    expect(b.review?.via, 'the CLI records no via').to.equal(undefined)
    expect(decided(a.review)).to.deep.equal(decided(b.review))
    expect(a.status).to.equal(b.status)
    expect(withoutVia(await given(onPage, ['review_given']))).to.deep.equal(await given(byCli, ['review_given']))
    // The records still verify: pipe audit verify would exit 0.
    await expectAuditPasses(dir, onPage)
    expect(problems).to.deep.equal([])
  })

  it('a decision given on the page is signed with the key of the person running pipe view, as the commands sign theirs (issue 39)', async () => {
    const config = path.join(dir, 'config')
    const made = await pipe(['keys', 'generate', '--json'], {cwd: dir, env: {XDG_CONFIG_HOME: config}})
    expect(made.code, made.stderr).to.equal(0)
    const keyId = json<{id: string}>(made).id
    const runId = await paused()
    // Answered on the command line by someone without a key: recorded unsigned.
    await cli(['answer', runId, '--file', answersFile])
    const view = await startView(dir, servers, [], {XDG_CONFIG_HOME: config})
    const cookie = await tokenCookie(view)
    const form = await formOf(view, runId, cookie)
    expect(form.kind).to.equal('review')
    const answer = await post(`${view.url}runs/${runId}/decide`, new URLSearchParams({...form, decision: 'go'}).toString(), {cookie})
    expect(answer.status, answer.body).to.be.below(400)
    const lines = await events(runId)
    expect(lines.find((e) => e.event === 'answers_given')?.signed).to.equal(undefined)
    const review = lines.find((e) => e.event === 'review_given')
    expect(review?.via).to.equal('view')
    expect(review?.signed).to.deep.include({run_id: runId, decision: 'go'})
    expect(review?.signed?.signature.key_id).to.equal(keyId)
    // The signature verifies: pipe audit verify would exit 0.
    await expectAuditPasses(dir, runId)
  })

  it('a confirmation given on the page runs the step as pipe confirm does, and is recorded the same', async function () {
    browserOnly.call(this)
    execFileSync('git', ['init', '-q', dir])
    await writeFile(path.join(dir, 'p.yaml'), ONE_STEP)
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    const onPage = (await cli(['run', 'p.yaml', '--policy', 'policy.yaml'])) as {run_id: string}
    const view = await started()
    const {page, problems} = await open(view.printed.replace('/?', `/runs/${onPage.run_id}?`))
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
    // A step's own confirmation is said as the step's, not as an agent's tool call.
    const asked = await page.$eval('body', (b) => b.textContent ?? '')
    expect(asked).to.match(/Step \S+ asks to run \(/)
    expect(asked).to.not.contain('The agent asks')
    await page.type('#decide textarea[name=note]', 'looked at it')
    await notBlank(browser!, page, 'decide-confirm-page')
    await shotOf(page, '#decide', 'decide-confirm-form')
    await Promise.all([page.waitForNavigation(), page.click('#decide button[value=yes]')])
    await shotOf(page, 'body', 'decide-confirm-done')
    expect(await page.$eval('#decided', (e) => e.getAttribute('data-status'))).to.equal('succeeded')
    expect(await readFile(path.join(dir, 'made.txt'), 'utf8'), 'the step ran').to.equal('ran')
    const byCli = (await cli(['run', 'p.yaml', '--policy', 'policy.yaml'])) as {run_id: string}
    await cli(['confirm', byCli.run_id, '--yes', '--note', 'looked at it'], [0, 10], pipe)
    const [a, b] = [await record(onPage.run_id), await record(byCli.run_id)]
    expect(a.confirmation?.via).to.equal('view')
    expect(decided(a.confirmation)).to.deep.equal(decided(b.confirmation))
    expect(withoutVia(await given(onPage.run_id, ['confirm_given']))).to.deep.equal(await given(byCli.run_id, ['confirm_given']))
    expect(problems).to.deep.equal([])
  })

  it('a hostile question stays text in the answer form: no script runs, no element is injected, the form keeps one box per question', async function () {
    browserOnly.call(this)
    await cp(path.join(repoRoot, 'pipelines'), path.join(dir, 'pipelines'), {recursive: true})
    const hostile = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"></textarea></label></form><button form=x>evil</button>`
    const file = path.join(dir, 'pipelines', 'default.yaml')
    const rule = '      - {id: p0, path: "features[*].priority", required: true, message: every feature needs a priority}\n'
    // A gate rule's message is the question the offline provider asks about a field it has no question of its own for.
    await writeFile(
      file,
      (await readFile(file, 'utf8')).replace(rule, `${rule}      - {id: evil, path: out_of_scope, min_items: 1, message: ${JSON.stringify(hostile)}}\n`),
    )
    const runId = json<{run_id: string}>(await pipeHere(['run', file, '--input', sentence, '--json', '--store', store()], {cwd: dir})).run_id
    const view = await started()
    const {page, problems} = await open(view.printed.replace('/?', `/runs/${runId}?`))
    const state = await page.evaluate(() => ({
      pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null,
      images: document.querySelectorAll('img').length,
      buttons: [...document.querySelectorAll('#decide button')].map((b) => b.textContent),
      boxes: [...document.querySelectorAll('#decide textarea')].map((t) => t.getAttribute('data-question')),
      text: document.querySelector('#decide')?.textContent ?? '',
    }))
    expect(state.pwned).to.equal(null)
    expect(state.images).to.equal(0)
    expect(state.buttons).to.deep.equal(['Answer'])
    expect(state.boxes).to.deep.equal(['Q-001', 'Q-002', 'Q-003', 'Q-004'])
    expect(state.text).to.contain(hostile)
    expect(problems).to.deep.equal([])
  })

  it('a POST without the token, without the form’s CSRF token, from another origin or for a request that changed is refused and records nothing; --read-only has no forms and no POST', async () => {
    // It answers the run by the CLI, never reviews it: nothing is published.
    const [runId] = await twoPaused(dir)
    const view = await started()
    expect(view.token, 'the URL printed carries a token').to.match(/^[\w-]{32}$/)
    const decide = `${view.url}runs/${runId}/decide`
    expect((await raw(`${view.url}?view_token=not-this-servers`)).headers['set-cookie'], 'a wrong token sets nothing').to.equal(undefined)
    const cookie = await tokenCookie(view)
    const form = await formOf(view, runId, cookie)
    expect(form.kind).to.equal('answers')
    const before = await readFile(path.join(store(), 'runs', runId, 'run.json'), 'utf8')
    const body = (f: Record<string, string>): string => new URLSearchParams({...f, 'answer:Q-001': 'x'}).toString()

    const noToken = await post(decide, body(form))
    expect(noToken.status).to.equal(403)
    expect(noToken.body).to.contain('does not hold the server&#39;s token')
    expect((await post(decide, body({...form, csrf: ''}), {cookie})).status, 'no CSRF token').to.equal(403)
    expect((await post(decide, body({...form, csrf: `${form.csrf}x`}), {cookie})).status, 'a wrong CSRF token').to.equal(403)
    expect((await post(decide, body({...form, shown: 'sha256:0'}), {cookie})).status, 'a CSRF token is bound to what was shown').to.equal(403)
    expect((await post(decide, body(form), {cookie: 'pipe_view_1=x'})).status, 'another cookie').to.equal(403)
    expect((await post(decide, body(form), {cookie, origin: 'http://evil.example'})).status, 'another site’s page').to.equal(403)
    expect(await readFile(path.join(store(), 'runs', runId, 'run.json'), 'utf8'), 'nothing was recorded').to.equal(before)

    // The run moves on (the CLI answers it): the form drawn for its questions is refused, not applied to the review it waits for now.
    await cli(['answer', runId, '--file', answersFile])
    const moved = await readFile(path.join(store(), 'runs', runId, 'run.json'), 'utf8')
    const stale = await post(decide, body(form), {cookie})
    expect(stale.status, stale.body).to.equal(409)
    expect(stale.body).to.contain('Nothing was recorded')
    expect(await readFile(path.join(store(), 'runs', runId, 'run.json'), 'utf8')).to.equal(moved)

    const readOnly = await started(['--read-only'])
    expect(readOnly.token).to.equal(undefined)
    expect(readOnly.printed).to.not.contain('view_token')
    expect((await raw(`${readOnly.url}runs/${runId}`)).body).to.not.contain('<form class="panel decide"')
    expect(
      (await post(`${readOnly.url}runs/${runId}/decide`, body(form), {cookie: cookie.replace(/^pipe_view_\d+/, `pipe_view_${new URL(readOnly.url).port}`)}))
        .status,
    ).to.equal(405)
  })
})

describe('pipe view on a PostgreSQL store', function () {
  this.timeout(180000)
  let cluster: Cluster
  before(async function () {
    cluster = await startCluster(this)
  })
  after(async () => cluster?.stop())

  it('the commands a page offers and the runs page name the database, its password left out, never a local folder; copied, the command runs', async () => {
    const url = cluster.url(await cluster.createDatabase())
    // The cluster trusts local connections: a password in the URL is ignored by the server, and must never be shown.
    const secret = url.replace('postgres@', 'postgres:hunter2-not-shown@')
    const run = json<{run_id: string; status: string}>(await pipeHere(['run', defaultPipeline, '--input', sentence, '--json', '--store', secret], {cwd: dir}))
    expect(run.status).to.equal('awaiting_input')
    const view = await startView(dir, servers, ['--store', secret])
    const runPage = (await raw(`${view.url}runs/${run.run_id}`)).body
    const command = /<pre class="command">([^<]*)<\/pre>/.exec(runPage)?.[1] ?? ''
    expect(command).to.equal(`pipe answer ${run.run_id} --file answers.yaml --store ${url}`)
    const runsPage = (await raw(view.url)).body
    expect(/<p class="muted small" id="store">store <code>([^<]*)<\/code>/.exec(runsPage)?.[1]).to.equal(url)
    for (const body of [runPage, runsPage]) {
      expect(body).to.not.contain('hunter2')
      expect(body).to.not.match(/stores\/[0-9a-f]{16}/)
    }
    const elsewhere = path.join(dir, 'elsewhere')
    await mkdir(elsewhere)
    await writeFile(path.join(elsewhere, 'answers.yaml'), await readFile(answersFile))
    const answered = await pipeHere(command.slice('pipe '.length).split(/\s+/), {cwd: elsewhere})
    expect(answered.code, answered.stderr).to.equal(10)
    expect(await readIn(url, async (s) => (await s.readRun(run.run_id)).pending?.kind)).to.equal('review')
  })
})
