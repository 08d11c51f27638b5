/**
 * The run page's graph as an operator reads it, in Debian's chromium-headless-shell: a foreach's
 * child runs fanned out under it (each a node linking to its page, in its status's colour; past five,
 * one "+N more" node linking to the list), hostile item names still text in those nodes, and the
 * step running now marked, the mark moving as the run goes, without a reload. Every wait is for
 * what the page shows (its own poll), never a sleep. Screenshots go to test-output/screenshots/.
 */
import {expect} from 'chai'
import {execFileSync, spawn, type ChildProcess} from 'node:child_process'
import {existsSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import puppeteer, {type Browser, type Page} from 'puppeteer-core'
import {pipe, tempDir} from '../helpers/cli.js'
import {CHROMIUM, closePages, notBlank, open, runIn, startView} from '../helpers/view.js'
import {changeIn} from '../helpers/wait.js'

const HOSTILE = '<script>window.__pwned=1</script>'
const ITEMS = ['a', 'b', HOSTILE, 'javascript:window.__pwned=2', '<img src=x onerror=window.__pwned=3>', 'f', 'g', 'h']

/** A foreach of eight items (three of them hostile names), and routes back to it (not taken): a back-edge with its label. */
function fanOut(): string {
  return `version: 1
name: fan
steps:
  - id: each
    kind: foreach
    items: '\${{ ${JSON.stringify(ITEMS)} }}'
    concurrency: 1
    next: check
    steps:
      - {id: work, kind: noop}
  - {id: check, kind: noop, next: done, max_iterations: 2, on: {denied: each, error: each}}
  - {id: done, kind: end, status: succeeded, reason: all items ran}
`
}

/** Two steps each held on a FIFO of its own: the test lets the run go on one step at a time. */
const TWO_HELD = `version: 1
name: two-held
steps:
  - {id: first, kind: command, run: [sh, -c, "touch first.started && read x < gate1"], next: second}
  - {id: second, kind: command, run: [sh, -c, "touch second.started && read x < gate2"], next: done}
  - {id: done, kind: end, status: succeeded, reason: both ran}
`
const POLICY = 'version: 1\nallowed_commands:\n  - [sh, -c, "{arg}"]\nsandbox: off\nmax_retries_default: 0\n'

/**
 * Lets a step held on `fifo` go on: a writer that blocks until the step opens the FIFO to read (so
 * nothing races the step's own open), which afterEach kills when no reader ever came.
 */
const writers: ChildProcess[] = []
function release(fifo: string): Promise<number | null> {
  const child = spawn('sh', ['-c', 'echo go > "$0"', fifo], {stdio: 'ignore'})
  writers.push(child)
  return new Promise((resolve) => child.on('exit', (code) => resolve(code)))
}

interface Box {
  x: number
  y: number
  w: number
  h: number
  what: string
}

/** Every node's box and every edge label's box of the page's graph, and the edges passing through a box. */
function graphGeometry(page: Page): Promise<{boxes: Box[]; labels: Box[]; crossings: string[]}> {
  // No function declared inside: the test's transform would name it with a helper the page lacks.
  return page.evaluate(() => {
    const boxes = [...document.querySelectorAll<SVGRectElement>('svg.graph rect.node')].map((r) => {
      const b = r.getBBox()
      const at = r.closest('[data-step]')
      return {x: b.x, y: b.y, w: b.width, h: b.height, what: at?.getAttribute('data-run') ?? at?.getAttribute('data-step') ?? 'end'}
    })
    const labels = [...document.querySelectorAll<SVGTextElement>('svg.graph .edge-label')].map((t) => {
      const b = t.getBBox()
      return {x: b.x, y: b.y, w: b.width, h: b.height, what: `label ${t.textContent}`}
    })
    const crossings: string[] = []
    for (const e of document.querySelectorAll<SVGPathElement>('svg.graph path.edge')) {
      const length = e.getTotalLength()
      for (let at = 6; at < length - 6; at += 3) {
        const p = e.getPointAtLength(at)
        const inside = boxes.find((b) => p.x > b.x + 3 && p.x < b.x + b.w - 3 && p.y > b.y + 3 && p.y < b.y + b.h - 3)
        if (inside) {
          crossings.push(`${e.getAttribute('data-from')} → ${e.getAttribute('data-to')} through ${inside.what}`)
          break
        }
      }
    }
    return {boxes, labels, crossings}
  })
}

const overlaps = (a: Box, b: Box): boolean => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h

describe('the run page’s graph: a foreach fanned out, the running step marked', function () {
  this.timeout(120000)
  let dir: string
  let cleanup: () => Promise<void>
  let browser: Browser | undefined
  const servers: ChildProcess[] = []
  let running: Promise<unknown> | undefined

  before(async function () {
    if (!CHROMIUM) this.skip() // .ci/run installs chromium-headless-shell
    browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
  })
  after(async () => browser?.close())
  beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-view-graph-')))
  afterEach(async () => {
    await closePages(browser)
    if (running) for (const gate of ['gate1', 'gate2']) void release(path.join(dir, gate))
    await running
    running = undefined
    for (const w of writers.splice(0)) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL')
    for (const s of servers.splice(0)) if (s.exitCode === null && s.signalCode === null) s.kill('SIGKILL')
    await cleanup()
  })

  it('draws a foreach’s child runs under it, five and "+3 more", each linking to its page in its status’s colour; hostile item names stay text', async () => {
    await writeFile(path.join(dir, 'fan.yaml'), fanOut())
    const {run_id: runId} = await runIn(dir, [path.join(dir, 'fan.yaml')])
    const {url} = await startView(dir, servers, [runId])
    const {page, problems} = await open(browser!, url)
    const fan = await page.evaluate(() => ({
      children: [...document.querySelectorAll('svg.graph g.fan-child')].map((g) => ({
        step: g.getAttribute('data-step'),
        run: g.getAttribute('data-run'),
        cls: g.getAttribute('class'),
        href: g.closest('a')?.getAttribute('href'),
        label: g.querySelector('.child-label')?.textContent,
        stroke: getComputedStyle(g.querySelector('rect')!).stroke,
        x: g.querySelector('rect')!.x.baseVal.value,
      })),
      more: [...document.querySelectorAll('svg.graph g.fan-more')].map((g) => ({text: g.textContent, href: g.closest('a')?.getAttribute('href')})),
      moreX: document.querySelector<SVGRectElement>('svg.graph g.fan-more rect')?.x.baseVal.value ?? 0,
      ok: getComputedStyle(document.documentElement).getPropertyValue('--ok').trim(),
      pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null,
      images: document.querySelectorAll('img').length,
      legend: document.querySelector('.graph-legend')?.textContent,
      listed: !!document.getElementById('child-runs'),
    }))
    expect(fan.children.map((c) => c.label)).to.deep.equal(['#0 a', '#1 b', '#2 <script>window…', '#3 javascript:win…', '#4 <img src=x one…'])
    for (const c of fan.children) {
      expect(c.step).to.equal('each')
      expect(c.href).to.equal(`/runs/${c.run}`)
      expect(c.cls).to.include('s-succeeded')
      expect(c.stroke, 'the colour of succeeded').to.equal('rgb(26, 127, 55)')
    }
    const xs = [...fan.children.map((c) => c.x), fan.moreX]
    expect(xs, 'left to right in item order, "+3 more" last').to.deep.equal([...xs].sort((a, b) => a - b))
    expect(fan.more).to.deep.equal([{text: '3 more child run(s) of each: see the list of child runs+3 more', href: '#child-runs'}])
    expect(fan.listed, 'the list the "+3 more" node links to').to.equal(true)
    expect(fan.pwned).to.equal(null)
    expect(fan.images).to.equal(0)
    expect(fan.legend).to.include('running now').and.include('child run succeeded')
    // A child node opens its run's page.
    const first = fan.children[0]!.run!
    await Promise.all([page.waitForNavigation(), page.click(`svg.graph g.fan-child[data-run="${first}"]`)])
    expect(new URL(page.url()).pathname).to.equal(`/runs/${first}`)
    await page.goBack()
    // Nothing drawn on anything else: no edge through a node, no node or label on another.
    const geometry = await graphGeometry(page)
    expect(geometry.crossings, 'edges through a node').to.deep.equal([])
    expect(geometry.labels.map((l) => l.what)).to.include('label denied, error')
    const clashes: string[] = []
    const all = [...geometry.boxes, ...geometry.labels]
    all.forEach((a, i) => all.slice(i + 1).forEach((b) => overlaps(a, b) && clashes.push(`${a.what} on ${b.what}`)))
    expect(clashes, 'nodes or labels drawn on one another').to.deep.equal([])
    await notBlank(browser!, page, 'graph-foreach-fan')
    expect(problems).to.deep.equal([])
  })

  it('marks the step running now and moves the mark as the run goes, without a reload; a run that ended has none', async () => {
    await writeFile(path.join(dir, 'two.yaml'), TWO_HELD)
    await writeFile(path.join(dir, 'policy.yaml'), POLICY)
    for (const gate of ['gate1', 'gate2']) execFileSync('mkfifo', [path.join(dir, gate)])
    running = pipe(['run', path.join(dir, 'two.yaml'), '--policy', path.join(dir, 'policy.yaml'), '--json', '--store', path.join(dir, '.pipe')], {cwd: dir})
    await changeIn(dir, () => existsSync(path.join(dir, 'first.started')), 'the first step started', running)
    const {url} = await startView(dir, servers)
    const {page: list} = await open(browser!, url)
    const runId = await list.$eval('tr[data-run]', (e) => e.getAttribute('data-run')!)
    const {page, problems} = await open(browser!, `${url}runs/${runId}`)
    const marked = (): Promise<string[]> =>
      page.$$eval('svg.graph g.step-node', (nodes) =>
        nodes
          .filter((n) => n.querySelector('rect.node')?.classList.contains('running'))
          .map((n) => `${n.getAttribute('data-step')}: ${n.querySelector('.node-kind')?.textContent}`),
      )
    expect(await marked()).to.deep.equal(['first: running now'])
    await notBlank(browser!, page, 'graph-running-step')

    expect(await release(path.join(dir, 'gate1')), 'the first step read its gate').to.equal(0)
    await page.waitForFunction(() => document.querySelector('svg.graph g.step-node[data-step="second"] rect.node.running') !== null, {timeout: 90000})
    expect(await marked()).to.deep.equal(['second: running now'])
    expect(await page.$eval('svg.graph g.step-node[data-step="first"] .node-kind', (e) => e.textContent)).to.equal('command')

    expect(await release(path.join(dir, 'gate2')), 'the second step read its gate').to.equal(0)
    expect(((await running) as {code: number}).code).to.equal(0)
    await page.waitForFunction(() => document.querySelector('svg.graph rect.node.running') === null, {timeout: 90000})
    const {page: ended} = await open(browser!, `${url}runs/${runId}`)
    expect(await ended.$$eval('svg.graph rect.node.running', (r) => r.length)).to.equal(0)
    expect(problems).to.deep.equal([])
  })
})
