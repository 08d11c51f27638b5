/**
 * test/helpers/pipe-here.ts runs a command in the test's own process for the tests that check what a
 * command does and says. It may stand in for the process only where the two agree: the same exit
 * code, the same stdout and stderr (redacted alike), the same records. Each case runs both ways, in
 * two fresh folders, and compares what they said once what differs between any two runs (folders,
 * times, durations, trace ids) is put aside.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, node, ownEnv, pipe, repoRoot, tempDir, withoutRunVariance, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

const SECRET = 'pipe-here-secret-0123456789'

/** What differs between two runs (withoutRunVariance), and the digests of records that hold times. */
function same(text: string, dir: string): string {
  return withoutRunVariance(text, dir).replace(/"(\w*_hash|digest|head|seal|sha256)": "[^"]+"/g, '"$1": <digest>')
}

async function both(args: (dir: string) => string[], env: Record<string, string> = {}): Promise<{process: CliResult; here: CliResult}> {
  const one = await tempDir('pipe-here-process-')
  const two = await tempDir('pipe-here-here-')
  try {
    const process = await pipe(args(one.dir), {cwd: one.dir, env})
    const here = await pipeHere(args(two.dir), {cwd: two.dir, env})
    const files = async (dir: string) => (await readdir(dir, {recursive: true})).map(String).sort()
    expect(await files(two.dir), 'the files each wrote').to.deep.equal(await files(one.dir))
    return {
      process: {...process, stdout: same(process.stdout, one.dir), stderr: same(process.stderr, one.dir)},
      here: {...here, stdout: same(here.stdout, two.dir), stderr: same(here.stderr, two.dir)},
    }
  } finally {
    await one.cleanup()
    await two.cleanup()
  }
}

describe('pipe in this process says what the pipe process says', function () {
  this.timeout(120000)

  const prd = path.join(examples, 'full-prd.md')
  const cases: Array<{what: string; args: (dir: string) => string[]; env?: Record<string, string>}> = [
    {what: '--version', args: () => ['--version']},
    {what: 'help for a command', args: () => ['validate', '--help']},
    {what: 'an unknown command', args: () => ['valdate', 'x']},
    {what: 'a flag the command lacks', args: () => ['validate', defaultPipeline, '--nope']},
    {what: 'validate', args: () => ['validate', defaultPipeline]},
    {what: 'a pipeline that is not there', args: (dir) => ['run', path.join(dir, 'nope.yaml')]},
    {what: 'a run, --json', args: () => ['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json']},
    {what: 'a run, with its progress', args: () => ['run', defaultPipeline, '--input', prd, '--decision', 'go']},
    {what: 'a run held for its review', args: () => ['run', defaultPipeline, '--input', prd]},
    {what: 'runs list in an empty folder', args: () => ['runs', 'list', '--json']},
    {what: 'audit verify of no store', args: () => ['audit', 'verify']},
    {
      what: 'a secret of the environment in an error, redacted',
      args: (dir) => ['run', path.join(dir, `${SECRET}.yaml`)],
      env: {PIPE_HERE_TOKEN: SECRET},
    },
  ]

  for (const {what, args, env} of cases) {
    it(what, async () => {
      const {process, here} = await both(args, env)
      expect(here.code, `${here.stdout}\n${here.stderr}`).to.equal(process.code)
      expect(here.stdout).to.equal(process.stdout)
      expect(here.stderr).to.equal(process.stderr)
      if (env) expect(here.stderr).to.not.contain(SECRET).and.to.contain('pipe-here-')
    })
  }

  it('leaves this process as it found it: its environment, folder, exit code and what it redacts', async () => {
    const before = {env: {...process.env}, cwd: process.cwd(), exitCode: process.exitCode}
    const {dir, cleanup} = await tempDir()
    try {
      const failed = await pipeHere(['run', path.join(dir, 'nope.yaml')], {cwd: dir, env: {PIPE_HERE_TOKEN: SECRET}})
      expect(failed.code).to.equal(2)
      expect({env: {...process.env}, cwd: process.cwd(), exitCode: process.exitCode}).to.deep.equal(before)
      // A later command in a process that was never told the secret prints it as it is.
      const plain = await pipeHere(['run', path.join(dir, `${SECRET}.yaml`)], {cwd: dir})
      expect(plain.stderr).to.contain(SECRET)
    } finally {
      await cleanup()
    }
  })

  it('lends a process started while a command runs here the environment of the test, not that of the command', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const command = pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir, env: {PIPE_HERE_ONLY: 'the command'}})
      // Once the command holds process.env (a turn of the event loop at a time: the run takes many).
      while (ownEnv.held === undefined) await new Promise((resolve) => setImmediate(resolve))
      expect(process.env.PIPE_HERE_ONLY).to.equal('the command')
      const beside = node(['-e', 'process.stdout.write(process.env.PIPE_HERE_ONLY ?? "unset")'], {cwd: dir})
      const [ran, seen] = await Promise.all([command, beside])
      expect(ran.code, ran.stderr).to.equal(0)
      expect(seen.stdout).to.equal('unset')
    } finally {
      await cleanup()
    }
  })

  it('says a promise left rejected with no handler as the process would die of it: its stack, exit 1', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const command = pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir})
      while (ownEnv.held === undefined) await new Promise((resolve) => setImmediate(resolve))
      // Left behind while the command runs, as a bug of its own would leave it.
      void Promise.reject(new Error('a rejection nobody handled'))
      const result = await command
      expect(result.code).to.equal(1)
      expect(result.stderr).to.contain('Error: a rejection nobody handled')
      const after = await pipeHere(['--version'], {cwd: dir})
      expect(after.code, 'the next command').to.equal(0)
    } finally {
      await cleanup()
    }
  })

  it('changes nothing of this process when the folder it is given is not there', async () => {
    const before = {env: {...process.env}, cwd: process.cwd()}
    let error: unknown
    await pipeHere(['--version'], {cwd: '/nonexistent/pipe-here', env: {PIPE_HERE_ONLY: 'x'}}).catch((e: unknown) => (error = e))
    expect((error as NodeJS.ErrnoException | undefined)?.code).to.equal('ENOENT')
    expect({env: {...process.env}, cwd: process.cwd()}).to.deep.equal(before)
    expect(ownEnv.held).to.equal(undefined)
    expect((await pipeHere(['--version'])).code).to.equal(0)
  })

  it('runs commands called together one after another', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      const results = await Promise.all([1, 2, 3].map(() => pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'go', '--json'], {cwd: dir})))
      const ids = results.map((r) => (JSON.parse(r.stdout) as {run_id: string}).run_id)
      expect(new Set(ids).size).to.equal(3)
      for (const r of results) expect(r.code, r.stderr).to.equal(0)
    } finally {
      await cleanup()
    }
  })

  it('refuses what a process reads once (a fault point, a collector, the locale) and a prompt on its stdin', () => {
    expect(() => pipeHere(['--version'], {env: {PIPE_FAULT_KILL_AT: 'x'}})).to.throw(/PIPE_FAULT_KILL_AT is read once per process/)
    for (const name of ['OTEL_EXPORTER_OTLP_ENDPOINT', 'LANG', 'LC_ALL', 'NODE_OPTIONS', 'PIPE_SIGNAL_GRACE_MS', 'LD_PRELOAD', 'FAKETIME'])
      expect(() => pipeHere(['--version'], {env: {[name]: 'x'}}), name).to.throw(new RegExp(`${name} is read once`))
    expect(() => pipeHere(['--version'], {env: {PIPE_INTERACTIVE: '1'}})).to.throw(/PIPE_INTERACTIVE=1/)
  })

  it('asks no one at the terminal of its process: a run held for its review pauses as under a pipe', async function () {
    // pipe()'s process never has a terminal; this test's process may (npm test in a terminal): under `script` it has one.
    if (spawnSync('script', ['--version']).status !== 0) this.skip()
    const {dir, cleanup} = await tempDir()
    try {
      const out = path.join(dir, 'result.json')
      const code = [
        `const {pipeHere} = await import(${JSON.stringify(path.join(repoRoot, 'test', 'helpers', 'pipe-here.ts'))})`,
        `const result = await pipeHere(${JSON.stringify(['run', defaultPipeline, '--input', prd])}, {cwd: ${JSON.stringify(dir)}})`,
        `const {isatty} = await import('node:tty')`,
        `;(await import('node:fs')).writeFileSync(${JSON.stringify(out)}, JSON.stringify({...result, terminal: isatty(0) && isatty(2)}))`,
      ].join('\n')
      const script = path.join(dir, 'here.mts')
      await writeFile(script, code)
      spawnSync('script', ['-qec', `${process.execPath} --import=tsx ${script} </dev/tty`, '/dev/null'], {cwd: repoRoot, input: '', timeout: 120000})
      const result = JSON.parse(await readFile(out, 'utf8')) as CliResult & {terminal: boolean}
      expect(result.terminal, 'the process ran on a terminal').to.equal(true)
      expect(result.stderr).to.not.contain('Decision [')
      expect(result.code, result.stderr).to.equal(10)
    } finally {
      await cleanup()
    }
  })
})
