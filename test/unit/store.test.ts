import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {appendFile, mkdir, readdir, readFile, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {Store, type SpecDraft} from '../../src/store/file/store.js'
import {Ledger, ledgerKey} from '../../src/store/file/ledger.js'
import type {LedgerEntry} from '../../src/types/ledger.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {repoRoot, tempDir} from '../helpers/cli.js'
import {specDraft, runDraft} from '../helpers/records.js'
import {expectPipeError} from '../helpers/expect.js'
import {bundledScript} from '../helpers/bundled.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-store-')))
afterEach(async () => cleanup())

const now = new Date('2026-11-21T10:00:00Z')

const draft = (goal: string): SpecDraft => specDraft(goal, {at: now.toISOString()})

describe('store', () => {
  it('allocates ids in the seed formats, counted per day, per year and overall', async () => {
    const store = await Store.open(path.join(dir, 's'))
    expect((await store.writeSpec(draft('a'), now)).meta.spec_version).to.equal('S-20261121-0001')
    expect((await store.writeSpec(draft('b'), now)).meta.spec_version).to.equal('S-20261121-0002')
    expect((await store.writeSpec(draft('c'), new Date('2026-11-22T00:00:01Z'))).meta.spec_version).to.equal('S-20261122-0001')
    expect(await store.createFeature(now, 'x')).to.equal('F-2026-001')
    expect((await store.writeEvidence({type: 'log', source: {ref: 'x'}, content: {excerpt: 'y'}, linked_to: [{step: 's'}]}, now)).evidence_id).to.equal(
      'E-0001',
    )
  })

  it('never hands out one id twice, within a process or across processes, even with a lost hint', async () => {
    const root = path.join(dir, 's')
    const store = await Store.open(root)
    const inProcess = await Promise.all(Array.from({length: 40}, (_, i) => store.writeSpec(draft(`g${i}`), now)))
    expect(new Set(inProcess.map((s) => s.meta.spec_version)).size).to.equal(40)
    await writeFile(path.join(root, 'ids', 'S-20261121'), '3')
    const script = `const {Store} = await import(${JSON.stringify(path.join(repoRoot, 'src/store/file/store.ts'))});
      const store = await Store.open(${JSON.stringify(root)});
      const ids = [];
      for (let i = 0; i < 15; i++) ids.push((await store.writeSpec({meta: {feature_id: 'F-2026-001', status: 'compiled', parent_version: null, run_id: 'R-20261121-0001', created_by_step: 'x', created_at: '2026-11-21T10:00:00.000Z'}, goal: 'p' + process.pid + i, features: [], constraints: [], non_functional: [], acceptance_criteria: [], open_questions: [], tasks: [], vv: []}, new Date('2026-11-21T10:00:00Z'))).meta.spec_version);
      console.log(JSON.stringify(ids))`
    const outputs = await Promise.all(
      Array.from(
        {length: 4},
        () =>
          new Promise<string[]>((resolve, reject) => {
            const child = spawn(process.execPath, [bundledScript(script)], {cwd: repoRoot})
            let out = ''
            let err = ''
            child.stdout.on('data', (d: Buffer) => (out += d.toString()))
            child.stderr.on('data', (d: Buffer) => (err += d.toString()))
            child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out) as string[]) : reject(new Error(err))))
          }),
      ),
    )
    const all = [...inProcess.map((s) => s.meta.spec_version), ...outputs.flat()]
    expect(all).to.have.length(100)
    expect(new Set(all).size).to.equal(100)
    expect((await readdir(path.join(root, 'specs'))).filter((f) => f.endsWith('.json'))).to.have.length(100)
  })

  it('refuses to overwrite a spec version, and reports one changed on disk', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const spec = await store.writeSpec(draft('original'), now)
    await expectPipeError(store.putSpec(spec), 'E_CONFLICT')
    const file = store.specFile(spec.meta.spec_version)
    await writeFile(file, (await readFile(file, 'utf8')).replace('original', 'tampered'))
    const error = await expectPipeError(store.readSpec(spec.meta.spec_version), 'E_INTEGRITY')
    expect(error.message).to.contain('does not match its content hash')
    await writeFile(file, '{ not json')
    await expectPipeError(store.readSpec(spec.meta.spec_version), 'E_INTEGRITY')
  })

  it('writes a snapshot once per seq, idempotently, and refuses an invalid one', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const at = now.toISOString()
    const run = await store.createRun(runDraft(at, {status: 'running'}), now, {at, event: 'created'})
    const snapshot: Snapshot = {
      run_id: run.run_id,
      feature_id: 'F-2026-001',
      spec_version_in: null,
      spec_version_out: null,
      step: {name: 'a', kind: 'noop', seq: 1, started_at: at, ended_at: at},
      inputs: {},
      outputs: {},
      decisions: [],
      evidence_links: [],
      errors: [],
      meta: {engine_version: 't', llm_model: null, extensions: {}},
    }
    const stored = await store.writeSnapshot(snapshot)
    expect(stored.meta.record_hash).to.match(/^sha256:/)
    // The same snapshot again (finishing a commit after a crash) is accepted; a different one is not.
    expect(await store.writeSnapshot(snapshot)).to.deep.equal(stored)
    await expectPipeError(store.writeSnapshot({...snapshot, outputs: {other: true}}), 'E_CONFLICT')
    // A record pipe builds is not checked against its schema again (issue 38), but a run id that is none is still refused.
    await expectPipeError(store.writeSnapshot({...snapshot, step: {...snapshot.step, seq: 2}, run_id: 'R-1'}), 'E_INVALID_ARGS')
    expect(await store.readSnapshots(run.run_id)).to.have.length(1)
  })

  it('reads a timeline whose last line was torn by a crash', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const at = now.toISOString()
    const run = await store.createRun(runDraft(at), now, {at, event: 'created'})
    await appendFile(path.join(store.runDir(run.run_id), 'events.jsonl'), '{"at": "2026-11-21T10:00:01Z", "ev')
    expect((await store.readEvents(run.run_id)).map((e) => e.event)).to.deep.equal(['created'])
    // The next append cuts the torn line off first, so the chain goes on from the last intact line.
    await store.appendEvent(run.run_id, {at, event: 'noted'})
    const lines = (await readFile(path.join(store.runDir(run.run_id), 'events.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as {event: string; prev: string | null; hash: string})
    expect(lines.map((l) => l.event)).to.deep.equal(['created', 'noted'])
    expect(lines[1]!.prev).to.equal(lines[0]!.hash)
  })

  it('chains every run created in the run index, going on past a line torn by a crash', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const at = now.toISOString()
    const draft = {
      feature_id: 'F-2026-001',
      status: 'pending' as const,
      pipeline: {path: '/p.yaml', name: 'p', hash: `sha256:${'a'.repeat(64)}`},
      policy_version: `sha256:${'b'.repeat(64)}`,
      provider: {kind: 'offline', model: null},
      input: {kind: 'none' as const, ref: 'none://'},
      created_at: at,
      updated_at: at,
      owner: {pid: process.pid, host: 'h', user: 'u'},
    }
    const first = await store.createRun(draft, now, {at, event: 'created'})
    await appendFile(store.runIndexFile, '{"run_id": "R-2026')
    const second = await store.createRun(draft, now, {at, event: 'created'})
    const {readChain} = await import('../../src/store/file/trail.js')
    const chain = readChain(await readFile(store.runIndexFile, 'utf8'), undefined)
    expect(chain.problems).to.deep.equal([])
    expect(chain.torn).to.equal(false)
    expect(chain.lines.map((l) => l.run_id)).to.deep.equal([first.run_id, second.run_id])
    expect(chain.lines[1]!.prev).to.equal(chain.lines[0]!.hash)
    expect((await readdir(store.runsDir)).sort()).to.deep.equal([first.run_id, second.run_id].sort())
  })

  it('rejects malformed ids before touching the file system', async () => {
    const store = await Store.open(path.join(dir, 's'))
    await expectPipeError(store.readRun('../../etc/passwd'), 'E_INVALID_ARGS')
    await expectPipeError(store.readSpec('S-1'), 'E_INVALID_ARGS')
    await expectPipeError(store.readRun('R-20261121-0099'), 'E_NOT_FOUND')
  })

  it('gives one process at a time ownership of a run', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const at = now.toISOString()
    const run = await store.createRun(runDraft(at), now, {at, event: 'created'})
    const release = await store.acquireRun(run.run_id)
    await expectPipeError(store.acquireRun(run.run_id), 'E_CONFLICT')
    await release()
    const again = await store.acquireRun(run.run_id)
    await again()
    // A lock left by a process that is gone is taken over.
    await writeFile(path.join(store.runDir(run.run_id), 'owner.lock'), JSON.stringify({pid: 2 ** 22 + 12345, host: (await import('node:os')).hostname()}))
    const takeover = await store.acquireRun(run.run_id)
    await takeover()
  })
})

describe('store listings in allocation order', () => {
  it('puts a counter past its fourth digit after 9999: runs newest first, spec versions and evidence oldest first', async () => {
    const root = path.join(dir, 's')
    const store = await Store.open(root)
    await writeFile(path.join(root, 'ids', 'S-20261121'), '9998')
    const versions = [await store.writeSpec(draft('a'), now), await store.writeSpec(draft('b'), now)].map((s) => s.meta.spec_version)
    expect(versions).to.deep.equal(['S-20261121-9999', 'S-20261121-10000'])
    expect((await store.listSpecVersions()).slice(-2)).to.deep.equal(versions)
    for (const id of ['R-20261121-9999', 'R-20261121-10000', 'R-20261120-20000']) await mkdir(path.join(root, 'runs', id), {recursive: true})
    expect(await store.listRunIds()).to.deep.equal(['R-20261121-10000', 'R-20261121-9999', 'R-20261120-20000'])
  })
})

/** A delivered ledger entry of one feature and spec version, last updated at `updated`. */
function entry(feature: string, spec: string, updated: string): LedgerEntry {
  return {
    key: ledgerKey(feature, 'local', spec),
    feature_id: feature,
    target: 'local',
    target_type: 'file',
    spec_version: spec,
    run_id: 'R-20261121-0001',
    status: 'delivered',
    attempts: [],
    created_at: updated,
    updated_at: updated,
  }
}

describe('ledger list with a limit', () => {
  it('reads the most recently written entries from the ledger log, and every entry when the log misses one', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const ledger = new Ledger(store)
    await ledger.write(entry('F-2026-001', 'S-20261121-0001', '2026-11-21T10:00:00.000Z'))
    await ledger.write(entry('F-2026-002', 'S-20261121-0002', '2026-11-21T10:01:00.000Z'))
    await ledger.write(entry('F-2026-003', 'S-20261121-0003', '2026-11-21T10:02:00.000Z'))
    // Written again last: the newest update.
    await ledger.write(entry('F-2026-001', 'S-20261121-0001', '2026-11-21T10:03:00.000Z'))
    expect((await ledger.list({}, 2)).map((e) => e.feature_id)).to.deep.equal(['F-2026-001', 'F-2026-003'])
    expect((await ledger.list({})).map((e) => e.feature_id)).to.deep.equal(['F-2026-001', 'F-2026-003', 'F-2026-002'])
    expect((await ledger.list({feature: 'F-2026-002'}, 2)).map((e) => e.feature_id)).to.deep.equal(['F-2026-002'])
    // An entry the log does not name (a store older than the log) is still listed.
    const old = entry('F-2026-004', 'S-20261121-0004', '2026-11-21T10:04:00.000Z')
    await writeFile(path.join(ledger.dir, `${old.key}.json`), JSON.stringify(old))
    expect((await ledger.list({}, 2)).map((e) => e.feature_id)).to.deep.equal(['F-2026-004', 'F-2026-001'])
  })
})

describe('ledger list reads only the log tail when the log counts every entry', () => {
  it('counts entry files in the log, and a log without counts (an older pipe) is counted from the folder', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const ledger = new Ledger(store)
    // An older pipe's log: lines without counts, for two entries already on disk.
    for (const [i, e] of [
      entry('F-2026-001', 'S-20261121-0001', '2026-11-21T10:00:00.000Z'),
      entry('F-2026-002', 'S-20261121-0002', '2026-11-21T10:01:00.000Z'),
    ].entries()) {
      await ledger.write(e)
      expect(i).to.be.a('number')
    }
    const logFile = path.join(store.auditDir, 'ledger.jsonl')
    const counts = async (): Promise<unknown[]> =>
      (await readFile(logFile, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as {entries?: unknown}).entries)
    expect(await counts()).to.deep.equal([1, 2])
    // Rewritten: no new file, the count stays.
    await ledger.write(entry('F-2026-001', 'S-20261121-0001', '2026-11-21T10:02:00.000Z'))
    expect((await counts()).at(-1)).to.equal(2)
    // A line without a count as the last line: the next write counts the folder.
    await appendFile(logFile, '')
    const text = (await readFile(logFile, 'utf8')).trim().split('\n')
    const stripped = text.map((l) => {
      const {entries: _e, ...rest} = JSON.parse(l) as Record<string, unknown>
      return JSON.stringify(rest)
    })
    await writeFile(logFile, `${stripped.join('\n')}\n`)
    await ledger.write(entry('F-2026-003', 'S-20261121-0003', '2026-11-21T10:03:00.000Z'))
    expect((await counts()).at(-1)).to.equal(3)
  })

  it('lists the newest entries from the tail, and every entry when a file is not counted', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const ledger = new Ledger(store)
    for (let i = 1; i <= 30; i++)
      await ledger.write(
        entry(`F-2026-${String(i).padStart(3, '0')}`, `S-20261121-${String(i).padStart(4, '0')}`, `2026-11-21T10:${String(i).padStart(2, '0')}:00.000Z`),
      )
    expect((await ledger.list({}, 3)).map((e) => e.feature_id)).to.deep.equal(['F-2026-030', 'F-2026-029', 'F-2026-028'])
    expect((await ledger.list({feature: 'F-2026-002'}, 3)).map((e) => e.feature_id)).to.deep.equal(['F-2026-002'])
    // An entry damaged on disk that a list reads is named, never left out unsaid.
    const damaged = path.join(ledger.dir, `${ledgerKey('F-2026-001', 'local', 'S-20261121-0001')}.json`)
    await writeFile(damaged, 'not json')
    const error = await ledger.list({}, 2).then(
      () => null,
      (e: unknown) => e as {code: string; message: string},
    )
    expect(error?.code).to.equal('E_INTEGRITY')
    expect(error?.message).to.contain(damaged)
    await rm(damaged)
    // A file the log does not count: the counts differ, every entry is read, the newest comes first.
    const extra = entry('F-2026-099', 'S-20261121-0099', '2026-11-21T11:00:00.000Z')
    await writeFile(path.join(ledger.dir, `${extra.key}.json`), JSON.stringify(extra))
    expect((await ledger.list({}, 2)).map((e) => e.feature_id)).to.deep.equal(['F-2026-099', 'F-2026-030'])
  })
})

describe('linesFromEnd', () => {
  it('gives complete lines last first across block boundaries, skipping a torn last line', async () => {
    const {linesFromEnd} = await import('../../src/store/file/trail.js')
    const file = path.join(dir, 'log')
    const collect = async (block: number): Promise<string[]> => {
      const out: string[] = []
      for await (const line of linesFromEnd(file, block)) out.push(line)
      return out
    }
    const lines = Array.from({length: 40}, (_, i) => `{"n":${i},"pad":"${'x'.repeat(i % 7)}"}`)
    await writeFile(file, `${lines.join('\n')}\n`)
    for (const block of [1, 2, 3, 7, 16, 64, 65536]) expect(await collect(block), `block ${block}`).to.deep.equal([...lines].reverse())
    await appendFile(file, '{"torn":')
    for (const block of [1, 5, 65536]) expect(await collect(block), `torn, block ${block}`).to.deep.equal([...lines].reverse())
    await writeFile(file, '\n\nonly\n')
    expect(await collect(2)).to.deep.equal(['only'])
    await writeFile(file, 'no newline at all')
    expect(await collect(4)).to.deep.equal([])
    await writeFile(file, '')
    expect(await collect(4)).to.deep.equal([])
    expect(
      await (async () => {
        const out: string[] = []
        for await (const line of linesFromEnd(path.join(dir, 'missing'))) out.push(line)
        return out
      })(),
    ).to.deep.equal([])
  })
})

describe('spec versions newest first from the id counters', () => {
  async function versions(store: Store): Promise<string[]> {
    const out: string[] = []
    for await (const v of store.newestSpecVersions()) out.push(v)
    return out
  }

  it('walks the counters per day, probes past a counter that lags, skips numbers never written, and falls back to the folder', async () => {
    const store = await Store.open(path.join(dir, 's'))
    for (const goal of ['a', 'b', 'c']) await store.writeSpec(draft(goal), now)
    await store.writeSpec(draft('d'), new Date('2026-11-22T09:00:00Z'))
    expect(await versions(store)).to.deep.equal(['S-20261122-0001', 'S-20261121-0003', 'S-20261121-0002', 'S-20261121-0001'])
    // A counter behind what exists (an older pipe moved it after the take): the next numbers are probed.
    await writeFile(path.join(store.idsDir, 'S-20261121'), '1')
    expect(await versions(store)).to.deep.equal(['S-20261122-0001', 'S-20261121-0003', 'S-20261121-0002', 'S-20261121-0001'])
    // A number the counter names but nobody wrote, and a version deleted by hand, are skipped.
    await writeFile(path.join(store.idsDir, 'S-20261121'), '5')
    const {rm} = await import('node:fs/promises')
    await rm(store.specFile('S-20261121-0002'))
    expect(await versions(store)).to.deep.equal(['S-20261122-0001', 'S-20261121-0003', 'S-20261121-0001'])
    // An unreadable counter, or one far past what exists: the folder is listed instead.
    await writeFile(path.join(store.idsDir, 'S-20261121'), 'garbage')
    expect(await versions(store)).to.deep.equal(['S-20261122-0001', 'S-20261121-0003', 'S-20261121-0001'])
    await writeFile(path.join(store.idsDir, 'S-20261121'), '5000')
    expect(await versions(store)).to.deep.equal(['S-20261122-0001', 'S-20261121-0003', 'S-20261121-0001'])
  })

  it('counters no pipe wrote (days that are no dates, a FIFO, a folder, huge or negative numbers) give the folder, never a hang', async () => {
    const {execFileSync} = await import('node:child_process')
    const store = await Store.open(path.join(dir, 's'))
    for (const goal of ['a', 'b']) await store.writeSpec(draft(goal), now)
    await store.writeSpec(draft('c'), new Date('2026-11-22T09:00:00Z'))
    const all = ['S-20261122-0001', 'S-20261121-0002', 'S-20261121-0001']
    for (const [name, make] of [
      ['S-99999999', () => writeFile(path.join(store.idsDir, 'S-99999999'), '7')],
      ['S-00000000', () => writeFile(path.join(store.idsDir, 'S-00000000'), '1')],
      ['S-20261399', () => writeFile(path.join(store.idsDir, 'S-20261399'), '2')],
      ['S-20261121', () => writeFile(path.join(store.idsDir, 'S-20261121'), '-5')],
      ['S-20261121', () => writeFile(path.join(store.idsDir, 'S-20261121'), '99999999999999999999')],
      ['S-20261121', async () => execFileSync('mkfifo', [path.join(store.idsDir, 'S-20261121')])],
      ['S-20261121', () => mkdir(path.join(store.idsDir, 'S-20261121'))],
    ] as const) {
      const {rm} = await import('node:fs/promises')
      await rm(path.join(store.idsDir, name), {recursive: true, force: true})
      await make()
      expect(await versions(store), name).to.deep.equal(all)
      await rm(path.join(store.idsDir, name), {recursive: true, force: true})
      await writeFile(path.join(store.idsDir, 'S-20261121'), '2')
    }
    // A day between two counted days whose counter was removed.
    await writeFile(path.join(store.idsDir, 'S-20261120'), '0')
    await rm(path.join(store.idsDir, 'S-20261121'))
    expect(await versions(store)).to.deep.equal(all)
  })

  it('moves the counter before an id is taken, so a process killed right after the take leaves it listed', async () => {
    const {allocateId} = await import('../../src/store/file/ids.js')
    const idsDir = path.join(dir, 'ids')
    let seen = ''
    const id = await allocateId(idsDir, 'S', '20261121', async () => {
      seen = await readFile(path.join(idsDir, 'S-20261121'), 'utf8')
      return true
    })
    expect(id).to.equal('S-20261121-0001')
    expect(seen).to.equal('1')
  })
})

describe('ledger list with a limit, against a log changed by hand', () => {
  function entry(feature: string, spec: string, updated: string): LedgerEntry {
    return {
      key: ledgerKey(feature, 'local', spec),
      feature_id: feature,
      target: 'local',
      target_type: 'file',
      spec_version: spec,
      run_id: 'R-20261121-0001',
      status: 'delivered',
      attempts: [],
      created_at: updated,
      updated_at: updated,
    }
  }
  const features = (list: LedgerEntry[]): string[] => list.map((e) => e.feature_id)

  it('gives what listing every entry gives: a forged count, an entry removed and one put by hand, writes out of time order', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const ledger = new Ledger(store)
    const logFile = path.join(store.auditDir, 'ledger.jsonl')
    for (let i = 1; i <= 3; i++) await ledger.write(entry(`F-2026-00${i}`, `S-20261121-000${i}`, `2026-11-21T10:0${i}:00.000Z`))
    // A file the log never named, and a last line whose count was raised to match the folder.
    const hand = entry('F-2026-009', 'S-20261121-0009', '2026-11-21T09:00:00.000Z')
    await writeFile(path.join(ledger.dir, `${hand.key}.json`), JSON.stringify(hand))
    const lines = (await readFile(logFile, 'utf8')).trim().split('\n')
    await writeFile(logFile, `${[...lines.slice(0, -1), lines.at(-1)!.replace('"entries":3', '"entries":4')].join('\n')}\n`)
    expect(features(await ledger.list({}, 10))).to.deep.equal(features(await ledger.list({})))
    expect(features(await ledger.list({}, 10))).to.include('F-2026-009')
    // An entry the log names, removed: the count matches again (3 + the one by hand - 1), but the
    // log no longer speaks for the folder.
    await writeFile(logFile, `${lines.join('\n')}\n`)
    await rm(path.join(ledger.dir, `${ledgerKey('F-2026-003', 'local', 'S-20261121-0003')}.json`))
    const newer = entry('F-2026-008', 'S-20261121-0008', '2026-11-21T11:00:00.000Z')
    await writeFile(path.join(ledger.dir, `${newer.key}.json`), JSON.stringify(newer))
    expect(features(await ledger.list({}, 1))).to.deep.equal(['F-2026-008'])
  })

  it('two publishes that stamp their times in one order and take the log in the other', async () => {
    const store = await Store.open(path.join(dir, 's'))
    const ledger = new Ledger(store)
    await ledger.write(entry('F-2026-001', 'S-20261121-0001', '2026-11-21T10:00:00.002Z'))
    await ledger.write(entry('F-2026-002', 'S-20261121-0002', '2026-11-21T10:00:00.001Z'))
    expect(features(await ledger.list({}, 1))).to.deep.equal(features(await ledger.list({})).slice(0, 1))
    // Equal times: the same order either way.
    await ledger.write(entry('F-2026-004', 'S-20261121-0004', '2026-11-21T11:00:00.000Z'))
    await ledger.write(entry('F-2026-003', 'S-20261121-0003', '2026-11-21T11:00:00.000Z'))
    expect(features(await ledger.list({}, 1))).to.deep.equal(features(await ledger.list({})).slice(0, 1))
  })
})
