/**
 * The store conformance suite: what every RunStore (src/store/types.ts) must do, checked through the
 * interface alone, so that every implementation runs it (the in-memory and the file store in
 * test/unit/store-conformance.test.ts, PostgreSQL in store-conformance-postgres.test.ts). A record
 * changed after the fact is reached through the store's `tamper` hook (its maps, a file, a row with
 * its trigger off); what only one store can show (a SIGKILL between two files) stays in its own tests.
 * The cases of records changed after the fact are in store-conformance-audit.ts, archiving in
 * store-conformance-archive.ts: each store's suite calls them.
 */
import {expect} from 'chai'
import {RunKeeper} from '../src/engine/run-keeper.js'
import type {Release, RunDraft, RunStore, StepCommit} from '../src/store/types.js'
import type {RunRecord} from '../src/types/run.js'
import type {Snapshot} from '../src/types/snapshot.js'
import {expectPipeError} from './helpers/expect.js'
import {archiveCases} from './store-conformance-archive.js'
import {auditCases} from './store-conformance-audit.js'
import {runDraft, specDraft} from './helpers/records.js'

/** A stored record the tamper hook changes: a run record, a timeline line, a snapshot, a spec version, evidence, a ledger entry. */
export type TamperTarget =
  | {kind: 'run'; run_id: string}
  | {kind: 'event'; run_id: string; n: number}
  | {kind: 'snapshot'; run_id: string; seq: number}
  | {kind: 'spec'; id: string}
  | {kind: 'evidence'; id: string}
  | {kind: 'ledger'; key: string}

/**
 * A store to test, fresh and empty, how to dispose of it, and how to change a stored record's text
 * after the fact, the way someone with access to where the store keeps it could.
 */
export type MakeStore = () => Promise<{
  store: RunStore
  cleanup: () => Promise<void>
  tamper: (target: TamperTarget, edit: (text: string) => string) => Promise<void>
}>

export const now = new Date('2026-11-21T10:00:00Z')
export const at = now.toISOString()

export const draftOf = (feature = 'F-2026-001'): RunDraft => runDraft(at, {feature})

export const started = {event: {at, event: 'started'}, change: (r: RunRecord) => void (r.status = 'running')}

/** A step's commit: `records` says how many evidence records and whether a spec version it writes. */
export function stepCommit(runId: string, seq: number, prev: string | null, records: {evidence: number; spec: boolean}, step = 'compile'): StepCommit {
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
    let tamper: (target: TamperTarget, edit: (text: string) => string) => Promise<void>
    const held: Release[] = []
    beforeEach(async () => ({store, cleanup, tamper} = await makeStore()))
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

    // The first start is of a step safe to run twice (written without waiting for the disk where a store can), the second of one that is not: both read back alike.
    it("records a step's start before the step acts: its step_started line and the run's current step, which the next status change clears", async () => {
      const runId = await startRun()
      // The engine's own writer, on a clock that moves: each record's UPDATED is the time it was written.
      let tick = 0
      const keeper = new RunKeeper(store, () => new Date(now.getTime() + ++tick * 1000), 'tester', undefined)
      keeper.hold(runId, await store.readRun(runId))
      await keeper.stepStarted(runId, 'compile', 1, true)
      const running = await store.readRun(runId)
      expect(running.current_step).to.deep.include({step: 'compile', seq: 1, since: '2026-11-21T10:00:01.000Z'})
      expect(running.current_step!.worker).to.include({pid: process.pid})
      expect(running.updated_at).to.equal('2026-11-21T10:00:01.000Z')
      expect((await store.readEvents(runId)).at(-1)).to.include({event: 'step_started', step: 'compile', seq: 1})
      const listed = (await store.listRuns({})).runs.find((r) => r.run_id === runId)
      expect(listed?.current_step?.step).to.equal('compile')
      const first = await store.commitStep(stepCommit(runId, 1, null, {evidence: 0, spec: false}))
      // The next step's start moves the run on, past the committed one.
      await keeper.stepStarted(runId, 'test', 2, false)
      expect((await store.readRun(runId)).current_step).to.deep.include({step: 'test', seq: 2, since: '2026-11-21T10:00:02.000Z'})
      await store.commitStep(stepCommit(runId, 2, first.snapshot.meta.record_hash!, {evidence: 0, spec: false}, 'test'))
      await keeper.stop(runId, {status: 'succeeded', reason: 'done'})
      const ended = await store.readRun(runId)
      expect(ended.current_step).to.equal(undefined)
      expect(ended.updated_at).to.equal('2026-11-21T10:00:03.000Z')
      expect((await store.readEvents(runId)).map((e) => e.event)).to.deep.equal(['created', 'started', 'step_started', 'step_started', 'succeeded'])
      expect((await store.audit(runId)).problems).to.deep.equal([])
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

    /** A run created as a child of `parent` by step `step` at `seq`, item `index`. */
    async function childOf(parent: string, seq: number, index?: number, when = now): Promise<RunRecord> {
      return store.createRun({...draftOf(), parent: {run_id: parent, step: 'each', seq, ...(index !== undefined ? {index} : {})}}, when, {at, event: 'created'})
    }

    auditCases(() => ({store, tamper, held, startRun}))

    it('lists the children of a run in step and item order, and audits a run with its children', async () => {
      const parent = await startRun()
      const other = await startRun()
      const late = await childOf(parent, 3, 0)
      const second = await childOf(parent, 2, 1)
      const first = await childOf(parent, 2, 0)
      const foreign = await childOf(other, 1)
      const grandchild = await childOf(first.run_id, 1)
      expect((await store.listChildren(parent)).map((r) => r.run_id)).to.deep.equal([first.run_id, second.run_id, late.run_id])
      expect((await store.listChildren(other)).map((r) => r.run_id)).to.deep.equal([foreign.run_id])
      expect((await store.listChildren(first.run_id)).map((r) => r.run_id)).to.deep.equal([grandchild.run_id])
      expect(await store.listChildren(late.run_id)).to.deep.equal([])
      const report = await store.audit(parent)
      expect(report.problems).to.deep.equal([])
      expect(report.runs, 'the run, its three children and its grandchild').to.equal(5)
    })

    archiveCases(() => ({store, held, startRun, childOf}))

    it('lists runs a page at a time, newest first, by status, pipeline, feature, time and parent', async () => {
      await store.ensureFeature('F-2026-002', now)
      const made: RunRecord[] = []
      for (let i = 0; i < 5; i++) made.push(await store.createRun(draftOf(i % 2 === 0 ? 'F-2026-001' : 'F-2026-002'), now, {at, event: 'created'}))
      const child = await childOf(made[0]!.run_id, 1)
      const later = await store.createRun({...draftOf(), created_at: '2026-11-22T08:00:00.000Z'}, new Date('2026-11-22T08:00:00Z'), {at, event: 'created'})
      await store.updateRun(made[1]!.run_id, (r) => (r.status = 'failed'), {at, event: 'failed'})
      const newestFirst = [later, child, ...made]
        .map((r) => r.run_id)
        .sort()
        .reverse()
      const seen: string[] = []
      let cursor: string | null = null
      let pages = 0
      do {
        const page: Awaited<ReturnType<RunStore['listRuns']>> = await store.listRuns({limit: 3, cursor})
        expect(page.damaged).to.deep.equal([])
        seen.push(...page.runs.map((r) => r.run_id))
        cursor = page.cursor
        pages++
      } while (cursor !== null && pages < 10)
      expect(seen).to.deep.equal(newestFirst)
      const ids = async (query: Parameters<RunStore['listRuns']>[0]): Promise<string[]> => (await store.listRuns(query)).runs.map((r) => r.run_id)
      expect(await ids({feature: 'F-2026-002'})).to.deep.equal([made[3]!.run_id, made[1]!.run_id])
      expect(await ids({status: 'failed'})).to.deep.equal([made[1]!.run_id])
      expect(await ids({pipeline: 'p', limit: 2})).to.deep.equal(newestFirst.slice(0, 2))
      expect(await ids({pipeline: 'other'})).to.deep.equal([])
      expect(await ids({since: '2026-11-22T00:00:00.000Z'})).to.deep.equal([later.run_id])
      expect(await ids({top: true})).to.not.include(child.run_id)
      expect(await ids({top: true})).to.have.length(6)
    })
  })
}
