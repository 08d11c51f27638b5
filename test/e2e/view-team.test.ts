/**
 * pipe view as a team's operator watches it, on a real PostgreSQL store with real workers, in
 * Debian's chromium-headless-shell: a run followed on its open page and in the runs list from queued
 * to succeeded across a worker killed with SIGKILL and another taking over — the step it is in, on
 * which worker, a lease that ran out no longer shown as held, the worker and queue columns — and a
 * hostile worker name still text. Every wait is for an event (a file, a row, the page's own poll),
 * never a sleep; the dead worker's lease is run out by the test, not by the clock.
 */
import {expect} from 'chai'
import {execFileSync, spawn, type ChildProcess} from 'node:child_process'
import {existsSync} from 'node:fs'
import {readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import puppeteer, {type Browser, type Page} from 'puppeteer-core'
import {json, pipe} from '../helpers/cli.js'
import type {Cluster} from '../helpers/postgres.js'
import {CHROMIUM, closePages, notBlank, open, startView} from '../helpers/view.js'
import {changeIn} from '../helpers/wait.js'
import {saidBy, useWorkerSuite} from '../helpers/workers.js'

/** The second step writes its shell's pid (so the test can end it when its worker is killed) and waits on the FIFO `gate`. */
const HELD = `version: 1
name: held
steps:
  - {id: quick, kind: command, run: [sh, -c, "true"], next: wait}
  - {id: wait, kind: command, run: [sh, -c, "echo $$ > wait.pid.tmp && mv wait.pid.tmp wait.pid && read x < gate"], next: done}
  - {id: done, kind: end, status: succeeded, reason: all steps ran}
`
const POLICY = 'version: 1\nallowed_commands:\n  - [sh, -c, "{arg}"]\nsandbox: off\nmax_retries_default: 0\n'
const HOSTILE_NAME = '<img src=x onerror=window.__pwned=1>w2'

describe('pipe view on a team’s PostgreSQL store: a run followed live across a worker kill', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  const team = useWorkerSuite('pipe-view-team-', (suite) => ({cluster, dir, db, url} = suite))
  let browser: Browser | undefined
  const servers: ChildProcess[] = []
  const writers: ChildProcess[] = []

  before(async function () {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
    browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
  })
  after(async () => browser?.close())
  afterEach(async () => {
    await closePages(browser)
    for (const s of [...servers.splice(0), ...writers.splice(0)]) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
  })

  /** The held step's shell, once a worker has started it (the file is renamed into place whole). */
  const heldStep = async (): Promise<number> => {
    await changeIn(dir, () => existsSync(path.join(dir, 'wait.pid')), 'the held step started')
    return Number((await readFile(path.join(dir, 'wait.pid'), 'utf8')).trim())
  }
  const textOf = (page: Page, selector: string): Promise<string> => page.$eval(selector, (e) => e.textContent?.trim() ?? '')
  const pageSays = (page: Page, selector: string, pattern: RegExp): Promise<unknown> =>
    page.waitForFunction((s: string, p: string) => new RegExp(p).test(document.querySelector(s)?.textContent ?? ''), {timeout: 60000}, selector, pattern.source)

  it('the run page and the runs list follow a run from queued to succeeded while its worker is killed and another takes it over', async () => {
    await writeFile(path.join(dir, 'held.yaml'), HELD)
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    execFileSync('mkfifo', [path.join(dir, 'gate')])
    const detached = await pipe(
      ['run', path.join(dir, 'held.yaml'), '--policy', path.join(dir, 'policy.yaml'), '--detach', '--queue', 'night', '--store', url, '--json'],
      {
        cwd: dir,
      },
    )
    expect(detached.code, detached.stderr).to.equal(0)
    const runId = json<{run_id: string}>(detached).run_id
    const view = await startView(dir, servers, ['--store', url])
    const {page, problems} = await open(browser!, `${view.url}runs/${runId}`)
    const {page: list, problems: listProblems} = await open(browser!, view.url)
    const row = `tr[data-run="${runId}"]`
    expect(await list.$eval(`${row} .badge`, (e) => e.getAttribute('data-status'))).to.equal('pending')
    expect(await textOf(list, `${row} td.queue`)).to.equal('night')
    expect(await textOf(list, `${row} td.worker`)).to.equal('')
    expect(await textOf(page, '#now')).to.equal('Queued: it waits for a worker to take it.')
    expect(await page.$eval('h1 .badge', (e) => e.getAttribute('data-status'))).to.equal('pending')
    await notBlank(browser!, list, 'team-runs-list-queued')

    // The first worker takes it: the page (without a reload) names the step and the worker.
    const first = team.start(url, ['--name', 'w1', '--queue', 'night'], {cwd: dir})
    const firstStep = await heldStep()
    await pageSays(page, '#now', /^Running step wait \(#2\) since \S+ on worker w1 \(host \S+, pid \d+\)$/)
    await page.waitForFunction(() => document.querySelector('svg.graph g.step-node[data-step="wait"] rect.node.running') !== null, {timeout: 60000})
    await pageSays(page, 'h1 .badge', /^running$/)
    await pageSays(list, `${row} td.worker`, /^w1$/)
    await pageSays(list, `${row} .step-now`, /^ at wait$/)
    await notBlank(browser!, page, 'team-run-page-running')

    // Killed: once its lease has run out (the test runs it out) it is shown holding the run no more.
    first.child.kill('SIGKILL')
    await first.exited
    process.kill(firstStep, 'SIGKILL')
    await cluster.sql(db, 'UPDATE pipe_runs SET lease_until = now() WHERE run_id = $1', [runId])
    await pageSays(page, '#now', /^Was running when its process stopped: step wait \(#2\)/)
    await pageSays(list, `${row} td.worker`, /^w1 \(lease ran out\)$/)
    await pageSays(page, 'h1 .badge', /^interrupted$/)
    expect(await list.$eval(`${row} .badge`, (e) => e.getAttribute('data-status'))).to.equal('interrupted')

    // Another worker (a hostile name: text on both pages) takes it over and runs the step again.
    await rm(path.join(dir, 'wait.pid'))
    const second = team.start(url, ['--name', HOSTILE_NAME, '--queue', 'night'], {cwd: dir})
    await heldStep()
    await pageSays(page, '#now', /^Running step wait \(#\d+\) since \S+ on worker <img src=x onerror=window.__pwned=1>w2 \(host/)
    await pageSays(list, `${row} td.worker`, /^<img src=x onerror=window.__pwned=1>w2$/)
    expect(await list.$eval(`${row} .badge`, (e) => e.getAttribute('data-status'))).to.equal('running')
    for (const p of [page, list]) {
      expect(
        await p.evaluate(() => ({pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null, images: document.querySelectorAll('img').length})),
      ).to.deep.equal({
        pwned: null,
        images: 0,
      })
    }

    // Let go: both pages see the run end, by their own polls.
    const writer = spawn('sh', ['-c', 'echo go > "$0"', path.join(dir, 'gate')], {stdio: 'ignore'})
    writers.push(writer)
    await pageSays(page, '#moved .now', /^succeeded \(updated /)
    await pageSays(page, 'h1 .badge', /^succeeded$/)
    await page.waitForFunction(() => document.getElementById('now')?.hidden === true && document.querySelector('svg.graph rect.node.running') === null, {
      timeout: 60000,
    })
    await list.waitForFunction((s: string) => document.querySelector(`${s} .badge`)?.getAttribute('data-status') === 'succeeded', {timeout: 60000}, row)
    await pageSays(list, `${row} td.worker`, /^$/)
    expect(await textOf(list, `${row} td.queue`)).to.equal('night')
    expect(await textOf(list, `${row} td.duration`)).to.match(/^\d+(\.\d)? (ms|s)$|^\d+ min \d+ s$/)
    await saidBy(second, `pipe worker: ${runId} succeeded`)
    await notBlank(browser!, list, 'team-runs-list-ended')
    expect([...problems, ...listProblems]).to.deep.equal([])
  })
})
