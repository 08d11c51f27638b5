import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {readFileSync, statSync} from 'node:fs'
import {readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Journal} from '../../src/store/file/commit.js'
import {Store} from '../../src/store/file/store.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {durability} from '../../src/util/fs.js'
import {repoRoot, tempDir} from '../helpers/cli.js'
import {specDraft, runDraft} from '../helpers/records.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-commit-')))
afterEach(async () => cleanup())

const now = new Date('2026-11-21T10:00:00Z')
const at = now.toISOString()

async function openRun(): Promise<{store: Store; runId: string}> {
  const store = await Store.open(path.join(dir, '.pipe'))
  const run = await store.createRun(runDraft(at, {status: 'running'}), now, {at, event: 'created'})
  return {store, runId: run.run_id}
}

function journal(runId: string, seq: number, prev: string | null, records: {evidence: number; spec: boolean}): Journal {
  const snapshot: Snapshot = {
    run_id: runId,
    feature_id: 'F-2026-001',
    spec_version_in: null,
    spec_version_out: null,
    step: {name: 'compile', kind: 'compile', seq, started_at: at, ended_at: at},
    inputs: {},
    outputs: {},
    decisions: [{decision: 'success', reason: 'done', next_step: null, run_status: 'succeeded'}],
    evidence_links: [],
    errors: [],
    meta: {engine_version: 't', llm_model: null, extensions: {}, prev_hash: prev},
  }
  return {
    version: 1,
    run_id: runId,
    seq,
    step: 'compile',
    recorded_at: at,
    snapshot,
    spec: records.spec ? {draft: specDraft(`goal ${seq}`, {runId, at})} : null,
    evidence: Array.from({length: records.evidence}, (_, i) => ({
      draft: {type: 'log' as const, source: {ref: `log://${seq}/${i}`}, content: {excerpt: `line ${i} of step ${seq}`}, linked_to: [{step: 'compile'}]},
      link: 'log' as const,
    })),
  }
}

/** Every file of the store's records with its bytes. */
async function records(store: Store, runId: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const folder of [store.specsDir, store.evidenceDir, path.join(store.runDir(runId), 'snapshots')]) {
    for (const name of await readdir(folder)) if (name.endsWith('.json')) out[path.join(folder, name)] = await readFile(path.join(folder, name), 'utf8')
  }
  return out
}

describe('step commits through the commit log', () => {
  it('syncs once for a step that writes records, however many, and once for a step without', async () => {
    const {store, runId} = await openRun()
    const before = durability.count
    const first = await store.commitStep(journal(runId, 1, null, {evidence: 4, spec: true}))
    expect(durability.count - before, 'syncs of a step with 4 evidence records and a spec version').to.equal(1)
    const middle = durability.count
    await store.commitStep(journal(runId, 2, first.snapshot.meta.record_hash!, {evidence: 0, spec: false}))
    expect(durability.count - middle, 'syncs of a step without records').to.equal(1)
    expect(first.snapshot.evidence_links).to.have.length(4)
    expect(first.spec?.meta.spec_version).to.equal('S-20261121-0001')
    const log = (await readFile(store.commitLogFile(runId), 'utf8')).trim().split('\n')
    expect(log, 'one line, for the step with records').to.have.length(1)
    expect(JSON.parse(log[0]!)).to.include({seq: 1, recorded_at: at})
    expect(await store.recover(runId), 'nothing to finish or repair').to.equal(false)
  })

  it('moves the evidence counter once for a step, before its first record, not once per record', async () => {
    const {store, runId} = await openRun()
    const counter = path.join(store.idsDir, 'E')
    // The counter is replaced by a rename: a write shows as a new inode.
    const seen: Array<{ino: number; text: string}> = []
    await store.commitStep(journal(runId, 1, null, {evidence: 4, spec: false}), async (point) => {
      if (point.startsWith('evidence-written:')) seen.push({ino: statSync(counter).ino, text: readFileSync(counter, 'utf8')})
    })
    expect(seen).to.have.length(4)
    expect(new Set(seen.map((s) => s.ino)).size, 'counter files seen across the step').to.equal(1)
    expect(seen[0]!.text, 'the counter names the last id of the step before the first record is written').to.equal('4')
  })

  it('checks no record against its schema that it builds itself from a typed draft: a run, a change of it, a commit with evidence and a spec version', () => {
    // A new process: the validators this one loaded for other tests are not the commit's.
    const src = (file: string): string => JSON.stringify(path.join(repoRoot, file))
    const script = `import {Store} from ${src('src/store/file/store.ts')}
import {validatorsLoaded} from ${src('src/schema/registry.ts')}
import {runDraft, specDraft} from ${src('test/helpers/records.ts')}
const now = new Date(${JSON.stringify(at)})
const store = await Store.open(${JSON.stringify(path.join(dir, '.pipe'))})
// Started as pipe run starts one, held from birth: its record is the one in memory, not a file read back.
const {record: run, release} = await store.createStartedRun(runDraft(${JSON.stringify(at)}), now, {at: ${JSON.stringify(at)}, event: 'created'}, {event: {at: ${JSON.stringify(at)}, event: 'started'}, change: (r) => void (r.status = 'running')})
await store.updateRun(run.run_id, (r) => void (r.status_reason = 'working'), {at: ${JSON.stringify(at)}, event: 'noted'})
const snapshot = ${JSON.stringify(journal('RUN', 1, null, {evidence: 0, spec: false}).snapshot)}
snapshot.run_id = run.run_id
await store.commitStep({version: 1, run_id: run.run_id, seq: 1, step: 'compile', recorded_at: ${JSON.stringify(at)}, snapshot,
  spec: {draft: specDraft('goal', {runId: run.run_id, at: ${JSON.stringify(at)}})},
  evidence: [{draft: {type: 'log', source: {ref: 'log://1'}, content: {excerpt: 'x'}, linked_to: [{step: 'compile'}]}, link: 'log'}]})
await release()
console.log(JSON.stringify(validatorsLoaded()))`
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {encoding: 'utf8', cwd: repoRoot})
    expect(child.status, child.stderr).to.equal(0)
    expect(JSON.parse(child.stdout)).to.deep.equal([])
  })

  it('rewrites records and a snapshot a power failure emptied or lost, byte for byte, from the log', async () => {
    const {store, runId} = await openRun()
    const first = await store.commitStep(journal(runId, 1, null, {evidence: 2, spec: true}))
    await store.commitStep(journal(runId, 2, first.snapshot.meta.record_hash!, {evidence: 1, spec: true}))
    const intact = await records(store, runId)
    const [e1, e2] = first.snapshot.evidence_links.map((l) => store.evidenceFile(l.evidence_id))
    // What a power failure leaves of unsynced writes: a name with no data, a torn file, no file.
    await writeFile(e1!, '')
    await writeFile(e2!, '{"evidence_id": "E-00')
    await rm(store.specFile(first.spec!.meta.spec_version))
    await writeFile(store.snapshotFile(runId, 2), '')
    expect(await store.recover(runId)).to.equal(true)
    expect(await records(store, runId)).to.deep.equal(intact)
    expect(await store.recover(runId), 'a second pass has nothing left to do').to.equal(false)
  })

  it('never overwrites a record that is valid JSON but changed: that is tampering, for audit verify', async () => {
    const {store, runId} = await openRun()
    const first = await store.commitStep(journal(runId, 1, null, {evidence: 1, spec: false}))
    const file = store.evidenceFile(first.snapshot.evidence_links[0]!.evidence_id)
    const changed = (await readFile(file, 'utf8')).replace('line 0 of step 1', 'line 0 of step one')
    await writeFile(file, changed)
    expect(await store.recover(runId)).to.equal(false)
    expect(await readFile(file, 'utf8')).to.equal(changed)
  })

  it('logs the next id when a candidate was taken meanwhile, and repairs under the id the last line names', async () => {
    const {store, runId} = await openRun()
    // Another process takes E-0001 after this one's candidate names it, before it is tried.
    const other = journal(runId, 9, null, {evidence: 1, spec: false}).evidence[0]!.draft
    const j = journal(runId, 1, null, {evidence: 1, spec: false})
    j.evidence[0]!.candidate = 'E-0001'
    await store.writeEvidence({...other, content: {excerpt: 'not this run'}}, now)
    const committed = await store.commitStep(j)
    const id = committed.snapshot.evidence_links[0]!.evidence_id
    expect(id).to.equal('E-0002')
    const lines = (await readFile(store.commitLogFile(runId), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Journal)
    expect(
      lines.map((l) => l.evidence[0]!.candidate),
      'a line per id tried',
    ).to.deep.equal(['E-0001', 'E-0002'])
    const intact = await records(store, runId)
    await rm(store.evidenceFile(id))
    expect(await store.recover(runId)).to.equal(true)
    expect(await records(store, runId)).to.deep.equal(intact)
  })

  it("finishes an older pipe's journal.json, moving it into the log", async () => {
    const {store, runId} = await openRun()
    const j = journal(runId, 1, null, {evidence: 2, spec: true})
    j.evidence.forEach((item, i) => (item.candidate = `E-000${i + 1}`))
    j.spec!.candidate = 'S-20261121-0001'
    await writeFile(store.journalFile(runId), `${JSON.stringify(j)}\n`)
    expect(await store.recover(runId)).to.equal(true)
    const [snapshot] = await store.readSnapshots(runId)
    expect(snapshot!.spec_version_out).to.equal('S-20261121-0001')
    expect(snapshot!.evidence_links.map((l) => l.evidence_id)).to.deep.equal(['E-0001', 'E-0002'])
    expect(await readdir(store.runDir(runId))).to.not.include('journal.json')
    expect((await readFile(store.commitLogFile(runId), 'utf8')).trim().split('\n')).to.have.length(1)
  })

  it('cuts a torn last line of the log before the next append, and ignores it when reading', async () => {
    const {store, runId} = await openRun()
    await store.commitStep(journal(runId, 1, null, {evidence: 1, spec: false}))
    await writeFile(store.commitLogFile(runId), `${await readFile(store.commitLogFile(runId), 'utf8')}{"version":1,"run_id":"${runId}","seq":2,"ste`)
    expect(await store.readCommitLog(runId)).to.have.length(1)
    expect(await store.recover(runId)).to.equal(false)
    const [first] = await store.readSnapshots(runId)
    await store.commitStep(journal(runId, 2, first!.meta.record_hash!, {evidence: 1, spec: false}))
    const lines = (await readFile(store.commitLogFile(runId), 'utf8')).split('\n')
    expect(lines.at(-1)).to.equal('')
    expect(lines.slice(0, -1).map((l) => (JSON.parse(l) as Journal).seq)).to.deep.equal([1, 2])
  })

  it('follows no line pipe could not have written: ids of another series or day, paths, a seq its snapshot does not carry', async () => {
    const {store, runId} = await openRun()
    const log = store.commitLogFile(runId)
    const line = (change: (j: Journal) => void): string => {
      const j = journal(runId, 1, null, {evidence: 1, spec: true})
      change(j)
      return `${JSON.stringify(j)}\n`
    }
    const hostile = [
      line((j) => (j.spec!.candidate = 'S-20200101-0001')),
      line((j) => (j.spec!.candidate = '../../escape')),
      line((j) => (j.evidence[0]!.candidate = 'S-20261121-0001')),
      line((j) => (j.evidence[0]!.candidate = 'E-0001/../../x')),
      line((j) => (j.snapshot.step.seq = 7)),
      line((j) => ((j as {evidence: unknown}).evidence = [null])),
      line((j) => ((j as {recorded_at: unknown}).recorded_at = 'yesterday')),
    ]
    for (const text of hostile) {
      await writeFile(log, text)
      expect(await store.recover(runId).catch((error: Error) => error.message), text).to.equal(false)
      expect(await records(store, runId), text).to.deep.equal({})
    }
    // The same line as pipe writes it is finished.
    await writeFile(
      log,
      line(() => undefined),
      {flag: 'a'},
    )
    expect(await store.recover(runId)).to.equal(true)
    expect((await store.readSnapshots(runId)).map((s) => s.spec_version_out)).to.deep.equal(['S-20261121-0001'])
  })
})
