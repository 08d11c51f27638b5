/**
 * A step's working state decides what a resumed step does (which call a confirmation runs). Its seal
 * binds where it belongs: a genuinely sealed state copied to another run, step or attempt, as
 * anyone who can write the store's files or the pipe_step_state table could copy it, is refused
 * there, keyed or not (the copy's seal is a real one). The PostgreSQL store's case is
 * step-state-binding-postgres.test.ts (npm run test:pg; test:unit needs Node alone).
 */
import {expect} from 'chai'
import {copyFile, mkdir} from 'node:fs/promises'
import path from 'node:path'
import {Store} from '../../src/store/file/store.js'
import type {RunStore} from '../../src/store/types.js'
import {tempDir} from '../helpers/cli.js'

const HONEST = 'R-20260101-0001'
const OTHER = 'R-20260101-0002'

async function refused(store: RunStore, runId: string, step: string, seq: number): Promise<string> {
  try {
    await store.readStepState(runId, step, seq)
  } catch (error) {
    expect((error as {code?: string}).code).to.equal('E_INTEGRITY')
    return (error as Error).message
  }
  throw new Error(`the state copied to ${runId} ${step} ${seq} was used`)
}

for (const keyed of [false, true]) {
  describe(`a step state copied to another run, step or attempt is refused (${keyed ? 'with' : 'without'} PIPE_AUDIT_KEY)`, function () {
    this.timeout(120000)
    const saved = process.env.PIPE_AUDIT_KEY
    before(() => {
      if (keyed) process.env.PIPE_AUDIT_KEY = 'test-key-of-the-team'
      else delete process.env.PIPE_AUDIT_KEY
    })
    after(() => {
      if (saved === undefined) delete process.env.PIPE_AUDIT_KEY
      else process.env.PIPE_AUDIT_KEY = saved
    })

    it('in the file store', async () => {
      const {dir, cleanup} = await tempDir('pipe-state-binding-')
      try {
        const store = await Store.open(path.join(dir, '.pipe'))
        await store.writeStepState(HONEST, 'agent', 2, {pending: 'rm -rf build'})
        expect(await store.readStepState(HONEST, 'agent', 2)).to.deep.equal({pending: 'rm -rf build'})
        const from = store.stepStateLocation(HONEST, 'agent', 2)
        for (const [runId, step, seq] of [
          [OTHER, 'agent', 2],
          [HONEST, 'agent', 3],
          [HONEST, 'other', 2],
        ] as const) {
          const to = store.stepStateLocation(runId, step, seq)
          await mkdir(path.dirname(to), {recursive: true})
          await copyFile(from, to)
          expect(await refused(store, runId, step, seq)).to.contain(`belongs to step "agent" (seq 2) of "${HONEST}"`)
        }
      } finally {
        await cleanup()
      }
    })
  })
}
