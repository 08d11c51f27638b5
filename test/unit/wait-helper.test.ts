/** test/helpers/wait.ts: the tests' waits end on the event itself, and fail (not hang) when it cannot come. */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {spawn} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {tempDir} from '../helpers/cli.js'
import {changeIn} from '../helpers/wait.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-wait-')))
afterEach(async () => cleanup())

describe('waiting for an event (test helpers)', () => {
  it('resolves when a file appears in the folder after the wait began, and at once when it is already there', async () => {
    const file = path.join(dir, 'reached.1')
    const waiting = changeIn(dir, () => existsSync(file), 'the file')
    let done = false
    void waiting.then(() => (done = true))
    await new Promise((resolve) => setImmediate(resolve))
    expect(done, 'nothing to see yet').to.equal(false)
    await writeFile(file, '')
    await waiting
    await changeIn(dir, () => existsSync(file), 'the file')
  })

  it('rejects, naming what it waited for, when the process that was to make the change ends first', async () => {
    const error = await changeIn(dir, () => existsSync(path.join(dir, 'never')), 'the pause point', Promise.resolve()).then(
      () => null,
      (e: Error) => e,
    )
    expect(error?.message).to.equal('the pause point never happened: the process ended first')
  })
})

describe('waiting for a change anywhere under a folder (test helpers)', function () {
  this.timeout(120000)

  it('survives folders that appear and are renamed away at once, as a store makes its runs, and sees a file written deep inside', async () => {
    // Another process makes and renames folders as fast as it can (a store's .new-R-... folders):
    // Node 20's own recursive watch read such a folder after it was gone and threw, uncaught.
    const churn = path.join(dir, 'runs')
    await mkdir(churn)
    const script = `const fs = require('fs'), path = require('path'); const d = ${JSON.stringify(churn)};
for (let i = 0; i < 3000; i++) { const t = path.join(d, '.new-' + i); fs.mkdirSync(t); fs.writeFileSync(path.join(t, 'run.json'), '{}'); fs.renameSync(t, path.join(d, 'R-' + i)); fs.rmSync(path.join(d, 'R-' + i), {recursive: true}) }
fs.mkdirSync(path.join(d, 'R-last')); fs.writeFileSync(path.join(d, 'R-last', 'run.json'), '{"done":true}')`
    const child = spawn(process.execPath, ['-e', script], {stdio: 'ignore'})
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
    const last = path.join(churn, 'R-last', 'run.json')
    await changeIn(churn, () => existsSync(last), 'the last run written', exited, true)
    expect(await exited).to.equal(0)
  })
})
