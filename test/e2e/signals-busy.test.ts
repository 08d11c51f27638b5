/**
 * Ctrl-C and SIGTERM during a foreach whose children are instant steps (issue 35, item 9): the
 * store's writes are synchronous, so such a run never waited on the event loop and a signal was
 * seen only once every item had run. The run must stop with the children still to come left
 * unstarted, be recorded interrupted, and pipe resume must finish it.
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {existsSync} from 'node:fs'
import {readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, json, pipe, tempDir, testHome} from '../helpers/cli.js'
import {runTreeIn} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'

const ITEMS = 150

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-signals-busy-')))
afterEach(async () => cleanup())

interface Shown {
  status: string
  children: Array<{run_id: string; status: string}>
}

async function runCount(): Promise<number> {
  return (await readdir(path.join(dir, '.pipe', 'runs')).catch(() => [] as string[])).filter((n) => n.startsWith('R-')).length
}

describe('a signal during a busy foreach', function () {
  // Generous: a slow machine runs the rest of the items on resume.
  this.timeout(240000)

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal} stops a foreach of ${ITEMS} instant children (64 at once) before its end, records it interrupted, and pipe resume finishes it`, async () => {
      await writeFile(path.join(dir, 'items.json'), JSON.stringify(Array.from({length: ITEMS}, (_, i) => i)))
      await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\nallowed_commands:\n  - [cat, items.json]\n')
      await writeFile(
        path.join(dir, 'busy.yaml'),
        'version: 1\nname: busy\nsteps:\n  - {id: read, kind: command, run: [cat, items.json], parse: json, next: many}\n  - id: many\n    kind: foreach\n    items: ${{ steps.read.outputs.json }}\n    concurrency: 64\n    steps:\n      - {id: one, kind: noop}\n',
      )
      // The grace period is far beyond the test's timeout: only the run's own stop can end it with 130.
      const child = spawn(process.execPath, [bin, 'run', 'busy.yaml', '--text', 'x', '--policy', 'policy.yaml'], {
        cwd: dir,
        env: {...process.env, NO_COLOR: '1', PIPE_HOME: testHome, PIPE_SIGNAL_GRACE_MS: '600000'},
      })
      let stderr = ''
      child.stdout.resume()
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
      const done = new Promise<{code: number | null; signal: string | null}>((resolve) => child.on('close', (code, by) => resolve({code, signal: by})))
      // The parent and its first child exist: children are running.
      // Each folder is watched once it exists (a watch sees its own entries only).
      await changeIn(dir, () => existsSync(path.join(dir, '.pipe')), 'the store', done)
      await changeIn(path.join(dir, '.pipe'), () => existsSync(path.join(dir, '.pipe', 'runs')), 'the store', done)
      await changeIn(path.join(dir, '.pipe', 'runs'), async () => (await runCount()) >= 2, 'the first child run', done)
      child.kill(signal)
      const ended = await done
      expect(ended, stderr.slice(-2000)).to.deep.equal({code: 130, signal: null})
      expect(stderr).to.contain(`${signal}: stopping after recording the run as interrupted`)
      expect(stderr).to.match(/run (R-\d+-\d+) interrupted: interrupted by a signal/)
      const parent = /\nrun (R-\d+-\d+) interrupted: /.exec(stderr)![1]!

      // What \`pipe runs show PARENT --json\` says of it and its children, read in this process.
      const stopped: Shown = await runTreeIn(dir, parent)
      expect(stopped.status).to.equal('interrupted')
      expect(stopped.children.length, 'children started before the signal was seen').to.be.above(0).and.below(ITEMS)
      // Every child it started is either done or recorded interrupted: none is left claiming to run.
      expect(new Set(stopped.children.map((c) => c.status))).to.satisfy((s: Set<string>) => [...s].every((x) => x === 'succeeded' || x === 'interrupted'))

      const resumed = await pipe(['resume', parent, '--json'], {cwd: dir, timeoutMs: 200000})
      expect(resumed.code, resumed.stderr.slice(-2000)).to.equal(0)
      expect(json<{status: string}>(resumed).status).to.equal('succeeded')
      const finished: Shown = await runTreeIn(dir, parent)
      expect(finished.children).to.have.length(ITEMS)
      expect(finished.children.every((c) => c.status === 'succeeded')).to.equal(true)
    })
  }
})
