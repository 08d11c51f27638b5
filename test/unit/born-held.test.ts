/**
 * A run is created started and held (Store.createStartedRun): when what follows its creation fails
 * before the engine drives it, its owner lock is let go, so the run can be resumed at once.
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir} from 'node:fs/promises'
import path from 'node:path'
import {defaultPolicy} from '../../src/policy/policy.js'
import {tempDir} from '../helpers/cli.js'
import {harness, pipelineFrom} from '../helpers/engine.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-born-')))
afterEach(async () => cleanup())

async function runIds(): Promise<string[]> {
  return (await readdir(path.join(dir, '.pipe', 'runs'))).filter((n) => n.startsWith('R-')).sort()
}

describe('a run born started and held', () => {
  for (const point of ['run-created', 'child-created:each']) {
    it(`lets go of its lock when the ${point} hook throws, and resumes to the end`, async () => {
      await pipelineFrom(dir, 'item', 'version: 1\nname: item\nsteps:\n  - {id: w, kind: noop}\n')
      const pipeline = await pipelineFrom(
        dir,
        'main',
        `version: 1\nname: main\nsteps:\n  - {id: each, kind: foreach, items: "\${{ ['a'] }}", pipeline: ./item.yaml, concurrency: 1}\n`,
      )
      let thrown = false
      const h = await harness(
        dir,
        {},
        {
          hook: (p) => {
            if (p === point && !thrown) {
              thrown = true
              throw new Error(`hook ${p}`)
            }
          },
        },
      )
      // Thrown out of the run (a top-level run), or the foreach step's failure (a child).
      const outcome = await h.start(pipeline).then(
        (o) => JSON.stringify(o),
        (error: unknown) => String(error),
      )
      expect(outcome).to.contain(`hook ${point}`)
      for (const id of await runIds()) expect(existsSync(path.join(dir, '.pipe', 'runs', id, 'owner.lock')), `${id} still locked`).to.equal(false)
      const [parent] = await runIds()
      const ended = await h.engine.resume(parent!, {pipeline, policy: defaultPolicy(), cwd: dir})
      expect(ended.status).to.equal('succeeded')
    })
  }
})
