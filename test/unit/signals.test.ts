/**
 * A signal always ends pipe: even when the work ignores the abort and a libuv pool thread is stuck
 * in a blocking open() of a FIFO (which makes process.exit() hang), the grace period or a second
 * signal ends the process by that signal.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bundled} from '../helpers/bundled.js'
import {repoRoot, tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-signals-')))
afterEach(async () => cleanup())

/** A process inside withSignals whose work never ends and whose pool thread is blocked on a FIFO nobody writes. */
async function stuck(
  graceMs: number,
): Promise<{child: ReturnType<typeof spawn>; ready: Promise<void>; exit: Promise<{code: number | null; signal: NodeJS.Signals | null; stderr: string}>}> {
  const fifo = path.join(dir, 'never.fifo')
  await new Promise((resolve) => spawn('mkfifo', [fifo]).on('close', resolve))
  const script = path.join(dir, 'stuck.ts')
  await writeFile(
    script,
    `import {readFile} from 'node:fs/promises'
import {withSignals} from ${JSON.stringify(path.join(repoRoot, 'src', 'cli', 'signals.ts'))}
await withSignals(() => {
  void readFile(${JSON.stringify(fifo)}).catch(() => undefined)
  process.stderr.write('ready\\n')
  return new Promise(() => undefined)
})
`,
  )
  // Bundled and run by plain node (helpers/bundled.ts): tsx cost the child ~0.6 s of CPU to start.
  const child = spawn(process.execPath, [bundled(script)], {
    cwd: repoRoot,
    env: {...process.env, PIPE_SIGNAL_GRACE_MS: String(graceMs)},
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  let onReady: () => void = () => undefined
  const ready = new Promise<void>((resolve) => (onReady = resolve))
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    stderr += d
    if (stderr.includes('ready\n')) onReady()
  })
  // A safety net only: a regression fails the test instead of hanging the suite.
  const timer = setTimeout(() => child.kill('SIGKILL'), 60000)
  const exit = new Promise<{code: number | null; signal: NodeJS.Signals | null; stderr: string}>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({code, signal, stderr})
    }),
  )
  return {child, ready, exit}
}

describe('withSignals: a signal always ends the process', function () {
  this.timeout(90000)

  it('ends a process whose work ignores the abort once the grace period is over', async () => {
    const {child, ready, exit} = await stuck(300)
    await ready
    child.kill('SIGTERM')
    const result = await exit
    expect(result.signal, result.stderr).to.equal('SIGTERM')
    expect(result.stderr).to.contain('still not stopped after 300 ms; quitting now')
  })

  it('ends it at once at a second signal', async () => {
    const {child, ready, exit} = await stuck(600000)
    await ready
    child.kill('SIGINT')
    await new Promise<void>((resolve) => {
      const check = (d: string): void => {
        if (d.includes('again to quit at once')) resolve()
      }
      child.stderr!.on('data', check)
    })
    child.kill('SIGINT')
    const result = await exit
    expect(result.signal, result.stderr).to.equal('SIGINT')
  })
})
