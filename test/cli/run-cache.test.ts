/**
 * The run group's bundle (dist/cli/run.cjs, pipe run's) through its V8 code cache (src/util/code-cache.ts): the build
 * makes a cache V8 takes under the CLI's flags (src/cli/v8-flags.ts); a cache that is damaged, of other source or other flags, or
 * missing changes nothing a run answers; a cache made from other source never runs; and only the
 * build's cache run writes one.
 */
import {expect} from 'chai'
import {createHash} from 'node:crypto'
import {mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {defaultPipeline, examples, node, repoRoot, tempDir} from '../helpers/cli.js'
import {bundledScript} from '../helpers/bundled.js'

const dist = path.join(repoRoot, 'dist')
const bundle = path.join(dist, 'cli', 'run.cjs')
const cache = path.join(dist, 'cli', 'run.v8cache')
/** The header src/cli/boot.ts names its cache with. */
const HEADER = /header: '([^']+)'/.exec(readFileSync(path.join(repoRoot, 'src', 'cli', 'boot.ts'), 'utf8'))?.[1]
/** The line the build ends the bundle with: the sha256 of its cache file. */
const TRAILER = /\/\/# pipe-code-cache sha256:[0-9a-f]{64}\n$/
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
  for (const linked of ['schemas', 'pipelines', 'node_modules', 'package.json', 'policy.yaml'])
    symlinkSync(path.join(repoRoot, linked), path.join(root, linked))
  for (const entry of readdirSync(dist)) if (entry !== 'cli') symlinkSync(path.join(dist, entry), path.join(root, 'dist', entry))
  const own = ['run.v8cache', ...(bundleBytes ? ['run.cjs'] : [])]
  for (const entry of readdirSync(path.join(dist, 'cli')))
    if (!own.includes(entry)) symlinkSync(path.join(dist, 'cli', entry), path.join(root, 'dist', 'cli', entry))
  if (cacheBytes) writeFileSync(path.join(root, 'dist', 'cli', 'run.v8cache'), cacheBytes)
  if (bundleBytes) writeFileSync(path.join(root, 'dist', 'cli', 'run.cjs'), bundleBytes)
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

describe("pipe run through its group's bundle and code cache", function () {
  this.timeout(240000)

  /** A node process under the CLI's V8 flags that loads `file` as boot.ts does and prints what `probe` returns of its exports. */
  function loader(file: string, probe: string): string {
    const binText = readFileSync(path.join(repoRoot, 'src', 'cli', 'v8-flags.ts'), 'utf8')
    const flags = [...binText.matchAll(/\['(--[a-z-]+)', '([^']+)'\]/g)].map((m) => `${m[1]}=${m[2]}`)
    expect(flags, 'src/cli/v8-flags.ts sets V8 flags as [flag, value] pairs').to.have.length.greaterThan(0)
    expect(HEADER, 'boot.ts names its cache header').to.be.a('string')
    return `import {setFlagsFromString} from 'node:v8'
for (const f of ${JSON.stringify(flags)}) setFlagsFromString(f)
const {loadScript} = await import(${JSON.stringify(path.join(repoRoot, 'src', 'util', 'code-cache.ts'))})
const loaded = loadScript(${JSON.stringify(file)}, {header: ${JSON.stringify(HEADER)}, wrapped: true, extra: [(s) => import(s)], keep: false})
console.log(JSON.stringify(${probe}))`
  }

  it("the build caches every group's bundle, names the cache in it, and V8 under the CLI's flags takes it", async () => {
    const scripts = readdirSync(path.join(dist, 'cli')).filter((file) => file.endsWith('.cjs') && file !== 'boot.cjs')
    expect(scripts).to.include('run.cjs')
    for (const script of scripts) {
      const file = path.join(dist, 'cli', script)
      expect(readFileSync(file, 'latin1'), script).to.match(TRAILER)
      const child = await node([bundledScript(loader(file, '{cached: loaded.cached, execute: typeof loaded.exports.execute}'))])
      expect(child.code, child.stderr).to.equal(0)
      expect(JSON.parse(child.stdout), script).to.deep.equal({cached: true, execute: 'function'})
    }
  })

  it("a cache made from other source of the same length, its header copied from the build's, is not used: that source never runs (issue 25, 16)", async () => {
    const {dir, cleanup} = await tempDir()
    try {
      // The bundle's own text with one message changed for another of the same length.
      const source = readFileSync(bundle, 'utf8').replace(TRAILER, '')
      // assertId's message (store/trail/ids.ts): '"F-1" is not a feature id (F-YYYY-NNN)'.
      const marker = '} is not ${format.what} ('
      expect(source.split(marker), 'the text the forged source changes').to.have.length(2)
      const forged = source.replace(marker, '} FORGED ${format.what} (')
      expect(Buffer.byteLength(forged)).to.equal(Buffer.byteLength(source))
      const good = readFileSync(cache)
      const header = good.subarray(0, good.indexOf(0x0a) + 1).toString('latin1')
      const binText = readFileSync(path.join(repoRoot, 'src', 'cli', 'v8-flags.ts'), 'utf8')
      const flags = [...binText.matchAll(/\['(--[a-z-]+)', '([^']+)'\]/g)].map((m) => `${m[1]}=${m[2]}`)
      const forgedFile = path.join(dir, 'forged.cjs')
      const forgedCacheFile = path.join(dir, 'forged.v8cache')
      writeFileSync(forgedFile, forged)
      // Its cache as the build makes one: a run of the forged source under the CLI's flags, which
      // compiles the function holding the message, cached at exit with the build's header line.
      const make = `import {setFlagsFromString} from 'node:v8'
import vm from 'node:vm'
import {createRequire, Module} from 'node:module'
import {readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
for (const f of ${JSON.stringify(flags)}) setFlagsFromString(f)
const file = ${JSON.stringify(bundle)}
const script = new vm.Script(readFileSync(${JSON.stringify(forgedFile)}, 'utf8'), {filename: file})
const module = new Module(file)
module.filename = file
module.loaded = true
script.runInThisContext()(module.exports, createRequire(file), module, file, path.dirname(file), (s) => import(s))
createRequire(file).cache[file] = module
process.on('exit', () => writeFileSync(${JSON.stringify(forgedCacheFile)}, Buffer.concat([Buffer.from(${JSON.stringify(header)}, 'latin1'), script.createCachedData()])))
await module.exports.execute('run', [${JSON.stringify(defaultPipeline)}, '--text', 'x', '--feature', 'F-1'], {bin: 'pipe', version: '0', root: ${JSON.stringify(repoRoot)}})`
      const made = await node(['--input-type=module', '-e', make], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
      expect(made.stderr, 'the forged source ran where it was made').to.contain('FORGED')
      const forgedCache = readFileSync(forgedCacheFile)
      const runWith = async (name: string, bundleBytes?: Buffer): Promise<string> => {
        const root = installation(path.join(dir, name), forgedCache, bundleBytes)
        const cwd = path.join(dir, name, 'cwd')
        mkdirSync(cwd)
        const result = await node([path.join(root, 'bin', 'run.js'), 'run', defaultPipeline, '--text', 'x', '--feature', 'F-1'], {
          cwd,
          env: {PIPE_HOME: path.join(cwd, 'home')},
        })
        expect(result.code, result.stderr).to.equal(2)
        return result.stderr
      }
      // The forged cache beside the build's bundle: the bundle names another cache, so V8 never sees it.
      const refused = await runWith('beside-the-build')
      expect(refused).to.contain('"F-1" is not a feature id (F-YYYY-NNN)')
      expect(refused).to.not.contain('FORGED')
      // The check of the check: a bundle that names the forged cache (its line changed too) runs the
      // forged bytecode, which no .cjs holds. That is what the line in the bundle stands between.
      const named = Buffer.from(`${source}//# pipe-code-cache ${createHash('sha256').update(forgedCache).digest('hex').replace(/^/, 'sha256:')}\n`)
      expect(await runWith('named', named)).to.contain('FORGED')
    } finally {
      await cleanup()
    }
  })

  it('a cache whose V8 data has one byte changed (its header intact) is left unread: V8 checks little of the data, and ran it or crashed', async () => {
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
        const copy = path.join(folder, 'run.cjs')
        writeFileSync(copy, readFileSync(bundle))
        writeFileSync(path.join(folder, 'run.v8cache'), bytes)
        const child = await node([bundledScript(loader(copy, '{cached: loaded.cached}'))])
        expect({code: child.code, signal: child.signal}, `byte ${at - start} of the data: ${child.stderr.slice(0, 500)}`).to.deep.equal({code: 0, signal: null})
        expect(JSON.parse(child.stdout), `byte ${at - start} of the data`).to.deep.equal({cached: false})
      }
    } finally {
      await cleanup()
    }
  })

  it("a cache that is damaged, of other source or flags, or missing: the run answers as with the build's", async () => {
    const good = readFileSync(cache)
    const end = good.indexOf(0x0a)
    const [magic] = good.toString('latin1', 0, end).split(' ')
    const cases: Array<[string, Buffer | undefined, string[]]> = [
      ["the build's cache", good, []],
      ['no cache', undefined, []],
      ['V8 data not V8 made', Buffer.concat([good.subarray(0, end + 1), Buffer.alloc(good.length - end - 1, 7)]), []],
      ['data cut short', good.subarray(0, end + 100), []],
      ['a header of another format', Buffer.concat([Buffer.from(`${magic} 12345\n`), good.subarray(end + 1)]), []],
      ['no header', good.subarray(end + 1), []],
      // The header names no V8 version or flags: V8 compares its own, and a flag the user gives node changes them.
      ['a V8 flag the user gives node', good, ['--stack-size=2000']],
    ]
    await allSucceedAlike(cases.map(([what, bytes, nodeFlags]) => ({what, cache: bytes, nodeFlags})))
  })

  it("a bundle cut short, emptied, another group's or not the bundle (an install or build overwriting it as a run starts): an error that says so, not a stack trace", async () => {
    const good = readFileSync(bundle)
    const {dir, cleanup} = await tempDir()
    try {
      for (const [i, [what, bytes]] of (
        [
          ['an empty bundle', Buffer.alloc(0)],
          ['a bundle cut in half', good.subarray(0, good.length >> 1)],
          ["a bundle of only its wrapper's start", good.subarray(0, good.indexOf(0x7b) + 1)],
          ['a bundle that is a complete script but no function', Buffer.from('"not the bundle"\n')],
          ['no bundle at all', null],
          // A complete, working bundle, but another group's (an install mixing builds): it has no run command.
          ["another group's bundle", readFileSync(path.join(dist, 'cli', 'view.cjs'))],
        ] as Array<[string, Buffer | null]>
      ).entries()) {
        const root = installation(path.join(dir, String(i)), readFileSync(cache), bytes ?? Buffer.alloc(0))
        if (bytes === null) rmSync(path.join(root, 'dist', 'cli', 'run.cjs'))
        const cwd = path.join(dir, String(i), 'work')
        mkdirSync(cwd)
        const result = await node([path.join(root, 'bin', 'run.js'), ...runArgs], {cwd, env: {PIPE_HOME: path.join(cwd, 'home')}})
        expect(result.code, what).to.equal(1)
        expect(result.stderr, what).to.match(
          /^Error \[E_INTERNAL\]: the installation's dist\/cli\/run\.cjs is missing or damaged\nTry this: Build pipe again \(npm run build\) or reinstall it\.\nLog: .*\nTrace: tr-[0-9a-f]{16}\n$/,
        )
      }
    } finally {
      await cleanup()
    }
  })

  it('an ordinary run, with PIPE_BUILD_CODE_CACHE left set or not, writes no cache into the installation', async () => {
    const state = (folder: string): Record<string, string> =>
      Object.fromEntries(
        readdirSync(folder)
          .sort()
          .map((f) => [
            f,
            createHash('sha256')
              .update(readFileSync(path.join(folder, f)))
              .digest('hex'),
          ]),
      )
    const folders = [path.join(dist, 'cli'), path.join(dist, 'schema', 'validators')]
    const before = folders.map(state)
    const {dir, cleanup} = await tempDir()
    try {
      for (const value of [undefined, '1', dist + '/..']) {
        const cwd = path.join(dir, String(value ?? 'unset').replace(/\W/g, '_'))
        mkdirSync(cwd)
        const result = await node([path.join(repoRoot, 'bin', 'run.js'), ...runArgs], {
          cwd,
          env: {PIPE_HOME: path.join(cwd, 'home'), PIPE_BUILD_CODE_CACHE: value},
        })
        expect(result.code, result.stderr).to.equal(0)
      }
      expect(folders.map(state)).to.deep.equal(before)
    } finally {
      await cleanup()
    }
  })
})
