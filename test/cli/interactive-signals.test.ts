/** Ctrl-C is honoured for the whole interactive flow: at every prompt and in every session it drives. */
import {expect} from 'chai'
import {spawn, type ChildProcessWithoutNullStreams} from 'node:child_process'
import {existsSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, repoRoot, tempDir} from '../helpers/cli.js'
import {changeIn} from '../helpers/wait.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-sigint-')))
afterEach(async () => cleanup())

interface Live {
  child: ChildProcessWithoutNullStreams
  stdout: () => string
  stderr: () => string
  /** Resolves when stderr has shown `text` (or the process ended first). */
  waitFor: (text: string) => Promise<void>
  done: Promise<{code: number | null; signal: NodeJS.Signals | null}>
}

/** The built CLI with stdin kept open, as at a terminal (PIPE_INTERACTIVE=1 makes it prompt). */
function live(args: string[]): Live {
  const env: NodeJS.ProcessEnv = {...process.env, NO_COLOR: '1', PIPE_INTERACTIVE: '1', PIPE_HOME: path.join(dir, 'home')}
  delete env.PIPE_STORE
  delete env.OPENAI_API_KEY
  delete env.OPENAI_BASE_URL
  const child = spawn(process.execPath, [bin, ...args], {cwd: dir, env})
  let out = ''
  let err = ''
  const watchers: Array<{text: string; resolve: () => void}> = []
  const check = (): void => {
    for (const w of watchers.splice(0)) (err.includes(w.text) ? w.resolve : () => watchers.push(w))()
  }
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    err += d
    check()
  })
  const timer = setTimeout(() => child.kill('SIGKILL'), 90000)
  const done = new Promise<{code: number | null; signal: NodeJS.Signals | null}>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      for (const w of watchers.splice(0)) w.resolve()
      resolve({code, signal})
    }),
  )
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    waitFor: (text) => (err.includes(text) || child.exitCode !== null ? Promise.resolve() : new Promise<void>((resolve) => watchers.push({text, resolve}))),
    done,
  }
}

async function runRecord(runId: string): Promise<{status: string}> {
  return JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runId, 'run.json'), 'utf8')) as {status: string}
}

describe('Ctrl-C in the interactive flow (CLI)', function () {
  this.timeout(120000)

  it('at a question asked after the first session: the run stays paused and pipe exits 10', async () => {
    const run = live(['run', path.join(repoRoot, 'pipelines', 'default.yaml'), '--input', path.join(repoRoot, 'examples', 'one-sentence.txt')])
    await run.waitFor('[1/')
    expect(run.stderr()).to.contain('[1/')
    run.child.kill('SIGINT')
    const end = await run.done
    expect(end, run.stderr()).to.deep.equal({code: 10, signal: null})
    expect(run.stderr()).to.contain('(interrupted; the run stays paused)')
    const runId = /run (R-\d{8}-\d{4})/.exec(run.stdout())![1]!
    expect((await runRecord(runId)).status).to.equal('awaiting_input')
  })

  it('in a session the flow drives after a decision: the step stops and the run is recorded interrupted (exit 130)', async () => {
    const marker = path.join(dir, 'started')
    const script = `require('fs').writeFileSync(${JSON.stringify(marker)}, ''); setTimeout(() => {}, 60000)`
    await writeFile(
      path.join(dir, 'policy.yaml'),
      `version: 1\nallowed_commands:\n  - [node, -e, ${JSON.stringify(script)}]\nforbidden_paths: []\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 90000}\n`,
    )
    const pipeline = path.join(dir, 'slow.yaml')
    await writeFile(
      pipeline,
      `version: 1\nname: slow\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: r}\n  - {id: r, kind: review, on: {go: work}}\n  - {id: work, kind: command, run: [node, -e, ${JSON.stringify(script)}], on: {success: end, failure: end}}\n  - {id: end, kind: noop}\n`,
    )
    const run = live(['run', pipeline, '--text', 'Users must be able to export the monthly report as a PDF file.'])
    await run.waitFor('Decision [go/hold/drop]: ')
    run.child.stdin.write('go\n\n')
    // Wait for the command to be running: it leaves the marker file first thing (watched, not polled).
    await changeIn(dir, () => existsSync(marker), 'the command starting', run.done).catch(() => undefined)
    expect(existsSync(marker), run.stderr()).to.equal(true)
    run.child.kill('SIGINT')
    const end = await run.done
    expect(end, run.stderr()).to.deep.equal({code: 130, signal: null})
    const runId = /run (R-\d{8}-\d{4})/.exec(run.stdout())![1]!
    expect((await runRecord(runId)).status).to.equal('interrupted')
  })
})
