/**
 * step-state-binding.test.ts's case on the PostgreSQL store: a genuinely sealed step state copied
 * to another run, step or attempt in the pipe_step_state table is refused there, keyed or not.
 */
import {expect} from 'chai'
import {PostgresStore} from '../../src/store/postgres/store.js'
import type {RunStore} from '../../src/store/types.js'
import {startCluster} from '../helpers/postgres.js'

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

    it('in the PostgreSQL store', async function () {
      // This process's shared cluster (helpers/postgres.ts); skipped without PostgreSQL, failed under CI.
      const cluster = await startCluster(this)
      const db = await cluster.createDatabase()
      const store = await PostgresStore.connect(cluster.url(db))
      try {
        await store.writeStepState(HONEST, 'agent', 2, {pending: 'rm -rf build'})
        for (const [runId, step, seq] of [
          [OTHER, 'agent', 2],
          [HONEST, 'agent', 3],
          [HONEST, 'other', 2],
        ] as const) {
          await cluster.sql(
            db,
            'INSERT INTO pipe_step_state (run_id, step, seq, body) SELECT $1, $2, $3, body FROM pipe_step_state WHERE run_id = $4 AND seq = 2 AND step = $5',
            [runId, step, seq, HONEST, 'agent'],
          )
          expect(await refused(store, runId, step, seq)).to.contain(`belongs to step "agent" (seq 2) of "${HONEST}"`)
        }
        expect(await store.readStepState(HONEST, 'agent', 2)).to.deep.equal({pending: 'rm -rf build'})
      } finally {
        await store.close()
      }
    })
  })
}
