/** test/helpers/wait.ts: the tests' waits end on the event itself, and fail (not hang) when it cannot come. */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
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
