/**
 * The audit trail of the default run on the built CLI: ids unique across runs in parallel, a changed
 * byte named by file and field, a re-sealed or missing snapshot caught; and replay of a finished run
 * to the same gate results. Both start from a finished run made once for this file.
 *
 * `pipe` processes: the eight runs at once (pipeHere runs one command at a time), the finished run
 * made once (durable-fixtures.ts), the audit verify that names the changed bytes, and the file's
 * first replay (--check) and runs show. Every other command runs in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {fullRun, made, onlyRun, snapshotsOf, type RunJson} from '../helpers/durable-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-durable-')))
afterEach(async () => cleanup())

/** A default run that succeeded. */
const finished = made(fullRun, 0)

describe('the audit trail', function () {
  this.timeout(120000)

  it('keeps every id unique with eight runs in parallel on one store, and verifies', async () => {
    const results = await Promise.all(Array.from({length: 8}, () => pipe([...fullRun, '--json'], {cwd: dir})))
    for (const r of results) expect(r.code, r.stderr).to.equal(0)
    const bodies = results.map((r) => json<RunJson>(r))
    expect(new Set(bodies.map((b) => b.run_id)).size).to.equal(8)
    const all = {spec: [] as string[], evidence: [] as string[]}
    for (const b of bodies) {
      for (const s of await snapshotsOf(dir, b.run_id)) {
        if (s.spec_version_out) all.spec.push(s.spec_version_out)
        all.evidence.push(...s.evidence_links.map((l) => l.evidence_id))
      }
    }
    expect(new Set(all.spec).size).to.equal(all.spec.length)
    expect(new Set(all.evidence).size).to.equal(all.evidence.length)
    const audit = await pipeHere(['audit', 'verify', '--json'], {cwd: dir})
    expect(audit.code, audit.stdout).to.equal(0)
    expect(json<{ok: boolean; runs: number}>(audit)).to.include({ok: true, runs: 8})
  })

  it('names the file and field of a snapshot, a spec version and an evidence record changed by one byte', async () => {
    await finished(dir)
    const run = await onlyRun(dir)
    const list = await snapshotsOf(dir, run.run_id)
    const snapshotFile = path.join(dir, '.pipe', 'runs', run.run_id, 'snapshots', '000003.json')
    const specFile = path.join(dir, '.pipe', 'specs', `${run.spec_version}.json`)
    const evidenceFile = path.join(dir, '.pipe', 'evidence', `${list[0]!.evidence_links[0]!.evidence_id}.json`)
    const flip = async (file: string, from: string, to: string): Promise<void> => {
      const text = await readFile(file, 'utf8')
      expect(text).to.contain(from)
      await writeFile(file, text.replace(from, to))
    }
    await flip(snapshotFile, '"decision": "fail"', '"decision": "pass"')
    await flip(specFile, 'monthly sales', 'monthly Sales')
    await flip(evidenceFile, 'Build a', 'build a')
    const audit = await pipe(['audit', 'verify'], {cwd: dir})
    expect(audit.code).to.equal(4)
    expect(audit.stderr).to.contain('Error [E_INTEGRITY]')
    expect(audit.stdout).to.contain(`${snapshotFile}  decisions  ${run.run_id}#3: field changed`)
    expect(audit.stdout).to.contain(`${specFile}  goal  ${run.spec_version}: field changed`)
    expect(audit.stdout).to.match(new RegExp(`${evidenceFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}  content  E-\\d+: field changed`))
    const one = await pipeHere(['audit', 'verify', run.run_id, '--json'], {cwd: dir})
    expect(one.code).to.equal(4)
    const report = json<{ok: boolean; problems: Array<{file: string; field: string}>}>(one)
    expect(report.problems.map((p) => `${path.basename(p.file)} ${p.field}`)).to.include.members(['000003.json decisions', `${run.spec_version}.json goal`])
  })

  it('catches a re-sealed snapshot through the hash chain, and a missing one as a gap', async () => {
    await finished(dir)
    const run = await onlyRun(dir)
    const snapshots = path.join(dir, '.pipe', 'runs', run.run_id, 'snapshots')
    const {sealSnapshot} = await import('../../src/store/trail/integrity.js')
    const third = JSON.parse(await readFile(path.join(snapshots, '000003.json'), 'utf8')) as Snapshot
    third.decisions[0]!.reason = 'rewritten after the fact'
    await writeFile(path.join(snapshots, '000003.json'), JSON.stringify(sealSnapshot(third), null, 2))
    await (await import('node:fs/promises')).rm(path.join(snapshots, '000006.json'))
    const audit = await pipeHere(['audit', 'verify', run.run_id], {cwd: dir})
    expect(audit.code).to.equal(4)
    expect(audit.stdout).to.contain(`000004.json  meta.prev_hash  ${run.run_id}#4: does not match the record hash of the snapshot before it`)
    expect(audit.stdout).to.contain(`000006.json  (file)  ${run.run_id}#6: snapshot is missing (a gap in seq)`)
  })
})

describe('replay', function () {
  this.timeout(120000)

  it('reproduces every gate result of a finished run, and replays from a step to identical gate results', async () => {
    const original = json<RunJson>(await pipeHere([...fullRun, '--json'], {cwd: dir}))
    const check = await pipe(['replay', original.run_id, '--check', '--json'], {cwd: dir})
    expect(check.code, check.stderr).to.equal(0)
    const report = json<{same: boolean; gates: Array<{same: boolean}>}>(check)
    expect(report.same).to.equal(true)
    expect(report.gates).to.have.length(2)

    const replayed = await pipeHere(['replay', original.run_id, '--from', 'validate_gates', '--decision', 'go', '--json'], {cwd: dir})
    expect(replayed.code, replayed.stderr).to.equal(0)
    const copy = json<RunJson>(replayed)
    expect(copy.run_id).to.not.equal(original.run_id)
    expect(copy.feature_id).to.equal(original.feature_id)
    const before = await snapshotsOf(dir, original.run_id)
    const after = await snapshotsOf(dir, copy.run_id)
    const gates = (list: Snapshot[]): string[] =>
      list.filter((s) => s.step.kind === 'gate').map((s) => JSON.stringify((s.outputs as {gate_result?: unknown}).gate_result))
    expect(gates(after)).to.deep.equal(gates(before))
    expect(after[0]!.meta.replay_of).to.deep.equal({run_id: original.run_id, seq: 3})
    expect(after[0]!.meta.prev_hash).to.equal(before[1]!.meta.record_hash)
    expect(after[0]!.spec_version_in).to.equal(before[2]!.spec_version_in)
    expect(json<{run: RunRecord}>(await pipe(['runs', 'show', copy.run_id, '--json'], {cwd: dir})).run.replay_of).to.deep.equal({
      run_id: original.run_id,
      seq: 3,
      step: 'validate_gates',
    })
    expect((await pipeHere(['audit', 'verify'], {cwd: dir})).code).to.equal(0)
  })

  it('reports a gate result that no longer reproduces', async () => {
    await finished(dir)
    const original = await onlyRun(dir)
    const first = (await snapshotsOf(dir, original.run_id)).find((s) => s.step.kind === 'gate')!
    const file = path.join(dir, '.pipe', 'runs', original.run_id, 'snapshots', `${String(first.step.seq).padStart(6, '0')}.json`)
    const {sealSnapshot} = await import('../../src/store/trail/integrity.js')
    const changed = JSON.parse(await readFile(file, 'utf8')) as Snapshot
    ;(changed.outputs as {gate_result: {completeness_score: number}}).gate_result.completeness_score = 0.99
    await writeFile(file, JSON.stringify(sealSnapshot(changed), null, 2))
    const check = await pipeHere(['replay', original.run_id, '--check'], {cwd: dir})
    expect(check.code).to.equal(4)
    expect(check.stdout).to.contain(`#${first.step.seq} validate_gates on ${first.spec_version_in}: DIFFERENT`)
  })
})
