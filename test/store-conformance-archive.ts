/**
 * The store conformance suite's archiving case (test/store-conformance.ts calls it inside each
 * store's suite): an ended run moves out through app/archive.ts, whatever the store, and a store that
 * cannot archive says so.
 */
import {expect} from 'chai'
import {archiveRuns, verifyArchiveFile} from '../src/app/archive.js'
import type {Release, RunStore} from '../src/store/types.js'
import type {RunRecord} from '../src/types/run.js'
import {tempDir} from './helpers/cli.js'
import {expectPipeError} from './helpers/expect.js'
import {at, stepCommit} from './store-conformance.js'

/** What the case needs of the suite's current test: its store, the releases it holds, and its helpers. */
export interface SuiteState {
  store: RunStore
  held: Release[]
  startRun: () => Promise<string>
  childOf: (parent: string, seq: number) => Promise<RunRecord>
}

export function archiveCases(state: () => SuiteState): void {
  it('moves an ended run out to an archive (pipe store archive), keeps an anchor of it, and its audit proves both; a live run, and an ended parent of a live child, stay', async () => {
    const {store, held, startRun, childOf} = state()
    const before = new Date('2026-11-22T00:00:00Z')
    if (!store.archiving) {
      // A store that cannot archive says so, and nothing moves.
      await expectPipeError(archiveRuns(store, {before, to: '/nonexistent'}), 'E_INVALID_ARGS')
      return
    }
    const {dir, cleanup: removeDir} = await tempDir('pipe-conformance-archive-')
    try {
      const ended = await startRun()
      let prev: string | null = null
      for (let seq = 1; seq <= 2; seq++) prev = (await store.commitStep(stepCommit(ended, seq, prev, {evidence: 1, spec: true}))).snapshot.meta.record_hash!
      await store.updateRun(ended, (r) => Object.assign(r, {status: 'succeeded', ended_at: at}), {at, event: 'succeeded'})
      const live = await startRun()
      // A parent that ended whose child has not: neither moves.
      const waiting = await startRun()
      const child = await childOf(waiting, 1)
      await store.updateRun(waiting, (r) => Object.assign(r, {status: 'succeeded', ended_at: at}), {at, event: 'succeeded'})
      for (const release of held.splice(0)) await release()
      expect((await archiveRuns(store, {before: new Date(at), to: dir})).archived, 'ended at DATE, not before it').to.deep.equal([])
      const report = await archiveRuns(store, {before, to: dir})
      expect(report.archived.map((a) => a.run_id)).to.deep.equal([ended])
      await expectPipeError(store.readRun(ended), 'E_NOT_FOUND')
      expect(await store.listRunIds()).to.deep.equal([child.run_id, waiting, live])
      const audit = await store.audit()
      expect(audit.problems).to.deep.equal([])
      expect(audit.archives?.map((a) => a.run_id)).to.deep.equal([ended])
      const alone = await verifyArchiveFile(report.archived[0]!.archive)
      expect(alone.problems).to.deep.equal([])
      expect(alone).to.include({runs: 1, snapshots: 2})
    } finally {
      await removeDir()
    }
  })
}
