/**
 * pipe view following a run as it goes, in a real browser: a run held in the middle of a step (see
 * helpers/held-step.ts) shows the step it is in on its page and in the runs list, GET
 * /api/runs/RUN/state says the same as JSON, the pages see the run end, and a run page whose
 * server stopped says so. Every wait is for what the page shows (its own poll), never a sleep.
 */
import {expect} from 'chai'
import type {ChildProcess} from 'node:child_process'
import {existsSync} from 'node:fs'
import path from 'node:path'
import puppeteer, {type Browser} from 'puppeteer-core'
import {pipe, tempDir} from '../helpers/cli.js'
import {openGate, prepareHeldStep} from '../helpers/held-step.js'
import {CHROMIUM, closePages, open, raw, startView} from '../helpers/view.js'
import {changeIn} from '../helpers/wait.js'

interface State {
  run_id: string
  status: string
  updated_at: string
  current_step: {step: string; seq: number; since: string; worker: {pid: number}} | null
  version: number
}

describe('pipe view: a run followed as it goes', function () {
  this.timeout(120000)
  let dir: string
  let cleanup: () => Promise<void>
  let browser: Browser | undefined
  const servers: ChildProcess[] = []
  /** The run the test holds: let go and waited for before its folder goes. */
  let running: Promise<unknown> | undefined
  before(async () => {
    if (CHROMIUM) browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
  })
  after(async () => browser?.close())
  beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-view-live-')))
  afterEach(async () => {
    await closePages(browser)
    openGate(dir)
    await running
    for (const s of servers.splice(0)) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
    await cleanup()
  })

  it('shows the running step on the run page and the runs list, and the run ending with its timeline grown in place; a run page whose server stops says so', async function () {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
    const {pipeline, policy} = await prepareHeldStep(dir)
    running = pipe(['run', pipeline, '--policy', policy, '--json', '--store', path.join(dir, '.pipe')], {cwd: dir})
    await changeIn(dir, () => existsSync(path.join(dir, 'started')), 'the waiting step started', running)
    const {url, child} = await startView(dir, servers)
    const listed = JSON.parse((await raw(`${url}api/runs`)).body) as {runs: Array<{run_id: string}>}
    const runId = listed.runs[0]!.run_id

    const state = JSON.parse((await raw(`${url}api/runs/${runId}/state`)).body) as State
    expect(state).to.include({run_id: runId, status: 'running'})
    expect(state.current_step).to.include({step: 'wait', seq: 2})
    expect(state.updated_at).to.equal(state.current_step!.since)
    expect(state.version).to.be.a('number')

    const {page, problems} = await open(browser!, `${url}runs/${runId}`)
    expect(await page.$eval('#now', (e) => (e as HTMLElement).hidden)).to.equal(false)
    expect(await page.$eval('#now', (e) => e.textContent?.trim())).to.match(/^Running step wait \(#2\) since \S+ on \(host \S+, pid \d+\)$/)
    const bars = (): Promise<number> => page.$$eval('#waterfall svg:not(.swatch) rect.bar', (all) => all.length)
    const barsBefore = await bars()
    const {page: list} = await open(browser!, url)
    expect(await list.$eval(`tr[data-run="${runId}"] .step-now`, (e) => e.textContent)).to.equal(' at wait')

    expect(openGate(dir), 'the step waits on the gate').to.equal(true)
    expect(((await running) as {code: number}).code).to.equal(0)
    // A poll made while the run was still between steps shows the panel already: wait for the end.
    await page.waitForFunction(
      () =>
        document.getElementById('moved')?.hidden === false &&
        document.getElementById('now')?.hidden === true &&
        /^succeeded \(updated /.test(document.querySelector('#moved .now')?.textContent ?? ''),
      {timeout: 90000},
    )
    // The timeline grew on the page as it stood, without a reload: the steps after the held one are drawn.
    await page.waitForFunction((n) => document.querySelectorAll('#waterfall svg:not(.swatch) rect.bar').length > n, {timeout: 90000}, barsBefore)
    expect(await page.$eval('#moved', (e) => (e as HTMLElement).hidden), 'the page was not reloaded').to.equal(false)
    await list.waitForFunction(
      (id) => document.querySelector(`tr[data-run="${id}"] .badge`)?.getAttribute('data-status') === 'succeeded',
      {timeout: 90000},
      runId,
    )
    expect(await list.$eval(`tr[data-run="${runId}"] .step-now`, (e) => e.textContent)).to.equal('')
    const ended = JSON.parse((await raw(`${url}api/runs/${runId}/state`)).body) as State
    expect(ended.current_step).to.equal(null)
    expect(ended.version).to.be.greaterThan(state.version)

    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
    child.kill('SIGTERM')
    expect(await exited).to.equal(0)
    await page.waitForFunction(() => document.getElementById('said')?.hidden === false, {timeout: 90000})
    expect(await page.$eval('#said', (e) => e.textContent)).to.match(/^pipe view stopped answering: this page is as of /)
    expect(problems.filter((p) => !/Failed to load resource|ERR_CONNECTION_REFUSED/.test(p))).to.deep.equal([])
  })
})
