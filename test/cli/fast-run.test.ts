/**
 * `pipe run` through bin/run.js's fast path (cli/fast-run.ts) against the same argv through oclif:
 * the same stdout, stderr and exit code for runs that succeed, stop for input, fail and are refused;
 * and the fast path really leaves oclif unloaded, while what it declines still reaches oclif.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {bin, defaultPipeline, examples, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'

/** The argv through oclif, as bin/run.js hands every other command to it. */
function throughOclif(args: string[], cwd: string, home: string): Promise<CliResult> {
  const script = `const {execute} = await import(${JSON.stringify(pathToFileURL(path.join(repoRoot, 'dist', 'cli', 'main.js')).href)})
await execute({dir: ${JSON.stringify(pathToFileURL(bin).href)}, args: ${JSON.stringify(args)}})`
  const env: NodeJS.ProcessEnv = {...process.env, NO_COLOR: '1', PIPE_HOME: home}
  for (const key of ['PIPE_STORE', 'OPENAI_API_KEY', 'OPENAI_BASE_URL']) delete env[key]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {cwd, env, stdio: ['pipe', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({code, stdout, stderr, signal}))
    child.stdin.end()
  })
}

/** What differs between two runs of the same thing: their folders, times and durations. */
function same(text: string, dir: string): string {
  return text
    .replaceAll(dir, '<dir>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/\b\d+ ms\b/g, '<n> ms')
    .replace(/"(\w*_ms|duration)": \d+/g, '"$1": <n>')
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
        const b = await throughOclif(['run', ...args], slow.dir, home.dir)
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

  /** The modules a `pipe ARGS` process loaded, in order, through a module.register hook. */
  async function loaded(args: string[], cwd: string): Promise<string[]> {
    const log = path.join(cwd, 'modules.log')
    const hook = path.join(cwd, 'hook.mjs')
    const hooks = `import {appendFileSync} from 'node:fs'\nexport async function load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + '\\n'); return next(url, context) }\n`
    writeFileSync(hook, `import {register} from 'node:module'\nregister(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)})\n`)
    const result = await pipe(args, {cwd, env: {NODE_OPTIONS: `--import=${pathToFileURL(hook).href}`}})
    expect(result.stderr).to.not.contain('Error [E_INTERNAL]')
    return readFileSync(log, 'utf8').split('\n').filter(Boolean)
  }

  it('a plain run loads no oclif; help and an argv it declines go to oclif as before', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const plain = await loaded(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go'], dir)
      expect(plain.some((url) => url.endsWith('/dist/cli/fast-run.js'))).to.equal(true)
      expect(plain.filter((url) => url.endsWith('/dist/cli/main.js') || url.endsWith('/dist/commands/run.js'))).to.deep.equal([])
      for (const declined of [['run', '--help'], ['run', defaultPipeline, '--decision', 'maybe']]) {
        const urls = await loaded(declined, dir)
        expect(urls.some((url) => url.endsWith('/dist/cli/main.js')), declined.join(' ')).to.equal(true)
      }
    } finally {
      await cleanup()
    }
  })
})
