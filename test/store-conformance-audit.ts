/**
 * The store conformance suite's cases of records changed after the fact (test/store-conformance.ts
 * calls them inside each store's suite): a run, a timeline line, a snapshot, a spec version,
 * evidence, a signed decision and a ledger entry, each named by the store's audit, and the same
 * audit as the reference (in-memory) store's for the same records.
 */
import {expect} from 'chai'
import {generateKeyPairSync} from 'node:crypto'
import {ledgerKey} from '../src/store/file/ledger.js'
import {MemoryStore} from '../src/store/memory/store.js'
import type {Release, RunStore} from '../src/store/types.js'
import type {LedgerEntry} from '../src/types/ledger.js'
import {signDecision} from '../src/util/decision-signature.js'
import {at, draftOf, now, started, stepCommit, type TamperTarget} from './store-conformance.js'

/** What the cases need of the suite's current test: its store, how to change a stored record, the releases it holds, and its helper. */
export interface AuditState {
  store: RunStore
  tamper: (target: TamperTarget, edit: (text: string) => string) => Promise<void>
  held: Release[]
  startRun: () => Promise<string>
}

export function auditCases(state: () => AuditState): void {
  let store: RunStore
  let tamper: AuditState['tamper']
  let held: Release[]
  let startRun: AuditState['startRun']
  // The suite's own beforeEach, registered first, has made this test's store.
  beforeEach(() => ({store, tamper, held, startRun} = state()))

  it('names a record changed after the fact: the run, a timeline line, a snapshot, a spec version, evidence', async () => {
    const cases: Array<{
      what: string
      target: (runId: string, c: {version: string; evidence: string}) => TamperTarget
      edit: [string, string]
      names: (runId: string, c: {version: string; evidence: string}) => string
    }> = [
      {
        what: 'the run record',
        target: (runId) => ({kind: 'run', run_id: runId}),
        edit: ['"status": "running"', '"status": "succeeded"'],
        names: (runId) => runId,
      },
      {
        what: 'a timeline line',
        target: (runId) => ({kind: 'event', run_id: runId, n: 1}),
        edit: ['"event":"created"', '"event":"forged"'],
        names: (runId) => runId,
      },
      {
        what: 'a snapshot',
        target: (runId) => ({kind: 'snapshot', run_id: runId, seq: 1}),
        edit: ['"decision": "success"', '"decision": "failure"'],
        names: (runId) => `${runId}#1`,
      },
      {what: 'a spec version', target: (_, c) => ({kind: 'spec', id: c.version}), edit: ['"goal": "goal', '"goal": "forged'], names: (_, c) => c.version},
      {
        what: 'an evidence record',
        target: (_, c) => ({kind: 'evidence', id: c.evidence}),
        edit: ['line 0 of step 1', 'line X of step 1'],
        names: (_, c) => c.evidence,
      },
    ]
    for (const c of cases) {
      const runId = await startRun()
      const committed = await store.commitStep(stepCommit(runId, 1, null, {evidence: 1, spec: true}))
      const ids = {version: committed.spec!.meta.spec_version, evidence: committed.snapshot.evidence_links[0]!.evidence_id}
      expect((await store.audit(runId)).problems, `before ${c.what} is changed`).to.deep.equal([])
      await tamper(c.target(runId, ids), (text) => {
        expect(text, `${c.what} holds what the test changes`).to.include(c.edit[0])
        return text.replace(c.edit[0], c.edit[1])
      })
      const report = await store.audit(runId)
      expect(report.ok, c.what).to.equal(false)
      expect(
        report.problems.map((p) => p.record),
        `audit names ${c.what}`,
      ).to.satisfy((records: string[]) => records.some((r) => r.includes(c.names(runId, ids))))
      expect((await store.audit()).ok, `the whole store's audit sees ${c.what} too`).to.equal(false)
    }
  })

  it("checks a person's signed decision on its timeline line: it verifies as written, and one changed after signing is named with who decided what", async () => {
    const runId = await startRun()
    const {privateKey} = generateKeyPairSync('ed25519')
    const signed = signDecision(
      {
        run_id: runId,
        step: 'review',
        decision: 'go',
        note: 'matches the brief',
        shown_sha256: `sha256:${'a'.repeat(64)}`,
        by: {id: 'alice@example.com', user: 'alice', host: 'laptop'},
        at,
      },
      privateKey,
    )
    await store.appendEvent(runId, {at, event: 'review_given', by: 'alice', signed})
    const n = (await store.readEvents(runId)).length
    expect((await store.readEvents(runId)).at(-1)?.signed, 'the signed decision reads back as written').to.deep.equal(signed)
    expect((await store.audit(runId)).problems, 'before the decision is changed').to.deep.equal([])
    await tamper({kind: 'event', run_id: runId, n}, (text) => {
      expect(text).to.include('"note":"matches the brief"')
      return text.replace('"note":"matches the brief"', '"note":"matches the brieF"')
    })
    const report = await store.audit(runId)
    expect(report.ok).to.equal(false)
    expect(report.problems.filter((p) => /does not verify against its signature/.test(p.message)).map((p) => p.record)).to.deep.equal([
      `${runId}: alice@example.com's go at step review (review_given)`,
    ])
  })

  it('keeps the ledger: an entry by key, its latest write, a list by filter, one holder of a key at a time, and names an entry changed after the fact', async () => {
    const ledger = store.ledger()
    const entry = (feature: string, spec: string, updated: string, status: LedgerEntry['status'] = 'delivered'): LedgerEntry => ({
      key: ledgerKey(feature, 'local', spec),
      feature_id: feature,
      target: 'local',
      target_type: 'file',
      spec_version: spec,
      run_id: 'R-20261121-0001',
      status,
      attempts: [],
      created_at: updated,
      updated_at: updated,
    })
    const first = entry('F-2026-001', 'S-20261121-0001', '2026-11-21T10:00:00.000Z', 'pending')
    expect(await ledger.read(first.key)).to.equal(null)
    await ledger.write(first)
    await ledger.write({...first, status: 'delivered', updated_at: '2026-11-21T10:00:01.000Z'})
    await ledger.write(entry('F-2026-002', 'S-20261121-0002', '2026-11-21T10:01:00.000Z'))
    expect((await ledger.read(first.key))?.status).to.equal('delivered')
    expect((await ledger.list()).map((e) => e.feature_id)).to.deep.equal(['F-2026-002', 'F-2026-001'])
    expect((await ledger.list({feature: 'F-2026-001'})).map((e) => e.key)).to.deep.equal([first.key])
    expect(await ledger.list({}, 1)).to.have.length(1)
    // Two holders of one key: whichever gets it first, the other starts only when it is done (the lock promises no order).
    const order: string[] = []
    const gates = new Map<string, () => void>()
    const hold = (name: string): Promise<void> =>
      ledger.withKey(first.key, async () => {
        order.push(`${name} in`)
        await new Promise<void>((resolve) => gates.set(name, resolve))
        order.push(`${name} out`)
      })
    const held = [hold('one'), hold('two')]
    const entered = async (count: number): Promise<string> => {
      while (order.filter((o) => o.endsWith(' in')).length < count || gates.size < count) await new Promise((resolve) => setImmediate(resolve))
      return order.filter((o) => o.endsWith(' in'))[count - 1]!.split(' ')[0]!
    }
    const firstIn = await entered(1)
    gates.get(firstIn)!()
    const secondIn = await entered(2)
    gates.get(secondIn)!()
    await Promise.all(held)
    expect(order).to.deep.equal([`${firstIn} in`, `${firstIn} out`, `${secondIn} in`, `${secondIn} out`])
    expect(new Set([firstIn, secondIn])).to.deep.equal(new Set(['one', 'two']))
    const clean = await store.audit()
    expect(clean.problems).to.deep.equal([])
    expect(clean.ledger).to.equal(2)
    await tamper({kind: 'ledger', key: first.key}, (text) => text.replace('"status": "delivered"', '"status": "failed"'))
    const report = await store.audit()
    expect(report.problems.map((p) => p.record)).to.include(first.key)
  })

  it('gives the audit of the reference (in-memory) store for the same records: one head digest, and each change named alike', async () => {
    const reference = new MemoryStore()
    /** The same records in both stores: a run of two steps that succeeded, and a ledger entry written twice. */
    async function fill(into: RunStore): Promise<{runId: string; version: string; evidence: string; key: string; release: Release}> {
      await into.ensureFeature('F-2026-001', now)
      const born = await into.createStartedRun(draftOf(), now, {at, event: 'created'}, started)
      const runId = born.record.run_id
      const one = await into.commitStep(stepCommit(runId, 1, null, {evidence: 1, spec: true}))
      await into.commitStep(stepCommit(runId, 2, one.snapshot.meta.record_hash!, {evidence: 2, spec: false}))
      await into.updateRun(runId, (r) => (r.status = 'succeeded'), {at, event: 'succeeded'})
      const entry: LedgerEntry = {
        key: ledgerKey('F-2026-001', 'local', one.spec!.meta.spec_version),
        feature_id: 'F-2026-001',
        target: 'local',
        target_type: 'file',
        spec_version: one.spec!.meta.spec_version,
        run_id: runId,
        status: 'pending',
        attempts: [],
        created_at: at,
        updated_at: at,
      }
      await into.ledger().write(entry)
      await into.ledger().write({...entry, status: 'delivered'})
      return {runId, version: one.spec!.meta.spec_version, evidence: one.snapshot.evidence_links[0]!.evidence_id, key: entry.key, release: born.release}
    }
    const ours = await fill(store)
    held.push(ours.release)
    const theirs = await fill(reference)
    await theirs.release()
    expect(ours.runId).to.equal(theirs.runId)
    const clean = await store.audit()
    expect(clean.problems).to.deep.equal([])
    expect(clean.head, 'the head digest of the same records').to.equal((await reference.audit()).head)
    const named = (report: {problems: Array<{record: string; message: string}>}): string[] => report.problems.map((p) => `${p.record}: ${p.message}`).sort()
    const changes: Array<{what: string; target: TamperTarget; table: Parameters<MemoryStore['tamper']>[0]; key: string; edit: [string, string]}> = [
      {
        what: 'the run record',
        target: {kind: 'run', run_id: ours.runId},
        table: 'runs',
        key: ours.runId,
        edit: ['"status": "succeeded"', '"status": "failed"'],
      },
      {
        what: 'a snapshot',
        target: {kind: 'snapshot', run_id: ours.runId, seq: 2},
        table: 'snapshots',
        key: `${ours.runId}#2`,
        edit: ['"reason": "done"', '"reason": "forged"'],
      },
      {what: 'a spec version', target: {kind: 'spec', id: ours.version}, table: 'specs', key: ours.version, edit: ['"goal": "goal', '"goal": "forged']},
      {
        what: 'evidence',
        target: {kind: 'evidence', id: ours.evidence},
        table: 'evidence',
        key: ours.evidence,
        edit: ['line 0 of step 1', 'line X of step 1'],
      },
      {
        what: 'a ledger entry',
        target: {kind: 'ledger', key: ours.key},
        table: 'ledger',
        key: ours.key,
        edit: ['"status": "delivered"', '"status": "failed"'],
      },
    ]
    for (const c of changes) {
      const edit = (text: string): string => text.replace(c.edit[0], c.edit[1])
      await tamper(c.target, edit)
      reference.tamper(c.table, c.key, edit)
      const [mine, reference_] = [await store.audit(), await reference.audit()]
      expect(mine.ok, c.what).to.equal(false)
      expect(named(mine), `the findings after ${c.what} is changed`).to.deep.equal(named(reference_))
      expect(mine.head, `the head digest after ${c.what} is changed`).to.equal(reference_.head)
    }
  })
}
