/**
 * Input is bounded whatever it is: devices, FIFOs and standard input are read with
 * resource_limits.max_input_bytes enforced while reading, and a signal ends a blocked read.
 *
 * Every bounded read is a real `pipe` process (a read that never ends would hold this process; the
 * helper's timeout kills a process), as are stdin, a FIFO fed alongside and a signal. The refusals of
 * malformed ids run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
 * and exit code); `run` and `runs show` are seen from a process above.
 */
import {expect} from 'chai'
import {spawn, type ChildProcess} from 'node:child_process'
import {closeSync, constants, existsSync, open as openFd} from 'node:fs'
import {readdir} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import {bin, defaultPipeline, pipe, tempDir, testHome, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-input-')))
afterEach(async () => cleanup())

const storeDir = (): string => path.join(dir, '.pipe')

/** Starts the built CLI with stdin as a pipe this test feeds; the result arrives at the exit event. */
function start(args: string[]): {child: ChildProcess; done: Promise<CliResult>} {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: dir,
    env: {...process.env, NO_COLOR: '1', PIPE_HOME: testHome, PIPE_STORE: undefined, OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined},
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
  child.stdin.on('error', () => undefined)
  // Only a safety net so that a regression fails the test instead of hanging the suite.
  const timer = setTimeout(() => child.kill('SIGKILL'), 60000)
  const done = new Promise<CliResult>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({code, signal, stdout, stderr})
    }),
  )
  return {child, done}
}

/** Writes to a stream until it breaks (the reader went away) or `until` settles. */
async function flood(stream: NodeJS.WritableStream, until: Promise<unknown>): Promise<number> {
  const chunk = Buffer.alloc(64 * 1024, 'requirement text ')
  let stopped = false
  let written = 0
  void until.then(() => (stopped = true))
  stream.on('error', () => (stopped = true))
  while (!stopped) {
    written += chunk.length
    if (!stream.write(chunk))
      await new Promise<void>((resolve) => {
        const go = (): void => {
          stream.off('drain', go)
          stream.off('error', go)
          resolve()
        }
        stream.on('drain', go).on('error', go)
        void until.then(go)
      })
  }
  return written
}

/**
 * Opens the FIFO's write end once the reader has opened it: a blocking open (in libuv's thread pool,
 * not this thread) returns at that very moment, so nothing is polled. If `until` settles first (pipe
 * ended without opening it), a reader of the test's own releases the open and there is no writer.
 */
async function openWriter(fifo: string, until: Promise<unknown>): Promise<net.Socket | undefined> {
  let opened = false
  let gaveUp = false
  let released: Promise<number | undefined> = Promise.resolve(undefined)
  void until.then(() => {
    if (opened) return
    gaveUp = true
    released = new Promise((resolve) => openFd(fifo, constants.O_RDONLY | constants.O_NONBLOCK, (error, fd) => resolve(error ? undefined : fd)))
  })
  const fd = await new Promise<number>((resolve, reject) => openFd(fifo, constants.O_WRONLY, (error, writer) => (error ? reject(error) : resolve(writer))))
  opened = true
  if (!gaveUp) return new net.Socket({fd, readable: false, writable: true})
  closeSync(fd)
  const reader = await released
  if (reader !== undefined) closeSync(reader)
  return undefined
}

async function mkfifo(name: string): Promise<string> {
  const file = path.join(dir, name)
  const made = await new Promise<number | null>((resolve) => spawn('mkfifo', [file]).on('close', resolve))
  expect(made, 'mkfifo').to.equal(0)
  return file
}

function expectCapped(result: CliResult, what: RegExp): void {
  expect(result.signal, `ended by ${result.signal ?? 'itself'}; stderr: ${result.stderr}`).to.equal(null)
  expect(result.code, result.stderr).to.equal(2)
  expect(result.stderr).to.match(/^Error \[E_INPUT\]: /m)
  expect(result.stderr).to.match(what)
  expect(result.stderr).to.contain('max_input_bytes')
}

describe('pipe run: input is bounded whatever it is', function () {
  this.timeout(90000)

  it('stops reading --input /dev/urandom at max_input_bytes and leaves the store unwritten', async function () {
    if (!existsSync('/dev/urandom')) this.skip()
    const result = await pipe(['run', defaultPipeline, '--input', '/dev/urandom'], {cwd: dir, timeoutMs: 60000})
    expectCapped(result, /input file \/dev\/urandom is larger than the limit of 1048576 bytes/)
    expect(existsSync(storeDir())).to.equal(false)
  })

  it('bounds the YAML files it is given too: a pipeline, a policy or an answers file that never ends', async function () {
    if (!existsSync('/dev/urandom')) this.skip()
    const validate = await pipe(['validate', '/dev/urandom'], {cwd: dir, timeoutMs: 60000})
    expect(validate.signal).to.equal(null)
    expect(validate.code).to.equal(2)
    expect(validate.stdout).to.contain('/dev/urandom:1:1').and.contain('file is larger than the limit of 5242880 bytes; pipe stopped reading it there')
    for (const flag of ['--answers', '--policy']) {
      const result = await pipe(['run', defaultPipeline, '--text', 'Users must be able to export invoices as CSV.', flag, '/dev/urandom'], {
        cwd: dir,
        timeoutMs: 60000,
      })
      expect(result.signal, flag).to.equal(null)
      expect(result.code, `${flag}: ${result.stderr}`).to.equal(2)
      expect(result.stderr, flag).to.contain('pipe stopped reading it there')
    }
    expect(existsSync(storeDir())).to.equal(false)
  })

  it('gives up on a store where folders cannot be made (/proc/1), instead of trying for ever', async function () {
    if (!existsSync('/proc/1')) this.skip()
    const result = await pipe(['run', defaultPipeline, '--text', 'Users must be able to export invoices as CSV.', '--store', '/proc/1'], {
      cwd: dir,
      timeoutMs: 60000,
    })
    expect(result.signal).to.equal(null)
    expect(result.code, result.stderr).to.equal(1)
    expect(result.stderr).to.contain('cannot create the store at /proc/1').and.contain('E_IO')
  })

  it('still ends with its error when the daily log cannot be made (PIPE_HOME=/proc/1)', async function () {
    if (!existsSync('/proc/1')) this.skip()
    const result = await pipe(['runs', 'show', 'R-20261122-9999', '--store', storeDir()], {cwd: dir, timeoutMs: 60000, env: {PIPE_HOME: '/proc/1'}})
    expect(result.signal).to.equal(null)
    expect(result.code, result.stderr).to.not.equal(0)
    expect(result.stderr).to.match(/E_NOT_FOUND/)
  })

  it('stops reading a FIFO whose writer never ends', async () => {
    const fifo = await mkfifo('endless.fifo')
    const {done} = start(['run', defaultPipeline, '--input', fifo])
    const writer = await openWriter(fifo, done)
    expect(writer, 'pipe opened the FIFO').to.not.equal(undefined)
    const written = await flood(writer!, done)
    writer!.destroy()
    const result = await done
    expectCapped(result, /input file .*endless\.fifo is larger than the limit of 1048576 bytes/)
    expect(written).to.be.greaterThan(1048576)
    expect(existsSync(storeDir())).to.equal(false)
  })

  it('still reads a FIFO that ends, as a whole requirement', async () => {
    const fifo = await mkfifo('req.fifo')
    const {done} = start(['run', defaultPipeline, '--input', fifo, '--dry-run', '--json'])
    const writer = await openWriter(fifo, done)
    writer!.end('Users must be able to export their invoices as CSV.\n')
    const result = await done
    expect(result.code, result.stderr).to.equal(0)
    expect(JSON.parse(result.stdout).input).to.deep.include({kind: 'file', bytes: 52})
  })

  it('stops reading standard input of endless data', async () => {
    const {child, done} = start(['run', defaultPipeline, '--input', '-'])
    const written = await flood(child.stdin!, done)
    const result = await done
    expectCapped(result, /standard input is larger than the limit of 1048576 bytes/)
    expect(written).to.be.greaterThan(1048576)
    expect(existsSync(storeDir())).to.equal(false)
  })

  it('ends on SIGTERM while blocked reading a FIFO that never sends anything', async () => {
    const fifo = await mkfifo('silent.fifo')
    const {child, done} = start(['run', defaultPipeline, '--input', fifo])
    // Once this open succeeds, pipe has the FIFO open and waits for data that never comes.
    const writer = await openWriter(fifo, done)
    expect(writer, 'pipe opened the FIFO').to.not.equal(undefined)
    child.kill('SIGTERM')
    const result = await done
    writer!.destroy()
    expect(result.signal, `ended by ${result.signal ?? 'itself'}; stderr: ${result.stderr}`).to.not.equal('SIGKILL')
    expect(result.stderr).to.contain('interrupted while reading input file')
    expect(existsSync(storeDir())).to.equal(false)
  })
})

describe('pipe: ids on the command line are checked before anything is written', function () {
  this.timeout(60000)

  it('refuses a bad --feature and leaves no store behind', async () => {
    for (const feature of ['bad', '../../etc/x', 'F-2026-1', '']) {
      const result = await pipeHere(['run', defaultPipeline, '--text', 'Users must be able to export invoices as CSV.', '--feature', feature], {cwd: dir})
      expect(result.code, result.stderr).to.equal(2)
      expect(result.stderr).to.contain(`Error [E_INVALID_ARGS]: --feature: ${JSON.stringify(feature)} is not a feature id (F-YYYY-NNN)`)
      expect(result.stderr).to.match(/^Try this: /m)
      expect(existsSync(storeDir()), `store after --feature ${feature}`).to.equal(false)
    }
  })

  it('refuses a bad --feature on a store that exists, adding no file to it', async () => {
    // The store the refusal must leave as it was, made as a user's first run makes it.
    const first = await pipeHere(['run', defaultPipeline, '--text', 'Users must be able to export invoices as CSV.', '--decision', 'go'], {cwd: dir})
    expect(first.code, first.stderr).to.be.oneOf([0, 10])
    const listing = async (): Promise<string[]> => (await readdir(storeDir(), {recursive: true})).map(String).sort()
    const before = await listing()
    const result = await pipeHere(['run', defaultPipeline, '--text', 'Another requirement for the CSV export.', '--feature', 'F-26-001'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(2)
    expect(result.stderr).to.contain('E_INVALID_ARGS')
    expect(await listing()).to.deep.equal(before)
  })

  it('refuses malformed run, spec, feature, step and target ids in every command', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['runs', 'show', '../x'], /"\.\.\/x" is not a run id/],
      [['resume', 'R-1'], /"R-1" is not a run id/],
      [['answer', 'nope', '--file', 'a.yaml'], /"nope" is not a run id/],
      [['review', 'nope', '--decision', 'go'], /"nope" is not a run id/],
      [['cancel', 'nope'], /"nope" is not a run id/],
      [['export', '../../tmp', '--dir', 'out'], /is not a run id/],
      [['publish', 'nope'], /"nope" is not a run id/],
      [['publish', 'R-20260101-0001', '--target', 'A B'], /--target: "A B" is not a publish target name/],
      [['replay', 'nope', '--check'], /"nope" is not a run id/],
      [['replay', 'R-20260101-0001', '--from', '../x'], /--from: "\.\.\/x" is not a step id/],
      [['rollback', 'nope'], /"nope" is not a run id/],
      [['rollback', 'R-20260101-0001', '--step', 'Bad Step'], /--step: "Bad Step" is not a step id/],
      [['snapshot', 'list', 'nope'], /"nope" is not a run id/],
      [['snapshot', 'show', 'nope'], /"nope" is not a run id/],
      [['snapshot', 'show', 'R-20260101-0001', '--step', '../x'], /--step: "\.\.\/x" is not a step id/],
      [['spec', 'show', 'S-1'], /"S-1" is not a spec version/],
      [['spec', 'diff', 'S-20260101-0001', 'x'], /"x" is not a spec version/],
      [['spec', 'list', '--feature', 'F-1'], /--feature: "F-1" is not a feature id/],
      [['spec', 'list', '--run', 'R-1'], /--run: "R-1" is not a run id/],
      [['runs', 'list', '--feature', 'x'], /--feature: "x" is not a feature id/],
      [['ledger', 'list', '--run', 'x'], /--run: "x" is not a run id/],
      [['ledger', 'list', '--feature', 'x'], /--feature: "x" is not a feature id/],
      [['audit', 'verify', 'x'], /"x" is not a run id/],
    ]
    for (const [args, message] of cases) {
      const result = await pipeHere(args, {cwd: dir})
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(2)
      expect(result.stderr, args.join(' ')).to.match(/^Error \[E_INVALID_ARGS\]: /m)
      expect(result.stderr, args.join(' ')).to.match(message)
      expect(result.stderr, args.join(' ')).to.match(/^Try this: /m)
    }
    expect(existsSync(storeDir())).to.equal(false)
    expect(existsSync(path.join(dir, 'out'))).to.equal(false)
  })
})
