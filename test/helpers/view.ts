/**
 * What the pipe view tests share: Debian's chromium-headless-shell driven by puppeteer-core, the
 * built `pipe view` as a process, and plain HTTP requests with full control of method and Host.
 */
import {expect} from 'chai'
import {spawn, type ChildProcess} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdir, readFile} from 'node:fs/promises'
import {request} from 'node:http'
import path from 'node:path'
import type {Browser, Page} from 'puppeteer-core'
import {bin, json, ownEnv, pipe, repoRoot, testHome} from './cli.js'
import {pipeHere} from './pipe-here.js'

export const CHROMIUM = ['/usr/bin/chromium-headless-shell', '/usr/lib/chromium/chrome-headless-shell'].find((p) => existsSync(p))

export interface Started {
  /** The URL printed, without its ?view_token= (GET pages need none): `${url}runs/R` is a run's page. */
  url: string
  /** The URL exactly as printed (with --json, the JSON document). */
  printed: string
  /** The server's token, when it takes decisions from its pages (not --read-only). */
  token?: string
  child: ChildProcess
  stderr: () => string
  /** Resolves once the server's stderr holds `needle`; rejects if the server exits without it. */
  stderrHas: (needle: string) => Promise<void>
}

/**
 * Starts `pipe view` on the store `dir/.pipe` and resolves with what it prints first: its URL (a
 * line), or with --json its JSON document. `servers` collects the process for the test to stop.
 */
export async function startView(dir: string, servers: ChildProcess[], args: string[] = [], env: Record<string, string> = {}): Promise<Started> {
  // The store dir/.pipe unless the test names another (--store URL).
  const store = args.includes('--store') ? [] : ['--store', path.join(dir, '.pipe')]
  const child = spawn(process.execPath, [bin, 'view', '--port', '0', ...store, ...args], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {...(ownEnv.held ?? process.env), NO_COLOR: '1', PIPE_HOME: testHome, ...env},
  })
  servers.push(child)
  let err = ''
  child.stderr.on('data', (d: Buffer) => (err += d.toString()))
  const stderrHas = (needle: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!err.includes(needle)) return
        child.stderr.off('data', check)
        resolve()
      }
      child.stderr.on('data', check)
      child.on('exit', () => (err.includes(needle) ? resolve() : reject(new Error(`pipe view exited, its stderr without "${needle}": ${err}`))))
      check()
    })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      if (!args.includes('--json') && out.includes('\n')) resolve(out.split('\n')[0]!)
      if (args.includes('--json') && out.endsWith('}\n')) resolve(out)
    })
    child.on('exit', (code) => reject(new Error(`pipe view exited ${code}: ${err}`)))
  })
  const token = args.includes('--json') ? null : new URL(url).searchParams.get('view_token')
  return {
    url: token === null ? url : url.replace(/\?view_token=[^&#]*$/, ''),
    printed: url,
    ...(token !== null ? {token} : {}),
    child,
    stderr: () => err,
    stderrHas,
  }
}

/** A page in the browser with every console error, page error and request collected. */
export async function open(browser: Browser, url: string, options: {status?: number; dark?: boolean} = {}): Promise<{page: Page; problems: string[]}> {
  const page = await browser.newPage()
  // No bound of puppeteer's own (30 s): a navigation that waits for a run to be driven took longer on
  // a loaded machine; the test's timeout says when it failed.
  page.setDefaultNavigationTimeout(0)
  page.setDefaultTimeout(0)
  const problems: string[] = []
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warn') problems.push(`${m.type()}: ${m.text()}`)
  })
  page.on('pageerror', (e) => problems.push(`pageerror: ${(e as Error).message}`))
  if (options.dark) await page.emulateMediaFeatures([{name: 'prefers-color-scheme', value: 'dark'}])
  await page.setViewport({width: 1280, height: 900})
  const response = await page.goto(url, {waitUntil: 'load'})
  expect(response?.status(), url).to.equal(options.status ?? 200)
  return {page, problems}
}

/**
 * Closes every page the browser has open, for afterEach: a page left open keeps its renderer
 * polling (and reconnecting to) a server its test stopped, a core's tenth each for the rest of the file.
 */
export async function closePages(browser: Browser | undefined): Promise<void> {
  if (!browser) return
  await Promise.all((await browser.pages()).map((page) => page.close()))
}

/** Where the view tests' screenshots go (ignored by git): a person looks at them after a run. */
export const SCREENSHOTS = path.join(repoRoot, 'test-output', 'screenshots')

/**
 * Saves a full-page screenshot as `test-output/screenshots/name.png`, prints its path, and checks
 * it holds a drawn page, not an empty one.
 */
export async function notBlank(browser: Browser, page: Page, name: string): Promise<string> {
  await mkdir(SCREENSHOTS, {recursive: true})
  const file = path.join(SCREENSHOTS, `${name}.png`)
  await page.screenshot({path: file, fullPage: true})
  console.log(`      screenshot: ${path.relative(repoRoot, file)}`)
  const shot = await readFile(file)
  const blank = await browser.newPage()
  await blank.setViewport({width: 1280, height: 900})
  await blank.goto('about:blank')
  const empty = await blank.screenshot({type: 'png'})
  await blank.close()
  expect(shot.length, `${name}.png holds a drawn page, not an empty one`).to.be.greaterThan(empty.length * 5)
  return file
}

/** Saves a screenshot of one element of the page (a chart, a diff) as `test-output/screenshots/name.png` and prints its path. */
export async function shotOf(page: Page, selector: string, name: string): Promise<string> {
  await mkdir(SCREENSHOTS, {recursive: true})
  const file = path.join(SCREENSHOTS, `${name}.png`)
  const element = await page.$(selector)
  expect(element, `${selector} on the page`).to.not.equal(null)
  await element!.screenshot({path: file})
  console.log(`      screenshot: ${path.relative(repoRoot, file)}`)
  return file
}

/** A plain HTTP request with full control of method, path and Host (null: no Host header at all). */
export function raw(
  url: string,
  options: {method?: string; host?: string | null; path?: string} = {},
): Promise<{status: number; body: string; headers: Record<string, unknown>}> {
  const u = new URL(url)
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = options.host === null ? {} : {host: options.host ?? u.host}
    const req = request(
      {
        hostname: u.hostname,
        port: u.port,
        path: options.path ?? u.pathname + u.search,
        method: options.method ?? 'GET',
        headers,
        setHost: options.host !== null,
      },
      (res) => {
        let body = ''
        res.on('data', (d: Buffer) => (body += d.toString()))
        res.on('end', () => resolve({status: res.statusCode ?? 0, body, headers: res.headers}))
      },
    )
    req.on('error', reject)
    req.end()
  })
}

/** `pipe run ARGS` on the store `dir/.pipe`: its JSON result (by default a run that succeeded or paused). */
export async function runIn(dir: string, args: string[], env: Record<string, string> = {}, codes = [0, 10]): Promise<{run_id: string; status: string}> {
  const r = await pipe(['run', ...args, '--json', '--store', path.join(dir, '.pipe')], {cwd: dir, env})
  expect(codes, r.stderr).to.include(r.code)
  return json<{run_id: string; status: string}>(r)
}

/** runIn in this process (test/helpers/pipe-here.ts): the same command and checks, without a process. */
export async function runHereIn(dir: string, args: string[], env: Record<string, string> = {}, codes = [0, 10]): Promise<{run_id: string; status: string}> {
  const r = await pipeHere(['run', ...args, '--json', '--store', path.join(dir, '.pipe')], {cwd: dir, env})
  expect(codes, r.stderr).to.include(r.code)
  return json<{run_id: string; status: string}>(r)
}
