/**
 * The runs list and the stats page as an operator reads them, in Debian's chromium-headless-shell:
 * each run's age counted in the page against the server's clock ("N s ago", the time itself on
 * hover), its duration, worker and queue columns, ids that never wrap, hostile text still text; the
 * stats charts with axes, ticks and units, filtered to one pipeline. Nothing that varies with the
 * clock is in a page as served. Screenshots go to test-output/screenshots/.
 *
 * `pipe view` is a process; so is the file's first `pipe run`, the other runs run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import type {ChildProcess} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import puppeteer, {type Browser} from 'puppeteer-core'
import {tempDir} from '../helpers/cli.js'
import {CHROMIUM, closePages, notBlank, open, raw, runHereIn, runIn, startView} from '../helpers/view.js'

const HOSTILE = '<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>'
const pipeline = (name: string, status: string, reason: string): string => `version: 1
name: ${name}
steps:
  - {id: first, kind: noop, next: done}
  - {id: done, kind: end, status: ${status}, reason: ${JSON.stringify(reason)}}
`

describe('the runs list and the stats page for operators', function () {
  this.timeout(120000)
  let dir: string
  let cleanup: () => Promise<void>
  let browser: Browser | undefined
  const servers: ChildProcess[] = []

  before(async function () {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
    browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
  })
  after(async () => browser?.close())
  beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-view-list-')))
  afterEach(async () => {
    await closePages(browser)
    for (const s of servers.splice(0)) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
    await cleanup()
  })

  /** `pipe run FILE` in this process, failed or succeeded. */
  const runHere = (file: string): Promise<{run_id: string; status: string}> => runHereIn(dir, [file], {}, [0, 1])

  /** Three runs, alpha, beta, alpha: the first a process (`firstAsProcess`), the others in this process. */
  async function twoPipelines(firstAsProcess = false): Promise<string[]> {
    // alpha fails with a hostile reason (the list shows a failed run's reason), beta succeeds.
    await writeFile(path.join(dir, 'alpha.yaml'), pipeline('alpha', 'failed', HOSTILE))
    await writeFile(path.join(dir, 'beta.yaml'), pipeline('beta', 'succeeded', 'all ran'))
    const ids: string[] = []
    for (const [index, p] of ['alpha', 'beta', 'alpha'].entries()) {
      const file = path.join(dir, `${p}.yaml`)
      ids.push((index === 0 && firstAsProcess ? await runIn(dir, [file], {}, [0, 1]) : await runHere(file)).run_id)
    }
    return ids
  }

  it('each run’s age is counted in the page from the server’s clock, the time on hover; duration, worker and queue columns; ids never wrap; hostile text stays text', async () => {
    const ids = await twoPipelines(true)
    const {url} = await startView(dir, servers)
    const served = await raw(url)
    expect(served.body, 'the page as served holds no clock').to.not.match(/\d+ (s|min|h|d) ago/)
    const api = JSON.parse((await raw(`${url}api/runs`)).body) as {runs: Array<{run_id: string; created_at: string; ended_at: string}>}
    const {page, problems} = await open(browser!, url)
    expect(await page.$$eval('table.runs th', (th) => th.map((h) => h.textContent?.trim()))).to.deep.equal([
      'run',
      'status',
      'pipeline',
      'feature',
      'created',
      'duration',
      'worker',
      'queue',
      'spec',
      'reason',
    ])
    await page.waitForFunction(() => [...document.querySelectorAll('time.ago')].every((t) => / ago$/.test(t.textContent ?? '')), {timeout: 90000})
    const rows = await page.$$eval('tr[data-run]', (trs) =>
      trs.map((tr) => ({
        run: tr.getAttribute('data-run'),
        ago: tr.querySelector('time.ago')?.textContent,
        title: tr.querySelector('time.ago')?.getAttribute('title'),
        took: tr.querySelector('td.duration')?.textContent?.trim(),
        worker: tr.querySelector('td.worker')?.textContent,
        queue: tr.querySelector('td.queue')?.textContent,
        reason: tr.lastElementChild?.textContent?.trim(),
      })),
    )
    expect(rows.map((r) => r.run)).to.deep.equal([...ids].reverse())
    for (const r of rows) {
      const listed = api.runs.find((a) => a.run_id === r.run)!
      expect(r.ago).to.match(/^\d+ s ago$|^1 min ago$/)
      expect(r.title, 'the time itself on hover').to.equal(listed.created_at)
      const ms = Date.parse(listed.ended_at) - Date.parse(listed.created_at)
      expect(r.took).to.equal(ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`)
      expect(r.worker, 'a folder store has no workers').to.equal('')
      expect(r.queue).to.equal('')
    }
    expect(rows.filter((r) => r.reason === `step done failed: ${HOSTILE}`)).to.have.length(2)
    expect(
      await page.evaluate(() => ({pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null, images: document.querySelectorAll('img').length})),
    ).to.deep.equal({
      pwned: null,
      images: 0,
    })
    // Narrow: the reason wraps, an id, a time or a duration never does.
    await page.setViewport({width: 760, height: 900})
    const lines = await page.$$eval('tr[data-run]', (trs) =>
      trs.flatMap((tr) =>
        ['td:first-child a', 'time.ago', 'td.duration', 'td:nth-child(4) code'].map((s) => {
          const e = tr.querySelector(s)!
          return {what: s, lines: new Set([...e.getClientRects()].map((r) => Math.round(r.top))).size}
        }),
      ),
    )
    expect(lines.filter((l) => l.lines !== 1)).to.deep.equal([])
    await notBlank(browser!, page, 'runs-list-columns')
    await page.setViewport({width: 1280, height: 900})
    expect(problems).to.deep.equal([])
  })

  it('the stats charts have axes with ticks and units; ?pipeline= shows one pipeline’s, the filter still offers every one', async () => {
    await twoPipelines()
    const {url} = await startView(dir, servers)
    const {page, problems} = await open(browser!, `${url}stats`)
    const charts = await page.$$eval('svg.chart', (svgs) =>
      svgs.map((svg) => ({
        title: svg.getAttribute('aria-label'),
        ticks: [...svg.querySelectorAll('.tick-label')].map((t) => t.textContent),
        unit: [...svg.querySelectorAll('.axis-label')].map((t) => t.textContent),
        bars: [...svg.querySelectorAll('.bar-label')].map((t) => t.firstChild?.textContent),
      })),
    )
    const failures = charts.find((c) => c.title === 'Step failure rate by pipeline')!
    expect(failures.ticks).to.deep.equal(['0', '25', '50', '75', '100'])
    expect(failures.unit).to.deep.equal(['steps failed (%)'])
    expect(failures.bars).to.deep.equal(['alpha', 'beta'])
    const steps = charts.find((c) => c.title === 'Steps per run')!
    expect(steps.unit).to.deep.equal(['run, oldest (1) to newest (3)', 'steps'])
    expect(steps.ticks).to.deep.equal(['0', '1', '2', '1', '2', '3'])
    await notBlank(browser!, page, 'stats')
    await page.select('select[name="pipeline"]', 'beta')
    await Promise.all([page.waitForNavigation(), page.click('form.filters button')])
    expect(new URL(page.url()).search).to.equal('?pipeline=beta')
    expect(await page.$eval('h1', (h) => h.textContent)).to.equal('Stats of beta')
    expect(await page.$$eval('select[name="pipeline"] option', (o) => o.map((e) => e.textContent))).to.deep.equal(['any', 'alpha', 'beta'])
    const filtered = await page.$$eval('svg.chart[aria-label="Step failure rate by pipeline"] .bar-label', (t) => t.map((e) => e.firstChild?.textContent))
    expect(filtered).to.deep.equal(['beta'])
    expect(await page.$eval('dl.facts dd', (d) => d.textContent)).to.equal('1')
    expect(problems).to.deep.equal([])
  })
})
