/**
 * One path from argv to a command: the router finds every command and the command layer parses it, `pipe run` included (src/cli/router.ts),
 * and every failure is said by one renderer: code, message, hint, log and trace, on stderr and with
 * --json as one JSON document. The argv forms the removed fast path of `pipe run` read are run here
 * through bin/run.js, with the answers they gave.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {closeSync, existsSync, openSync, readFileSync, writeFileSync} from 'node:fs'
import path from 'node:path'
import {bin, defaultPipeline, examples, json, pipe, repoRoot, tempDir, withoutRunVariance, type CliResult} from '../helpers/cli.js'

const TRACE = /^Trace: (tr-[0-9a-f]{16})$/m

describe('pipe run through the one CLI path: the argv forms and their answers', function () {
  this.timeout(240000)

  const cases: Array<{what: string; args: string[]; code: number; stdout?: RegExp; stderr?: RegExp; status?: string; error?: string}> = [
    {
      what: 'a run that succeeds',
      args: [defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--store', '.pipe'],
      code: 0,
      stdout: /^run R-\d{8}-\d{4} {2}succeeded /,
    },
    {
      what: 'a run that succeeds, --json',
      args: [defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'],
      code: 0,
      status: 'succeeded',
    },
    {
      what: 'a run that stops for a review decision',
      args: [defaultPipeline, '--input', path.join(examples, 'full-prd.md')],
      code: 10,
      stdout: /awaiting_input[\s\S]*needs a review decision/,
    },
    {
      what: 'a pipeline that does not exist',
      args: [path.join(repoRoot, 'pipelines', 'missing.yaml'), '--text', 'x'],
      code: 2,
      stderr: /^Error \[E_CONFIG\]: .*missing\.yaml is not a valid pipeline/m,
    },
    {
      what: 'a pipeline that does not exist, --json',
      args: [path.join(repoRoot, 'pipelines', 'missing.yaml'), '--text', 'x', '--json'],
      code: 2,
      error: 'E_CONFIG',
    },
    {
      what: 'a bad feature id',
      args: [defaultPipeline, '--text', 'x', '--feature', 'F-1'],
      code: 2,
      stderr: /^Error \[E_INVALID_ARGS\]: --feature: "F-1" is not a feature id/m,
    },
    {
      what: '-i without NAME=VALUE',
      args: [defaultPipeline, '-i', 'examples/full-prd.md'],
      code: 2,
      stderr: /^Error \[E_INVALID_ARGS\]: -i examples\/full-prd\.md: -i sets a pipeline input and takes NAME=VALUE/m,
    },
    {
      what: 'a dry run, --json',
      args: [defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--dry-run', '--json'],
      code: 0,
      stdout: /"denied": \[\]/,
    },
    {what: 'a run whose step fails', args: ['failing.yaml', '--text', 'x'], code: 1, stderr: /^Error \[E_BUILD_FAIL\]: step boom ended/m, stdout: /failed/},
    {
      what: 'an unknown flag',
      args: [defaultPipeline, '--bogus'],
      code: 2,
      stderr: /^Error \[E_INVALID_ARGS\]: Nonexistent flag: --bogus.*\nTry this: Run pipe run --help for usage\.\nLog: .*\nTrace: /m,
    },
    {what: 'an unknown flag, --json', args: [defaultPipeline, '--bogus', '--json'], code: 2, error: 'E_INVALID_ARGS'},
    {
      what: "a value not among a flag's options",
      args: [defaultPipeline, '--text', 'x', '--provider', 'maybe'],
      code: 2,
      stderr: /^Error \[E_INVALID_ARGS\]: Expected --provider=maybe to be one of: auto, offline, openai/m,
    },
    {what: '--note without --decision', args: [defaultPipeline, '--text', 'x', '--note', 'n'], code: 2, stderr: /^Error \[E_INVALID_ARGS\]: .*--decision/m},
    {what: 'no pipeline', args: ['--text', 'x'], code: 2, stderr: /^Error \[E_INVALID_ARGS\]: Missing 1 required arg: pipeline/m},
  ]
  for (const {what, args, code, stdout, stderr, status, error} of cases) {
    it(what, async () => {
      const {dir, cleanup} = await tempDir()
      try {
        writeFileSync(path.join(dir, 'failing.yaml'), 'version: 1\nname: failing\nsteps:\n  - {id: boom, kind: command, run: [git, status]}\n')
        writeFileSync(path.join(dir, 'policy.yaml'), readFileSync(path.join(repoRoot, 'policy.yaml'), 'utf8'))
        const r = await pipe(['run', ...args], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
        expect(r.code, r.stderr).to.equal(code)
        if (stdout) expect(r.stdout).to.match(stdout)
        if (stderr) expect(r.stderr).to.match(stderr)
        if (status) expect(json<{status: string}>(r).status).to.equal(status)
        if (error) {
          const body = json<{error: {code: string; trace_id: string; log: string}}>(r)
          expect(body.error.code).to.equal(error)
          expect(body.error.trace_id).to.equal(TRACE.exec(r.stderr)?.[1])
          expect(body.error.log).to.match(/orchestrator-\d{8}\.log$/)
        }
        // An error is said once, by the one renderer: code, hint, log and trace.
        if (code !== 0 && code !== 10) expect(r.stderr.match(/^Error \[E_[A-Z_]+\]: /gm), r.stderr).to.have.length(1)
        if (code === 2) expect(r.stderr).to.match(/^Try this: .+\nLog: .+\nTrace: tr-/m)
      } finally {
        await cleanup()
      }
    })
  }
})

describe('an unknown command, wherever the router meets it, is one error', function () {
  this.timeout(120000)

  /** The error's code, message, hint and exit code, with and without --json, for each form. */
  async function unknown(args: string[]): Promise<{code: number | null; text: string; json?: {code: string; message: string; hint: string}}> {
    const {dir, cleanup} = await tempDir()
    try {
      const r = await pipe(args, {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
      expect(r.stderr, args.join(' ')).to.match(/^Error \[E_INVALID_ARGS\]: .*\nTry this: .*\nLog: .*orchestrator-\d{8}\.log\nTrace: tr-[0-9a-f]{16}\n/m)
      expect(r.stderr, `${args.join(' ')}: oclif's old error format`).to.not.contain('›')
      const text = withoutRunVariance(r.stderr, dir).replace(/^Log: .*$/m, 'Log: <log>')
      if (!args.includes('--json')) return {code: r.code, text}
      const body = json<{error: {code: string; message: string; hint: string; trace_id: string}}>(r)
      expect(body.error.trace_id).to.equal(TRACE.exec(r.stderr)?.[1])
      return {code: r.code, text, json: {code: body.error.code, message: body.error.message, hint: body.error.hint}}
    } finally {
      await cleanup()
    }
  }

  it('pipe help valdate says what pipe valdate says: E_INVALID_ARGS, the did-you-mean, a hint, the log and a trace id', async () => {
    const direct = await unknown(['valdate'])
    expect(direct.code).to.equal(2)
    expect(direct.text).to.contain('Error [E_INVALID_ARGS]: unknown command "valdate" — did you mean "validate"?\nTry this: pipe --help lists the commands.\n')
    expect(await unknown(['help', 'valdate'])).to.deep.equal(direct)
  })

  it('pipe help valdate --json says what pipe valdate --json says, the did-you-mean included', async () => {
    const direct = await unknown(['valdate', '--json'])
    expect(direct.json).to.deep.equal({
      code: 'E_INVALID_ARGS',
      message: 'unknown command "valdate" — did you mean "validate"?',
      hint: 'pipe --help lists the commands.',
    })
    expect(await unknown(['help', 'valdate', '--json'])).to.deep.equal(direct)
  })

  it('an unknown command under a topic names the command meant, through help too', async () => {
    const direct = await unknown(['runs', 'lst'])
    expect(direct.text).to.contain('unknown command "runs lst" — did you mean "runs list"?')
    expect(await unknown(['help', 'runs', 'lst'])).to.deep.equal(direct)
  })
})

describe('pipe run: an error no command catches', function () {
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

  it('ends with exit 1 and the error on stderr, its source line a line, not a screenful of the bundle', async function () {
    if (!existsSync('/dev/full')) this.skip()
    const {dir, cleanup} = await tempDir()
    try {
      const args = ['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']
      const a = await toFullDisk([bin, ...args], dir, path.join(dir, 'home'))
      expect(a.code, a.stderr).to.equal(1)
      expect(a.stderr).to.contain('\nError: ENOSPC: no space left on device, write\n')
      // Node prints the line of the frame that threw: the bundle's lines must stay short for that.
      const longest = (text: string): number => Math.max(...text.split('\n').map((line) => line.length))
      expect(longest(a.stderr), a.stderr.slice(0, 2000)).to.be.at.most(400)
    } finally {
      await cleanup()
    }
  })
})

describe("pipe run: Ctrl-C during a noop's sleep_ms (util/sleep.ts)", function () {
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

  it('ends the run interrupted with exit 130', async () => {
    const {dir, cleanup} = await tempDir()
    try {
      writeFileSync(
        path.join(dir, 'sleepy.yaml'),
        'version: 1\nname: sleepy\nsteps:\n  - {id: first, kind: noop, next: nap}\n  - {id: nap, kind: noop, sleep_ms: 3600000}\n',
      )
      const a = await interrupted([bin, 'run', 'sleepy.yaml', '--text', 'x'], dir, path.join(dir, 'home'))
      expect({code: a.code, signal: a.signal}, a.stderr).to.deep.equal({code: 130, signal: null})
      expect(a.stderr).to.contain('interrupted by a signal')
      expect(a.stdout).to.match(/interrupted/)
    } finally {
      await cleanup()
    }
  })
})
