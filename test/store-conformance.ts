/**
 * The store conformance suite: what every RunStore (src/store/types.ts) must do, checked through the
 * interface alone, so that any implementation runs it (the file store in
 * test/unit/store-conformance.test.ts; a database store next). What only one store can show (a
 * SIGKILL between two files, a file edited by hand) stays in that store's own tests.
 */
import {expect} from 'chai'
import type {Release, RunDraft, RunStore, StepCommit} from '../src/store/types.js'
import type {RunRecord} from '../src/types/run.js'
import type {Snapshot} from '../src/types/snapshot.js'
import {expectPipeError} from './helpers/expect.js'
import {runDraft, specDraft} from './helpers/records.js'

/** A store to test, fresh and empty, and how to dispose of it. */
export type MakeStore = () => Promise<{store: RunStore; cleanup: () => Promise<void>}>

const now = new Date('2026-11-21T10:00:00Z')
const at = now.toISOString()

const draftOf = (feature = 'F-2026-001'): RunDraft => runDraft(at, {feature})

const started = {event: {at, event: 'started'}, change: (r: RunRecord) => void (r.status = 'running')}

/** A step's commit: `records` says how many evidence records and whether a spec version it writes. */
function stepCommit(runId: string, seq: number, prev: string | null, records: {evidence: number; spec: boolean}, step = 'compile'): StepCommit {
  const snapshot: Snapshot = {
    run_id: runId,
    feature_id: 'F-2026-001',
    spec_version_in: null,
    spec_version_out: null,
    step: {name: step, kind: 'compile', seq, started_at: at, ended_at: at},
    inputs: {},
    outputs: {seq},
    decisions: [{decision: 'success', reason: 'done', next_step: null, run_status: 'succeeded'}],
    evidence_links: [],
    errors: [],
    meta: {engine_version: 't', llm_model: null, extensions: {}, prev_hash: prev},
  }
  return {
    run_id: runId,
    seq,
    step,
    recorded_at: at,
    snapshot,
    spec: records.spec ? {draft: specDraft(`goal ${runId} ${seq}`, {runId, at})} : null,
    evidence: Array.from({length: records.evidence}, (_, i) => ({
      draft: {type: 'log' as const, source: {ref: `log://${runId}/${seq}/${i}`}, content: {excerpt: `line ${i} of step ${seq}`}, linked_to: [{step}]},
      link: 'log' as const,
    })),
  }
}

/** A commit made anew from the same inputs: what a redrive hands the store, sharing no object with the first. */
const again = (commit: StepCommit): StepCommit => structuredClone(commit)

export function storeConformance(name: string, makeStore: MakeStore): void {
  describe(`store conformance: ${name}`, () => {
    let store: RunStore
    let cleanup: () => Promise<void>
    const held: Release[] = []
    beforeEach(async () => ({store, cleanup} = await makeStore()))
    afterEach(async () => {
      for (const release of held.splice(0)) await release().catch(() => undefined)
      await cleanup()
    })

    async function startRun(): Promise<string> {
      await store.ensureFeature('F-2026-001', now)
      const born = await store.createStartedRun(draftOf(), now, {at, event: 'created'}, started)
      held.push(born.release)
      return born.record.run_id
    }

    it('commits a step with its spec version and evidence whole, and reads each back as committed', async () => {
      const runId = await startRun()
      const committed = await store.commitStep(stepCommit(runId, 1, null, {evidence: 2, spec: true}))
      const version = committed.spec!.meta.spec_version
      expect(committed.snapshot.spec_version_out).to.equal(version)
      expect(committed.snapshot.outputs).to.deep.equal({seq: 1, spec_version_out: version})
      expect(committed.snapshot.evidence_links.map((l) => l.type)).to.deep.equal(['log', 'log'])
      expect(committed.snapshot.meta.record_hash).to.match(/^(sha256|hmac-sha256):/)
      expect(await store.readSnapshots(runId)).to.deep.equal([committed.snapshot])
      expect(await store.readSpec(version)).to.deep.equal(committed.spec)
      const evidence = await Promise.all(committed.snapshot.evidence_links.map((l) => store.readEvidence(l.evidence_id)))
      expect(evidence.map((e) => e.content.excerpt)).to.deep.equal(['line 0 of step 1', 'line 1 of step 1'])
      // A step without records commits its snapshot alone.
      const plain = await store.commitStep(stepCommit(runId, 2, committed.snapshot.meta.record_hash!, {evidence: 0, spec: false}))
      expect(plain.spec).to.equal(null)
      expect(plain.snapshot.spec_version_out).to.equal(null)
      expect((await store.readSnapshots(runId)).map((s) => s.step.seq)).to.deep.equal([1, 2])
    })

    it('keeps order: snapshots by seq, the timeline as written, runs newest first, spec versions oldest first', async () => {
      const runId = await startRun()
      let prev: string | null = null
      for (let seq = 1; seq <= 5; seq++)
        prev = (await store.commitStep(stepCommit(runId, seq, prev, {evidence: seq % 2, spec: seq % 2 === 1}))).snapshot.meta.record_hash!
      const snapshots = await store.readSnapshots(runId)
      expect(snapshots.map((s) => s.step.seq)).to.deep.equal([1, 2, 3, 4, 5])
      expect(snapshots.map((s) => s.meta.prev_hash)).to.deep.equal([null, ...snapshots.slice(0, -1).map((s) => s.meta.record_hash)])
      await store.appendEvent(runId, {at, event: 'noted', reason: 'one'})
      await store.updateRun(runId, (r) => (r.status = 'succeeded'), {at, event: 'succeeded'})
      expect((await store.readEvents(runId)).map((e) => e.event)).to.deep.equal(['created', 'started', 'noted', 'succeeded'])
      const run = await store.readRun(runId)
      expect(run.status).to.equal('succeeded')
      expect(run.head).to.include({events: 4, seq: 5, snapshot_hash: snapshots.at(-1)!.meta.record_hash})
      const second = await startRun()
      expect(await store.listRunIds()).to.deep.equal([second, runId])
      const versions = snapshots.map((s) => s.spec_version_out).filter((v): v is string => v !== null)
      expect(await store.listSpecVersions()).to.deep.equal(versions)
      const newest: string[] = []
      for await (const v of store.newestSpecVersions(now)) newest.push(v)
      expect(newest).to.deep.equal([...versions].reverse())
    })

    it('hands out ids in the seed formats, gapless, per day, per year and overall', async () => {
      expect(await store.createFeature(now, 'first')).to.equal('F-2026-001')
      expect(await store.createFeature(now, 'second')).to.equal('F-2026-002')
      const first = await store.createRun(draftOf(), now, {at, event: 'created'})
      const second = await store.createRun(draftOf(), now, {at, event: 'created'})
      const nextDay = await store.createRun(draftOf(), new Date('2026-11-22T00:00:01Z'), {at, event: 'created'})
      expect([first.run_id, second.run_id, nextDay.run_id]).to.deep.equal(['R-20261121-0001', 'R-20261121-0002', 'R-20261122-0001'])
      // A run made at an earlier day than the last id's (a clock set back) is numbered after it, never before.
      const runId = await startRun()
      expect(runId).to.equal('R-20261122-0002')
      const one = await store.commitStep(stepCommit(runId, 1, null, {evidence: 2, spec: true}))
      const two = await store.commitStep(stepCommit(runId, 2, one.snapshot.meta.record_hash!, {evidence: 1, spec: true}))
      expect([one.spec!.meta.spec_version, two.spec!.meta.spec_version]).to.deep.equal(['S-20261121-0001', 'S-20261121-0002'])
      expect([...one.snapshot.evidence_links, ...two.snapshot.evidence_links].map((l) => l.evidence_id)).to.deep.equal(['E-0001', 'E-0002', 'E-0003'])
      expect(await store.listEvidenceIds()).to.deep.equal(['E-0001', 'E-0002', 'E-0003'])
    })

    it('never hands out one id twice to commits running at once', async () => {
      const runs = await Promise.all(Array.from({length: 6}, () => startRun()))
      expect(new Set(runs).size).to.equal(6)
      const committed = await Promise.all(runs.map((runId) => store.commitStep(stepCommit(runId, 1, null, {evidence: 2, spec: true}))))
      const versions = committed.map((c) => c.spec!.meta.spec_version)
      const evidence = committed.flatMap((c) => c.snapshot.evidence_links.map((l) => l.evidence_id))
      expect(new Set(versions).size).to.equal(6)
      expect(new Set(evidence).size).to.equal(12)
      expect(await store.listSpecVersions()).to.have.members(versions)
    })

    it('takes a commit made again (a redrive) as the one it recorded: the same snapshot and ids, nothing twice', async () => {
      const runId = await startRun()
      const commit = stepCommit(runId, 1, null, {evidence: 2, spec: true})
      const first = await store.commitStep(again(commit))
      const second = await store.commitStep(again(commit))
      expect(second.snapshot).to.deep.equal(first.snapshot)
      expect(second.spec).to.deep.equal(first.spec)
      expect(await store.readSnapshots(runId)).to.have.length(1)
      expect(await store.listSpecVersions()).to.deep.equal([first.spec!.meta.spec_version])
      expect(await store.listEvidenceIds()).to.deep.equal(first.snapshot.evidence_links.map((l) => l.evidence_id))
      // A different step under a seq already recorded is refused, and changes nothing.
      await expectPipeError(store.commitStep(stepCommit(runId, 1, null, {evidence: 0, spec: false}, 'other')), 'E_CONFLICT')
      expect(await store.readSnapshots(runId)).to.deep.equal([first.snapshot])
    })

    it('lets one of two commits of one step at once through and refuses the other', async () => {
      const runId = await startRun()
      const results = await Promise.allSettled([
        store.commitStep(stepCommit(runId, 1, null, {evidence: 1, spec: true}, 'left')),
        store.commitStep(stepCommit(runId, 1, null, {evidence: 1, spec: true}, 'right')),
      ])
      const won = results.filter((r) => r.status === 'fulfilled')
      const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      expect(won, 'exactly one commit of seq 1').to.have.length(1)
      expect(lost).to.have.length(1)
      expect((lost[0]!.reason as {code?: string}).code).to.equal('E_CONFLICT')
      const snapshots = await store.readSnapshots(runId)
      expect(snapshots).to.deep.equal([(won[0] as PromiseFulfilledResult<{snapshot: Snapshot}>).value.snapshot])
      const report = await store.audit(runId)
      expect(report.problems).to.deep.equal([])
    })

    it('lets one holder drive a run at a time', async () => {
      const runId = await startRun()
      await expectPipeError(store.acquireRun(runId), 'E_CONFLICT')
      expect((await store.runOwner(runId))?.alive).to.equal(true)
      await held.pop()!()
      const release = await store.acquireRun(runId)
      await expectPipeError(store.acquireRun(runId), 'E_CONFLICT')
      await release()
    })

    it('repairs a commit interrupted at any of its points: afterwards the step is recorded whole once, or not at all until committed again', async () => {
      const points: string[] = []
      const probe = await startRun()
      await store.commitStep(stepCommit(probe, 1, null, {evidence: 2, spec: true}), (point) => void points.push(point))
      expect(points, 'a commit names the points it passes').to.not.be.empty
      let recorded = 1
      for (const point of points) {
        const runId = await startRun()
        const commit = stepCommit(runId, 1, null, {evidence: 2, spec: true})
        const stop = (at: string): void => {
          if (at === point) throw new Error(`stopped at ${at}`)
        }
        const outcome = await store.commitStep(again(commit), stop).then(
          () => 'committed',
          (error: Error) => error.message,
        )
        expect(outcome, point).to.be.oneOf(['committed', `stopped at ${point}`])
        await store.recover(runId)
        const afterRecovery = await store.readSnapshots(runId)
        expect(afterRecovery.length, `snapshots after recovering from ${point}`).to.be.at.most(1)
        const finished = await store.commitStep(again(commit))
        if (afterRecovery.length === 1) expect(finished.snapshot, `the commit recovered from ${point} is the one made again`).to.deep.equal(afterRecovery[0])
        const snapshots = await store.readSnapshots(runId)
        expect(snapshots, point).to.have.length(1)
        const version = snapshots[0]!.spec_version_out!
        expect((await store.readSpec(version)).goal).to.equal(`goal ${runId} 1`)
        for (const link of snapshots[0]!.evidence_links) expect((await store.readEvidence(link.evidence_id)).linked_to).to.deep.equal([{step: 'compile'}])
        expect(snapshots[0]!.evidence_links, point).to.have.length(2)
        const report = await store.audit(runId)
        expect(report.problems, `audit after recovering from ${point}`).to.deep.equal([])
        expect(await store.recover(runId), `nothing left to recover after ${point}`).to.equal(false)
        // Nothing a part of the interrupted commit wrote is left beside the finished one.
        recorded++
        expect(await store.listSpecVersions(), `spec versions after recovering from ${point}`).to.have.length(recorded)
        expect(await store.listEvidenceIds(), `evidence after recovering from ${point}`).to.have.length(2 * recorded)
      }
    })

    it('passes its own audit over what was committed, and names a run that is not there', async () => {
      const runId = await startRun()
      let prev: string | null = null
      for (let seq = 1; seq <= 3; seq++)
        prev = (await store.commitStep(stepCommit(runId, seq, prev, {evidence: 1, spec: seq !== 2}))).snapshot.meta.record_hash!
      await store.updateRun(runId, (r) => (r.status = 'succeeded'), {at, event: 'succeeded'})
      const one = await store.audit(runId)
      expect(one.problems).to.deep.equal([])
      expect(one).to.include({ok: true, runs: 1, snapshots: 3, specs: 2, evidence: 3})
      const all = await store.audit()
      expect(all.problems).to.deep.equal([])
      expect(all.ok).to.equal(true)
      expect(all.head).to.match(/^(sha256|hmac-sha256):/)
      await expectPipeError(store.readRun('R-20991231-0001'), 'E_NOT_FOUND')
      await expectPipeError(store.assertRunExists('R-20991231-0001'), 'E_NOT_FOUND')
    })

    it('keeps a step state sealed and finds the latest', async () => {
      const runId = await startRun()
      expect(await store.latestStepStateSeq(runId, 'agent')).to.equal(null)
      await store.writeStepState(runId, 'agent', 2, {turn: 1})
      await store.writeStepState(runId, 'agent', 4, {turn: 2})
      expect(await store.latestStepStateSeq(runId, 'agent')).to.equal(4)
      expect(await store.readStepState(runId, 'agent', 4)).to.deep.equal({turn: 2})
      expect(await store.readStepState(runId, 'agent', 3)).to.equal(undefined)
    })
  })
}
