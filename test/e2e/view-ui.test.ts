/**
 * The run page as an operator reads it, in a real headless browser: an edit step's change drawn as a
 * diff (file name, line numbers, the lines removed and added), a timeline with a bar per step and
 * per foreach item, and a hostile diff that stays text. Screenshots go to the test's folder.
 */
import {expect} from 'chai'
import type {ChildProcess} from 'node:child_process'
import {execFileSync} from 'node:child_process'
import {cp, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import puppeteer, {type Browser} from 'puppeteer-core'
import {examples, json, pipe, tempDir} from '../helpers/cli.js'
import {CHROMIUM, closePages, notBlank, open, shotOf, startView} from '../helpers/view.js'

let dir: string
let cleanup: () => Promise<void>
let browser: Browser | undefined
const servers: ChildProcess[] = []

before(async function () {
  if (!CHROMIUM) return
  browser = await puppeteer.launch({executablePath: CHROMIUM, headless: 'shell', args: ['--no-sandbox', '--disable-gpu', '--no-first-run']})
})
after(async () => {
  await browser?.close()
})
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-view-ui-'))
})
afterEach(async () => {
  await closePages(browser)
  for (const s of servers.splice(0)) if (s.exitCode === null) s.kill('SIGKILL')
  await cleanup()
})

/** The coding example on a scratch repository (its edit step fixes add()), or with `blocks` as its edit. */
async function codingRun(blocks?: string): Promise<string> {
  const repo = path.join(dir, 'repo')
  await cp(path.join(examples, 'coding', 'scratch'), repo, {recursive: true})
  execFileSync('git', ['init', '-q'], {cwd: repo})
  const p = path.join(dir, 'p')
  await cp(path.join(examples, 'coding'), p, {recursive: true, filter: (src) => !src.includes('scratch')})
  if (blocks !== undefined) await writeFile(path.join(p, 'fix.blocks'), blocks)
  const r = await pipe(['run', path.join(p, 'pipeline.yaml'), '--policy', path.join(p, 'policy.yaml'), '--json', '--store', path.join(dir, '.pipe')], {
    cwd: repo,
  })
  expect([0, 1], r.stderr).to.include(r.code)
  return json<{run_id: string}>(r).run_id
}

async function foreachRun(): Promise<string> {
  await mkdir(path.join(dir, 'f'))
  const file = path.join(dir, 'f', 'many.yaml')
  await writeFile(
    file,
    'version: 1\nname: many\nsteps:\n  - id: each\n    kind: foreach\n    items: "${{ [\\"a\\", \\"b\\", \\"c\\"] }}"\n    concurrency: 1\n    steps:\n      - {id: work, kind: noop}\n',
  )
  const r = await pipe(['run', file, '--json', '--store', path.join(dir, '.pipe')], {cwd: dir})
  expect(r.code, r.stderr).to.equal(0)
  return json<{run_id: string}>(r).run_id
}

describe('the run page for operators: diffs as diffs, a timeline', function () {
  before(function () {
    if (!CHROMIUM) this.skip()
  })

  it("an edit step's change is a diff table with its file name and line numbers, and the timeline has a bar per step", async () => {
    const runId = await codingRun()
    const {url} = await startView(dir, servers, [runId])
    const {page, problems} = await open(browser!, url)
    const diff = await page.evaluate(() => {
      const wrap = document.querySelector('.diff .d2h-file-wrapper')
      return {
        file: wrap?.querySelector('.d2h-file-name')?.textContent?.trim(),
        removed: [...(wrap?.querySelectorAll('td.d2h-del .d2h-code-line-ctn') ?? [])].map((e) => e.textContent),
        added: [...(wrap?.querySelectorAll('td.d2h-ins .d2h-code-line-ctn') ?? [])].map((e) => e.textContent),
        numbers: [...(wrap?.querySelectorAll('.d2h-code-linenumber .line-num2') ?? [])].map((e) => e.textContent?.trim()).filter(Boolean),
      }
    })
    expect(diff.file).to.equal('calc.js')
    expect(diff.removed).to.deep.equal(['  return a - b'])
    expect(diff.added).to.deep.equal(['  return a + b'])
    expect(diff.numbers.length, 'line numbers').to.be.greaterThan(1)
    const spans = await page.evaluate(() =>
      [...document.querySelectorAll('svg.waterfall g.span')].map((g) => ({
        kind: g.getAttribute('data-kind'),
        label: g.querySelector('.span-label')?.textContent,
        width: Number(g.querySelector('rect')?.getAttribute('width')),
      })),
    )
    const steps = spans.filter((s) => s.kind === 'step').map((s) => s.label)
    expect(steps).to.include.members(['#1 baseline', '#2 fix', '#3 qa'])
    for (const s of spans) expect(s.width, `${s.label}`).to.be.greaterThan(0)
    // The graph lays itself out: no edge passes through a step's box, and every outcome is a label.
    const graph = await page.evaluate(() => {
      const boxes = [...document.querySelectorAll<SVGRectElement>('svg.graph rect.node')].map((r) => ({
        x: r.x.baseVal.value,
        y: r.y.baseVal.value,
        w: r.width.baseVal.value,
        h: r.height.baseVal.value,
      }))
      const crossings: string[] = []
      const edges = [...document.querySelectorAll<SVGPathElement>('svg.graph path.edge')]
      for (const e of edges) {
        const length = e.getTotalLength()
        for (let at = 6; at < length - 6; at += 3) {
          const p = e.getPointAtLength(at)
          const inside = boxes.find((b) => p.x > b.x + 3 && p.x < b.x + b.w - 3 && p.y > b.y + 3 && p.y < b.y + b.h - 3)
          if (inside) {
            crossings.push(`${e.getAttribute('data-from')} → ${e.getAttribute('data-to')} at ${p.x.toFixed(0)},${p.y.toFixed(0)}`)
            break
          }
        }
      }
      return {crossings, edges: edges.length, labels: [...document.querySelectorAll('svg.graph .edge-label')].map((t) => t.textContent)}
    })
    expect(graph.edges).to.be.greaterThan(4)
    expect(graph.crossings, 'edges through a step').to.deep.equal([])
    expect(graph.labels).to.include.members(['error', 'fail'])
    await page.evaluate(() => document.querySelector<HTMLDetailsElement>('details[data-step="fix"]')!.setAttribute('open', ''))
    await notBlank(browser!, page, 'coding-run')
    await shotOf(page, 'svg.waterfall', 'coding-timeline')
    await shotOf(page, '.diff', 'coding-diff')
    expect(problems).to.deep.equal([])
  })

  it('a foreach run draws a bar for each item under its step', async () => {
    const runId = await foreachRun()
    const {url} = await startView(dir, servers, [runId])
    const {page, problems} = await open(browser!, url)
    const children = await page.evaluate(() => [...document.querySelectorAll('svg.waterfall g.span.child .span-label')].map((e) => e.textContent))
    expect(children).to.deep.equal(['item 0 a: succeeded', 'item 1 b: succeeded', 'item 2 c: succeeded'])
    await notBlank(browser!, page, 'foreach-run')
    expect(problems).to.deep.equal([])
  })

  it('a hostile diff stays text on the run page and in the exported file', async () => {
    const hostile = "<script>window.__pwned = 'script'</script> <img src=x onerror=\"window.__pwned = 'img'\"> invoice\u202Etxt.exe"
    const runId = await codingRun(
      `calc.js\n<<<<<<< SEARCH\nexport function add(a, b) {\n  return a - b\n}\n=======\nexport function add(a, b) {\n  return a + b // ${hostile}\n}\n>>>>>>> REPLACE\n`,
    )
    const file = path.join(dir, 'run.html')
    const exported = await pipe(['export', runId, '--html', file, '--store', path.join(dir, '.pipe')], {cwd: dir})
    expect(exported.code, exported.stderr).to.equal(0)
    const {url} = await startView(dir, servers, [runId])
    for (const at of [url, pathToFileURL(file).href]) {
      const {page} = await open(browser!, at)
      const state = await page.evaluate(() => ({
        pwned: (window as unknown as {__pwned?: unknown}).__pwned ?? null,
        images: document.querySelectorAll('img').length,
        added: [...document.querySelectorAll('.diff td.d2h-ins .d2h-code-line-ctn')].map((e) => e.textContent).join('\n'),
      }))
      expect(state.pwned, at).to.equal(null)
      expect(state.images, at).to.equal(0)
      expect(state.added, at).to.contain("<script>window.__pwned = 'script'</script>")
      expect(state.added, at).to.contain('invoice⟨U+202E⟩txt.exe')
    }
  })
})
