/**
 * `pipe run`'s bundle (dist/cli/fast-run.cjs) through its V8 code cache (src/util/code-cache.ts):
 * the build makes a cache bin/run.js's V8 takes; a cache that is damaged, of other source or other
 * flags, or missing changes nothing a run answers; and only the build's cache run writes one.
 */
import {expect} from 'chai'
import {createHash} from 'node:crypto'
import {mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {defaultPipeline, examples, node, repoRoot, tempDir} from '../helpers/cli.js'

const dist = path.join(repoRoot, 'dist')
const bundle = path.join(dist, 'cli', 'fast-run.cjs')
const cache = path.join(dist, 'cli', 'fast-run.v8cache')
const runArgs = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--store', '.pipe']

/** What differs between two runs of the same thing: their folders, times and durations. */
function same(text: string, dir: string): string {
  return text
    .replaceAll(dir, '<dir>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/\b\d+ ms\b/g, '<n> ms')
}

/** A copy of the installation whose dist/cli/ is a folder of its own (its files linked) with `cacheBytes` as the run bundle's cache, or none. */
function installation(dir: string, cacheBytes: Buffer | undefined, bundleBytes?: Buffer): string {
  const root = path.join(dir, 'install')
  mkdirSync(path.join(root, 'dist', 'cli'), {recursive: true})
  // bin/ is copied: Node runs a linked main script from its real path, whose folder is this checkout's.
  mkdirSync(path.join(root, 'bin'))
  for (const file of readdirSync(path.join(repoRoot, 'bin'))) writeFileSync(path.join(root, 'bin', file), readFileSync(path.join(repoRoot, 'bin', file)))
  for (const linked of ['schemas', 'pipelines', 'node_modules', 'package.json', 'oclif.manifest.json', 'policy.yaml']) symlinkSync(path.join(repoRoot, linked), path.join(root, linked))
  for (const entry of readdirSync(dist)) if (entry !== 'cli') symlinkSync(path.join(dist, entry), path.join(root, 'dist', entry))
  const own = ['fast-run.v8cache', ...(bundleBytes ? ['fast-run.cjs'] : [])]
  for (const entry of readdirSync(path.join(dist, 'cli'))) if (!own.includes(entry)) symlinkSync(path.join(dist, 'cli', entry), path.join(root, 'dist', 'cli', entry))
  if (cacheBytes) writeFileSync(path.join(root, 'dist', 'cli', 'fast-run.v8cache'), cacheBytes)
  if (bundleBytes) writeFileSync(path.join(root, 'dist', 'cli', 'fast-run.cjs'), bundleBytes)
  return root
}

/** A default run in a copy of the installation per case: each must succeed, all with the same answer. */
async function allSucceedAlike(cases: Array<{what: string; cache: Buffer | undefined; bundle?: Buffer; nodeFlags?: string[]}>): Promise<void> {
  const {dir, cleanup} = await tempDir()
  try {
    let expected: {code: number | null; stdout: string; stderr: string} | undefined
    for (const [i, {what, cache: cacheBytes, bundle: bundleBytes, nodeFlags}] of cases.entries()) {
      const root = installation(path.join(dir, String(i)), cacheBytes, bundleBytes)
      const cwd = path.join(dir, String(i), 'work')
      mkdirSync(cwd)
      const result = await node([...(nodeFlags ?? []), path.join(root, 'bin', 'run.js'), ...runArgs], {cwd, env: {PIPE_HOME: path.join(cwd, 'home')}})
      const answer = {code: result.code, stdout: same(result.stdout, cwd), stderr: same(result.stderr, cwd)}
      expect(answer.code, `${what}: ${result.stderr}`).to.equal(0)
      expected ??= answer
      expect(answer, what).to.deep.equal(expected)
    }
  } finally {
    await cleanup()
  }
}

describe('pipe run through the run bundle\'s code cache', function () {
  this.timeout(240000)

  it('the build caches the run bundle, and V8 under bin/run.js\'s flags takes it', async () => {
    const binText = readFileSync(path.join(repoRoot, 'bin', 'run.js'), 'utf8')
    const flags = [...binText.matchAll(/\['(--[a-z-]+)', '([^']+)'\]/g)].map((m) => `${m[1]}=${m[2]}`)
    const header = /header: '([^']+)'/.exec(binText)?.[1]
    expect(flags, 'bin/run.js sets V8 flags as [flag, value] pairs').to.have.length.greaterThan(0)
    expect(header, 'bin/run.js names its cache header').to.be.a('string')
    const script = `import {setFlagsFromString} from 'node:v8'
for (const f of ${JSON.stringify(flags)}) setFlagsFromString(f)
const {loadScript} = (await import(${JSON.stringify(pathToFileURL(path.join(dist, 'util', 'code-cache.cjs')).href)})).default
const loaded = loadScript(${JSON.stringify(bundle)}, {header: ${JSON.stringify(header)}, wrapped: true, extra: [(s) => import(s)], keep: false})
console.log(JSON.stringify({cached: loaded.cached, fastRun: typeof loaded.exports.fastRun}))`
    const child = await node(['--input-type=module', '-e', script])
    expect(child.code, child.stderr).to.equal(0)
    expect(JSON.parse(child.stdout)).to.deep.equal({cached: true, fastRun: 'function'})
  })

  it('a cache whose V8 data has one byte changed (its header intact) is left unread: V8 checks little of the data, and ran it or crashed', async () => {
    const binText = readFileSync(path.join(repoRoot, 'bin', 'run.js'), 'utf8')
    const flags = [...binText.matchAll(/\['(--[a-z-]+)', '([^']+)'\]/g)].map((m) => `${m[1]}=${m[2]}`)
    const header = /header: '([^']+)'/.exec(binText)?.[1]
    const good = readFileSync(cache)
    const start = good.indexOf(0x0a) + 1
    const {dir, cleanup} = await tempDir()
    try {
      for (const share of [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]) {
        const at = start + Math.floor((good.length - start) * share)
        const bytes = Buffer.from(good)
        bytes[at] = bytes[at]! ^ 0x5a
        const folder = path.join(dir, String(share))
        mkdirSync(folder)
        const copy = path.join(folder, 'fast-run.cjs')
        writeFileSync(copy, readFileSync(bundle))
        writeFileSync(path.join(folder, 'fast-run.v8cache'), bytes)
        const script = `import {setFlagsFromString} from 'node:v8'
for (const f of ${JSON.stringify(flags)}) setFlagsFromString(f)
const {loadScript} = (await import(${JSON.stringify(pathToFileURL(path.join(dist, 'util', 'code-cache.cjs')).href)})).default
const loaded = loadScript(${JSON.stringify(copy)}, {header: ${JSON.stringify(header)}, wrapped: true, extra: [(s) => import(s)], keep: false})
console.log(JSON.stringify({cached: loaded.cached}))`
        const child = await node(['--input-type=module', '-e', script])
        expect({code: child.code, signal: child.signal}, `byte ${at - start} of the data: ${child.stderr.slice(0, 500)}`).to.deep.equal({code: 0, signal: null})
        expect(JSON.parse(child.stdout), `byte ${at - start} of the data`).to.deep.equal({cached: false})
      }
    } finally {
      await cleanup()
    }
  })

  it('a cache that is damaged, of other source or flags, or missing: the run answers as with the build\'s', async () => {
    const good = readFileSync(cache)
    const end = good.indexOf(0x0a)
    const [magic, version, tag] = good.toString('latin1', 0, end).split(' ')
    const cases: Array<[string, Buffer | undefined, string[]]> = [
      ['the build\'s cache', good, []],
      ['no cache', undefined, []],
      ['V8 data not V8 made', Buffer.concat([good.subarray(0, end + 1), Buffer.alloc(good.length - end - 1, 7)]), []],
      ['data cut short', good.subarray(0, end + 100), []],
      ['made for other source', Buffer.concat([Buffer.from(`${magic} ${version} ${tag} sha256:${'0'.repeat(64)}\n`), good.subarray(end + 1)]), []],
      ['no header', good.subarray(end + 1), []],
      // The header says these flags, but V8 compares its own: a flag the user gives node changes them.
      ['a V8 flag the user gives node', good, ['--stack-size=2000']],
    ]
    await allSucceedAlike(cases.map(([what, bytes, nodeFlags]) => ({what, cache: bytes, nodeFlags})))
  })

  it('a run bundle cut short or emptied (an install or build overwriting it as a run starts): the run is oclif\'s, and answers as with the build\'s', async () => {
    const good = readFileSync(bundle)
    const cases: Array<[string, Buffer]> = [
      ['the build\'s bundle', good],
      ['an empty bundle', Buffer.alloc(0)],
      ['a bundle cut in half', good.subarray(0, good.length >> 1)],
      ['a bundle of only its wrapper\'s start', good.subarray(0, good.indexOf(0x7b) + 1)],
      ['a bundle that is a complete script but no function', Buffer.from('"not the bundle"\n')],
    ]
    await allSucceedAlike(cases.map(([what, bytes]) => ({what, cache: readFileSync(cache), bundle: bytes})))
  })

  it('an ordinary run, with PIPE_BUILD_CODE_CACHE left set or not, writes no cache into the installation', async () => {
    const state = (folder: string): Record<string, string> =>
      Object.fromEntries(readdirSync(folder).sort().map((f) => [f, createHash('sha256').update(readFileSync(path.join(folder, f))).digest('hex')]))
    const folders = [path.join(dist, 'cli'), path.join(dist, 'schema', 'validators')]
    const before = folders.map(state)
    const {dir, cleanup} = await tempDir()
    try {
      for (const value of [undefined, '1', dist + '/..']) {
        const cwd = path.join(dir, String(value ?? 'unset').replace(/\W/g, '_'))
        mkdirSync(cwd)
        const result = await node([path.join(repoRoot, 'bin', 'run.js'), ...runArgs], {cwd, env: {PIPE_HOME: path.join(cwd, 'home'), PIPE_BUILD_CODE_CACHE: value}})
        expect(result.code, result.stderr).to.equal(0)
      }
      expect(folders.map(state)).to.deep.equal(before)
    } finally {
      await cleanup()
    }
  })
})
