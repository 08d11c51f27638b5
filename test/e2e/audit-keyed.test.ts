/**
 * pipe audit verify in keyed mode (PIPE_AUDIT_KEY) on the built CLI: records sealed with the key,
 * the key never written, and a full re-seal by someone without it caught.
 */
import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {sealRecord, sealSnapshot} from '../../src/store/trail/integrity.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {fullRun, readJson, readLines, rechain, verify, writeJson, writeLines} from '../helpers/audit-fixtures.js'

// The tamperer re-seals with pipe's own functions, as anyone with the source could: without a key.
delete process.env.PIPE_AUDIT_KEY

describe('audit verify in keyed mode (PIPE_AUDIT_KEY)', function () {
  this.timeout(120000)
  const key = 'k3y-only-the-team-knows'
  let dir: string
  let cleanup: () => Promise<void>
  before(async () => ({dir, cleanup} = await tempDir('pipe-audit-keyed-')))
  after(async () => cleanup())

  it('seals with the key, never writes it, checks with it, and refuses to pass without it', async () => {
    const run = await pipe(fullRun, {cwd: dir, env: {PIPE_AUDIT_KEY: key}})
    expect(run.code, run.stderr).to.equal(0)
    const runId = json<{run_id: string}>(run).run_id
    const files: string[] = []
    const walk = async (at: string): Promise<void> => {
      for (const entry of await readdir(at, {withFileTypes: true})) {
        if (entry.isDirectory()) await walk(path.join(at, entry.name))
        else files.push(path.join(at, entry.name))
      }
    }
    await walk(path.join(dir, '.pipe'))
    for (const file of files) expect(await readFile(file, 'utf8'), file).to.not.contain(key)
    const record = await readJson<RunRecord>(path.join(dir, '.pipe', 'runs', runId, 'run.json'))
    expect(record.seal).to.match(/^hmac-sha256:[0-9a-f]{64}$/)
    const snapshot = await readJson<Snapshot>(path.join(dir, '.pipe', 'runs', runId, 'snapshots', '000001.json'))
    expect(snapshot.meta.record_hash).to.match(/^hmac-sha256:/)

    const good = await verify(dir, {PIPE_AUDIT_KEY: key})
    expect(good.code, good.stdout).to.equal(0)
    expect(good.report).to.include({ok: true})
    const plain = await pipe(['audit', 'verify'], {cwd: dir, env: {PIPE_AUDIT_KEY: undefined}})
    expect(plain.code).to.equal(2)
    expect(plain.stderr).to.contain('keyed seal(s) NOT checked').and.contain('cannot be checked without the audit key')
    const wrong = await verify(dir, {PIPE_AUDIT_KEY: 'a guess'})
    expect(wrong.code).to.equal(4)
  })

  it('catches a full re-seal by someone without the key', async () => {
    const run = await pipe(fullRun, {cwd: dir, env: {PIPE_AUDIT_KEY: key}})
    const runId = json<{run_id: string}>(run).run_id
    const runDir = path.join(dir, '.pipe', 'runs', runId)
    // The same rewrite that passes without a key: the owner changed, the timeline and record re-sealed.
    const record = await readJson<RunRecord>(path.join(runDir, 'run.json'))
    record.owner = {...record.owner, user: 'mallory'}
    const {runStateHash} = await import('../../src/store/trail/integrity.js')
    const lines = await readLines(path.join(runDir, 'events.jsonl'))
    lines[2] = {...lines[2]!, run_state: runStateHash(record as unknown as Record<string, unknown>)}
    const chained = rechain(lines, 2)
    await writeLines(path.join(runDir, 'events.jsonl'), chained)
    record.head = {...record.head!, event_hash: chained[2]!.hash}
    await writeJson(path.join(runDir, 'run.json'), sealRecord(record))
    // And the last snapshot, re-sealed.
    const lastFile = path.join(runDir, 'snapshots', '000011.json')
    const last = await readJson<Snapshot>(lastFile)
    last.decisions[0]!.reason = 'rewritten'
    await writeJson(lastFile, sealSnapshot(last))
    const {code, report} = await verify(dir, {PIPE_AUDIT_KEY: key})
    expect(code).to.equal(4)
    const lines2 = report.problems.map((p) => `${path.basename(p.file)}  ${p.field}: ${p.message}`)
    expect(lines2).to.include.members([
      'run.json  seal: sealed without the audit key (re-sealed by someone without the key, or written before keyed mode)',
      'events.jsonl  line 3: sealed without the audit key (re-sealed by someone without the key, or written before keyed mode)',
      '000011.json  meta.record_hash: sealed without the audit key (re-sealed by someone without the key, or written before keyed mode)',
    ])
  })
})
