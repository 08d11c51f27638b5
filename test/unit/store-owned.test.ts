import {expect} from 'chai'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {auditStore} from '../../src/store/file/audit.js'
import {Store} from '../../src/store/file/store.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {tempDir} from '../helpers/cli.js'
import {runDraft} from '../helpers/records.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-owned-')))
afterEach(async () => cleanup())

const now = new Date('2026-11-21T10:00:00Z')
const at = now.toISOString()

async function newRun(store: Store): Promise<RunRecord> {
  await store.ensureFeature('F-2026-001', now)
  return store.createRun(runDraft(at), now, {at, event: 'created'})
}

function snapshot(run: RunRecord, seq: number, prev: string | null): Snapshot {
  return {
    run_id: run.run_id,
    feature_id: run.feature_id,
    spec_version_in: null,
    spec_version_out: null,
    step: {name: 'a', kind: 'noop', seq, started_at: at, ended_at: at},
    inputs: {},
    outputs: {seq},
    decisions: [],
    evidence_links: [],
    errors: [],
    meta: {engine_version: 't', llm_model: null, prev_hash: prev, extensions: {}},
  }
}

async function onDisk(store: Store, runId: string): Promise<{record: RunRecord; events: Array<{prev: string | null; hash: string; event: string}>}> {
  const record = JSON.parse(await readFile(path.join(store.runDir(runId), 'run.json'), 'utf8')) as RunRecord
  const text = await readFile(path.join(store.runDir(runId), 'events.jsonl'), 'utf8')
  return {
    record,
    events: text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as {prev: string | null; hash: string; event: string}),
  }
}

describe('store: what it wrote of a run while holding its lock', () => {
  it('writes the same head and timeline as reading them back would, and learns what another writer did once the lock is taken again', async () => {
    const root = path.join(dir, 's')
    const mine = await Store.open(root)
    const other = await Store.open(root)
    const run = await newRun(mine)

    let release = await mine.acquireRun(run.run_id)
    await mine.updateRun(run.run_id, (r) => (r.status = 'running'), {at, event: 'started', from: 'pending', to: 'running'})
    const first = await mine.writeSnapshot(snapshot(run, 1, null))
    const second = await mine.writeSnapshot(snapshot(run, 2, first.meta.record_hash ?? null))
    const paused = await mine.updateRun(run.run_id, (r) => (r.status = 'awaiting_input'), {at, event: 'paused', from: 'running', to: 'awaiting_input'})
    await release()
    expect(paused.head).to.deep.equal({
      events: 3,
      event_hash: (await onDisk(mine, run.run_id)).events.at(-1)!.hash,
      seq: 2,
      snapshot_hash: second.meta.record_hash,
    })

    // Another process (here another Store) drives the run in between: a snapshot, a record change, two timeline lines.
    const theirs = await other.acquireRun(run.run_id)
    await other.updateRun(
      run.run_id,
      (r) => {
        r.status = 'running'
        r.answers = {q1: 'from the other writer'}
      },
      {at, event: 'resumed', from: 'awaiting_input', to: 'running'},
    )
    const third = await other.writeSnapshot(snapshot(run, 3, second.meta.record_hash ?? null))
    await other.appendEvent(run.run_id, {at, event: 'note', reason: 'x'})
    await theirs()

    release = await mine.acquireRun(run.run_id)
    const ended = await mine.updateRun(run.run_id, (r) => (r.status = 'succeeded'), {at, event: 'succeeded', from: 'running', to: 'succeeded'})
    await release()
    const disk = await onDisk(mine, run.run_id)
    expect(ended.answers).to.deep.equal({q1: 'from the other writer'})
    expect(ended.head).to.deep.equal({events: 6, event_hash: disk.events.at(-1)!.hash, seq: 3, snapshot_hash: third.meta.record_hash})
    expect(disk.record).to.deep.equal(ended)
    disk.events.forEach((line, i) => expect(line.prev).to.equal(i === 0 ? null : disk.events[i - 1]!.hash))
    const report = await auditStore(mine, run.run_id)
    expect(report.problems).to.deep.equal([])
  })

  it('reads the record from disk on every change made without the lock', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const run = await newRun(store)
    await store.appendEvent(run.run_id, {at, event: 'note', reason: 'one'})
    const file = path.join(store.runDir(run.run_id), 'run.json')
    const record = JSON.parse(await readFile(file, 'utf8')) as RunRecord
    await writeFile(file, JSON.stringify({...record, status_reason: 'written by someone else'}))
    expect((await store.appendEvent(run.run_id, {at, event: 'note', reason: 'two'})).status_reason).to.equal('written by someone else')
  })

  it('refuses a change made without the lock while another holder drives the run, so the holder’s chain stays whole', async () => {
    const root = path.join(dir, 's')
    const driver = await Store.open(root)
    const bystander = await Store.open(root)
    const run = await newRun(driver)
    const release = await driver.acquireRun(run.run_id)
    await driver.appendEvent(run.run_id, {at, event: 'note', reason: 'the driver, first'})
    let refused: {code?: string; message?: string} = {}
    await bystander.appendEvent(run.run_id, {at, event: 'published', reason: 'by hand'}).catch((error: {code?: string; message?: string}) => (refused = error))
    expect(refused.code, refused.message).to.equal('E_CONFLICT')
    expect(refused.message).to.contain('is being driven by another pipe process')
    await driver.appendEvent(run.run_id, {at, event: 'note', reason: 'the driver, second'})
    await release()
    // Once the driver let go, the same change is written, chained after the driver's lines.
    await bystander.appendEvent(run.run_id, {at, event: 'published', reason: 'by hand'})
    const disk = await onDisk(driver, run.run_id)
    expect(disk.events.map((e) => e.event)).to.deep.equal(['created', 'note', 'note', 'published'])
    disk.events.forEach((line, i) => expect(line.prev).to.equal(i === 0 ? null : disk.events[i - 1]!.hash))
    expect((await auditStore(driver, run.run_id)).problems).to.deep.equal([])
  })

  it('forgets what it knew after a change that failed, and reads the run again', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const run = await newRun(store)
    const release = await store.acquireRun(run.run_id)
    try {
      await store.appendEvent(run.run_id, {at, event: 'note', reason: 'one'})
      // Not something pipe does while it holds the lock: it shows which copy a change starts from.
      const file = path.join(store.runDir(run.run_id), 'run.json')
      const record = JSON.parse(await readFile(file, 'utf8')) as RunRecord
      await writeFile(file, JSON.stringify({...record, status_reason: 'on disk'}))
      expect((await store.appendEvent(run.run_id, {at, event: 'note', reason: 'two'})).status_reason).to.equal(undefined)
      let failed = false
      await store
        .updateRun(
          run.run_id,
          () => {
            throw new Error('refused')
          },
          {at, event: 'note'},
        )
        .catch(() => (failed = true))
      expect(failed).to.equal(true)
      await writeFile(file, JSON.stringify({...(JSON.parse(await readFile(file, 'utf8')) as RunRecord), status_reason: 'on disk again'}))
      expect((await store.appendEvent(run.run_id, {at, event: 'note', reason: 'three'})).status_reason).to.equal('on disk again')
    } finally {
      await release()
    }
  })
})

describe('store: run creations of one process', () => {
  it('queue for the run index: all get their own id and one linear index chain, and a failed creation does not hold up the next', async () => {
    const root = path.join(dir, 's')
    const one = await Store.open(root)
    const two = await Store.open(root)
    await one.ensureFeature('F-2026-001', now)
    const runs = await Promise.all(Array.from({length: 12}, (_, i) => newRun(i % 2 === 0 ? one : two)))
    expect(new Set(runs.map((r) => r.run_id)).size).to.equal(12)
    // A creation that fails inside the run-index queue: its parent's children folder is a file (a damaged store).
    const parent = runs[1]!.run_id
    await writeFile(path.join(root, 'runs', parent, 'children'), 'not a folder')
    const bad = {...(await onDisk(one, runs[0]!.run_id)).record, parent: {run_id: parent, step: 'each', seq: 1}}
    const {run_id: _r, head: _h, seal: _s, ...draft} = bad
    let failed = false
    await one.createRun(draft, now, {at, event: 'created'}).catch(() => (failed = true))
    expect(failed).to.equal(true)
    const after = await newRun(one)
    const {readChain} = await import('../../src/store/file/trail.js')
    const chain = readChain(await readFile(one.runIndexFile, 'utf8'), undefined)
    expect(chain.problems).to.deep.equal([])
    expect(chain.lines.map((l) => l.run_id).sort()).to.deep.equal([...runs.map((r) => r.run_id), after.run_id].sort())
  })
})
