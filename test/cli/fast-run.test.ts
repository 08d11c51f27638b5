/**
 * `pipe run` through bin/run.js's fast path (cli/fast-run.ts) against the same argv through oclif:
 * the same stdout, stderr and exit code for runs that succeed, stop for input, fail and are refused;
 * and the fast path really leaves oclif unloaded, while what it declines still reaches oclif.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {closeSync, existsSync, mkdirSync, openSync, readFileSync, symlinkSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {bin, defaultPipeline, examples, node, pipe, repoRoot, tempDir, type CliOptions, type CliResult} from '../helpers/cli.js'

/** The argv through oclif, as bin/run.js hands every other command to it (of the installation `root`). */
function throughOclif(args: string[], cwd: string, env: NonNullable<CliOptions['env']>, root = repoRoot): Promise<CliResult> {
  const script = `const {execute} = await import(${JSON.stringify(pathToFileURL(path.join(root, 'dist', 'cli', 'main.js')).href)})
await execute({dir: ${JSON.stringify(root)}, args: ${JSON.stringify(args)}})`
  return node(['--input-type=module', '-e', script], {cwd, env})
}

/** What differs between two runs of the same thing: their folders, times and durations. */
function same(text: string, dir: string): string {
  return text
    .replaceAll(dir, '<dir>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/\b\d+ ms\b/g, '<n> ms')
    .replace(/"(\w*_ms|duration)": \d+/g, '"$1": <n>')
    // A trace id names one occurrence of an error: the two paths' errors are two occurrences.
    .replace(/\btr-[0-9a-f]{16}\b/g, '<trace>')
}

describe('pipe run: the fast path and oclif give the same answers', function () {
  this.timeout(240000)

  const cases: Array<[string, string[]]> = [
    ['a run that succeeds', [defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--store', '.pipe']],
    ['a run that succeeds, --json', [defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']],
    ['a run that stops for a review decision', [defaultPipeline, '--input', path.join(examples, 'full-prd.md')]],
    ['a pipeline that does not exist', [path.join(repoRoot, 'pipelines', 'missing.yaml'), '--text', 'x']],
    ['a pipeline that does not exist, --json', [path.join(repoRoot, 'pipelines', 'missing.yaml'), '--text', 'x', '--json']],
    ['a bad feature id', [defaultPipeline, '--text', 'x', '--feature', 'F-1']],
    ['-i without NAME=VALUE', [defaultPipeline, '-i', 'examples/full-prd.md']],
    ['a dry run, --json', [defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--dry-run', '--json']],
    ['a run whose step fails', ['failing.yaml', '--text', 'x']],
  ]
  for (const [what, args] of cases) {
    it(what, async () => {
      const fast = await tempDir()
      const slow = await tempDir()
      const home = await tempDir()
      try {
        for (const dir of [fast.dir, slow.dir]) {
          writeFileSync(path.join(dir, 'failing.yaml'), 'version: 1\nname: failing\nsteps:\n  - {id: boom, kind: command, run: [git, status]}\n')
          writeFileSync(path.join(dir, 'policy.yaml'), readFileSync(path.join(repoRoot, 'policy.yaml'), 'utf8'))
        }
        const a = await pipe(['run', ...args], {cwd: fast.dir, env: {PIPE_HOME: home.dir}})
        const b = await throughOclif(['run', ...args], slow.dir, {PIPE_HOME: home.dir})
        expect(a.code, a.stderr).to.equal(b.code)
        expect(same(a.stdout, fast.dir)).to.equal(same(b.stdout, slow.dir))
        expect(same(a.stderr, fast.dir)).to.equal(same(b.stderr, slow.dir))
      } finally {
        await Promise.all([fast.cleanup(), slow.cleanup(), home.cleanup()])
      }
    })
  }
})

describe('pipe run: what the fast path loads', function () {
  this.timeout(120000)

  /** The modules a `pipe ARGS` process loaded: ES modules in order, through a module.register hook, then CommonJS files (require's cache) at its exit. */
  async function loaded(args: string[], cwd: string): Promise<string[]> {
    const log = path.join(cwd, 'modules.log')
    const hook = path.join(cwd, 'hook.mjs')
    const hooks = `import {appendFileSync} from 'node:fs'\nexport async function load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, context) }\n`
    const cjs = `process.on('exit', () => { for (const file of Object.keys(createRequire(import.meta.url).cache)) appendFileSync(${JSON.stringify(log)}, pathToFileURL(file).href + '\\n') })\n`
    writeFileSync(hook, `import {appendFileSync} from 'node:fs'\nimport {createRequire, register} from 'node:module'\nimport {pathToFileURL} from 'node:url'\nregister(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)})\n${cjs}`)
    const result = await pipe(args, {cwd, env: {NODE_OPTIONS: `--import=${pathToFileURL(hook).href}`}})
    expect(result.stderr).to.not.contain('Error [E_INTERNAL]')
    return readFileSync(log, 'utf8').split('\n').filter(Boolean)
  }

  it('a plain run loads no oclif; help and an argv it declines go to oclif as before', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const plain = await loaded(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go'], dir)
      // The fast path itself is a script (dist/cli/fast-run.cjs) that no loader lists: its loader is.
      expect(plain.some((url) => url.endsWith('/dist/util/code-cache.cjs'))).to.equal(true)
      expect(plain.filter((url) => url.endsWith('/dist/cli/main.js') || url.endsWith('/dist/commands/run.js'))).to.deep.equal([])
      // With --json too: bin/run.js's JSON answers for help and --version load oclif's config, and a run is neither.
      const json = await loaded(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'], dir)
      expect(json.some((url) => url.endsWith('/dist/util/code-cache.cjs'))).to.equal(true)
      expect(json.filter((url) => /\/dist\/cli\/(main|help-json)\.js$|\/dist\/commands\/run\.js$/.test(url))).to.deep.equal([])
      for (const declined of [['run', '--help'], ['run', defaultPipeline, '--decision', 'maybe'], ['run', '--help', '--json']]) {
        const urls = await loaded(declined, dir)
        expect(urls.some((url) => url.endsWith('/dist/cli/main.js') || url.endsWith('/dist/cli/help-json.js')), declined.join(' ')).to.equal(true)
      }
    } finally {
      await cleanup()
    }
  })
})

describe('pipe run: what the fast path leaves to oclif gives oclif\'s answers', function () {
  this.timeout(240000)

  /** A copy of the installation (its bin, package.json and manifest; the rest linked) whose manifest `edit` changes. */
  function installation(
    dir: string,
    edit: (manifest: {version: string; commands: Record<string, Record<string, unknown>>}) => void,
    editPackage: (pjson: {oclif: Record<string, unknown>}) => void = () => {},
  ): string {
    const root = path.join(dir, 'install')
    mkdirSync(path.join(root, 'bin'), {recursive: true})
    writeFileSync(path.join(root, 'bin', 'run.js'), readFileSync(bin))
    writeFileSync(path.join(root, 'bin', 'package.json'), readFileSync(path.join(repoRoot, 'bin', 'package.json')))
    const pjson = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {oclif: Record<string, unknown>}
    editPackage(pjson)
    writeFileSync(path.join(root, 'package.json'), JSON.stringify(pjson, null, 2))
    for (const linked of ['dist', 'schemas', 'pipelines', 'node_modules']) symlinkSync(path.join(repoRoot, linked), path.join(root, linked))
    const manifest = JSON.parse(readFileSync(path.join(repoRoot, 'oclif.manifest.json'), 'utf8')) as {version: string; commands: Record<string, Record<string, unknown>>}
    edit(manifest)
    writeFileSync(path.join(root, 'oclif.manifest.json'), JSON.stringify(manifest))
    return root
  }

  /** `pipe run ARGS` through the installation's bin/run.js and through its oclif, with `env`: the same stdout, stderr and exit code. */
  async function bothAgree(root: string, args: string[], env: Record<string, string> = {}): Promise<CliResult> {
    const fast = await tempDir()
    const slow = await tempDir()
    const home = await tempDir()
    try {
      // The user's own oclif settings would make both paths oclif's: the test sets each itself.
      const settings = {PIPE_HOME: home.dir, PIPE_DEBUG: undefined, DEBUG: undefined, PIPE_DATA_DIR: undefined, XDG_DATA_HOME: undefined, ...env}
      const a = await node([path.join(root, 'bin', 'run.js'), 'run', ...args], {cwd: fast.dir, env: settings})
      const b = await throughOclif(['run', ...args], slow.dir, settings, root)
      const clean = (text: string, dir: string): string => same(text, dir).replace(/\(node:\d+\)/g, '(node:<pid>)')
      expect(clean(a.stderr, fast.dir)).to.equal(clean(b.stderr, slow.dir))
      expect(clean(a.stdout, fast.dir)).to.equal(clean(b.stdout, slow.dir))
      expect(a.code, a.stderr).to.equal(b.code)
      return a
    } finally {
      await Promise.all([fast.cleanup(), slow.cleanup(), home.cleanup()])
    }
  }

  /** `test` with a temporary folder, removed after. */
  async function inTemp(test: (dir: string) => Promise<void>): Promise<void> {
    const {dir, cleanup} = await tempDir()
    try {
      await test(dir)
    } finally {
      await cleanup()
    }
  }

  const args = [defaultPipeline, '--input', path.join(examples, 'full-prd.md')]

  it('a manifest with a damaged run command: oclif\'s answer, not a stack trace', () =>
    inTemp(async (dir) => {
      const root = installation(dir, (m) => {
        ;(m.commands.run!.flags as Record<string, unknown>).input = null
      })
      const result = await bothAgree(root, args)
      expect(result.stderr).to.not.contain('TypeError')
    }))

  it('a manifest of another version, which oclif sets aside with a warning', () =>
    inTemp(async (dir) => {
      const root = installation(dir, (m) => {
        m.version = '0.0.1'
      })
      const result = await bothAgree(root, args)
      expect(result.stderr).to.contain('Mismatched version')
    }))

  it('a manifest where another command takes a name under run (an alias run:x) that oclif routes to', () =>
    inTemp(async (dir) => {
      const root = installation(dir, (m) => {
        m.commands.validate!.aliases = ['run:x']
      })
      const result = await bothAgree(root, ['x'])
      expect(result.stderr).to.contain('pipe validate --help')
    }))

  it('a package whose oclif config adds a hook that runs with every command (init, prerun, ...)', () =>
    inTemp(async (dir) => {
      const root = installation(
        dir,
        () => {},
        (pjson) => {
          pjson.oclif.hooks = {...(pjson.oclif.hooks as object), init: './hooks/init.js'}
        },
      )
      mkdirSync(path.join(root, 'hooks'))
      writeFileSync(path.join(root, 'hooks', 'init.js'), "export default async function () { process.stderr.write('the init hook ran\\n') }\n")
      const result = await bothAgree(root, args)
      expect(result.stderr).to.contain('the init hook ran')
    }))

  it('a package whose oclif config has a setting the fast path does not know (additionalHelpFlags here)', () =>
    inTemp(async (dir) => {
      const root = installation(
        dir,
        () => {},
        (pjson) => {
          pjson.oclif.additionalHelpFlags = ['-t']
        },
      )
      const result = await bothAgree(root, [defaultPipeline, '-t', 'x'])
      expect(result.stdout).to.contain('USAGE')
    }))

  it("a user plugins file in oclif's data folder (a damaged one here, which oclif warns about)", () =>
    inTemp(async (dir) => {
      const root = installation(dir, () => {})
      mkdirSync(path.join(dir, 'data', 'pipe'), {recursive: true})
      writeFileSync(path.join(dir, 'data', 'pipe', 'package.json'), '{broken')
      const result = await bothAgree(root, args, {XDG_DATA_HOME: path.join(dir, 'data')})
      expect(result.stderr).to.contain('SyntaxError')
    }))

  it('PIPE_DEBUG=1, under which oclif shows every process warning with its stack', () =>
    inTemp(async (dir) => {
      const root = installation(dir, () => {})
      const preload = path.join(dir, 'warn.cjs')
      // A warning while the run works (after oclif has loaded): oclif's debug mode prints its stack too.
      writeFileSync(preload, "setImmediate(() => setImmediate(() => process.on('beforeExit', function once() { process.off('beforeExit', once); process.emitWarning('late warning') })))\n")
      const result = await bothAgree(root, args, {PIPE_DEBUG: '1', NODE_OPTIONS: `--require=${preload}`})
      expect(result.stderr).to.match(/Warning: late warning\n\s+at /)
    }))
})

describe('pipe run: an error the fast path does not catch', function () {
  this.timeout(120000)

  /** `node ARGS` with stdout on /dev/full (every write fails with ENOSPC), as a user's full disk would. */
  function toFullDisk(args: string[], cwd: string, home: string): Promise<{code: number | null; stderr: string}> {
    const fd = openSync('/dev/full', 'w')
    const env = {...process.env, PIPE_HOME: home, PIPE_DEBUG: undefined, DEBUG: undefined, NO_COLOR: '1'}
    const child = spawn(process.execPath, args, {cwd, env, stdio: ['ignore', fd, 'pipe']})
    closeSync(fd)
    let stderr = ''
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    return new Promise((resolve) => child.on('close', (code) => resolve({code, stderr})))
  }

  it('ends as through oclif: exit 1 and the error on stderr, its source line a line, not a screenful of the bundle', async function () {
    if (!existsSync('/dev/full')) this.skip()
    const fast = await tempDir()
    const slow = await tempDir()
    const home = await tempDir()
    try {
      const args = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']
      const script = `const {execute} = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist', 'cli', 'main.js')).href)})
await execute({dir: ${JSON.stringify(repoRoot)}, args: ${JSON.stringify(args)}})`
      const a = await toFullDisk([bin, ...args], fast.dir, home.dir)
      const b = await toFullDisk(['--input-type=module', '-e', script], slow.dir, home.dir)
      expect(b.code, b.stderr).to.equal(1)
      expect(a.code, a.stderr).to.equal(b.code)
      expect(a.stderr).to.contain('\nError: ENOSPC: no space left on device, write\n')
      expect(b.stderr).to.contain('\nError: ENOSPC: no space left on device, write\n')
      // Node prints the line of the frame that threw: the run bundle's lines must stay short for that.
      const longest = (text: string): number => Math.max(...text.split('\n').map((line) => line.length))
      expect(longest(a.stderr), a.stderr.slice(0, 2000)).to.be.at.most(Math.max(400, longest(b.stderr)))
    } finally {
      await Promise.all([fast.cleanup(), slow.cleanup(), home.cleanup()])
    }
  })
})

describe('pipe run: Ctrl-C during a noop\'s sleep_ms (util/sleep.ts)', function () {
  this.timeout(120000)

  /** `node ARGS` in `cwd`, sent SIGINT once its stderr has shown the run started and the step began its wait. */
  function interrupted(args: string[], cwd: string, home: string): Promise<CliResult> {
    const env = {...process.env, PIPE_HOME: home, PIPE_DEBUG: undefined, DEBUG: undefined, NO_COLOR: '1', PIPE_INTERACTIVE: '0'}
    const child = spawn(process.execPath, args, {cwd, env, stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    let sent = false
    // A run that never ends its wait fails the test, not the suite.
    const timer = setTimeout(() => child.kill('SIGKILL'), 90000)
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk
      // The first step ends (its line shown) before the second, the sleeping one, starts.
      if (!sent && stderr.includes('#1 first')) {
        sent = true
        child.kill('SIGINT')
      }
    })
    return new Promise((resolve) =>
      child.on('close', (code, signal) => {
        clearTimeout(timer)
        resolve({code, signal, stdout, stderr})
      }),
    )
  }

  it('ends the run interrupted with exit 130, as through oclif', async () => {
    const fast = await tempDir()
    const slow = await tempDir()
    const home = await tempDir()
    try {
      const pipeline = 'version: 1\nname: sleepy\nsteps:\n  - {id: first, kind: noop, next: nap}\n  - {id: nap, kind: noop, sleep_ms: 3600000}\n'
      for (const dir of [fast.dir, slow.dir]) writeFileSync(path.join(dir, 'sleepy.yaml'), pipeline)
      const args = ['run', 'sleepy.yaml', '--text', 'x']
      const script = `const {execute} = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist', 'cli', 'main.js')).href)})
await execute({dir: ${JSON.stringify(repoRoot)}, args: ${JSON.stringify(args)}})`
      const a = await interrupted([bin, ...args], fast.dir, home.dir)
      const b = await interrupted(['--input-type=module', '-e', script], slow.dir, home.dir)
      expect({code: b.code, signal: b.signal}, b.stderr).to.deep.equal({code: 130, signal: null})
      expect({code: a.code, signal: a.signal}, a.stderr).to.deep.equal({code: 130, signal: null})
      expect(a.stderr).to.contain('interrupted by a signal')
      expect(same(a.stderr, fast.dir)).to.equal(same(b.stderr, slow.dir))
      expect(same(a.stdout, fast.dir)).to.equal(same(b.stdout, slow.dir))
    } finally {
      await Promise.all([fast.cleanup(), slow.cleanup(), home.cleanup()])
    }
  })
})
