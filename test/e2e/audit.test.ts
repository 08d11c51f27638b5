/**
 * pipe audit verify on the built CLI: every change to every record kind of a default run's store,
 * re-sealed or not, is caught and named by file, field and record. Keyed mode (PIPE_AUDIT_KEY) is
 * audit-keyed.test.ts's.
 */
import {expect} from 'chai'
import {cp, readdir, readFile, rename, rm, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {sealEvidence, sealLine, sealRecord, sealSnapshot, sealSpec} from '../../src/store/trail/integrity.js'
import type {Evidence} from '../../src/types/evidence.js'
import type {LedgerEntry} from '../../src/types/ledger.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'
import {json, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {fullRun, readJson, readLines, rechain, verify, writeJson, writeLines, type Report} from '../helpers/audit-fixtures.js'

// The tamperer re-seals with pipe's own functions, as anyone with the source could: without a key.
delete process.env.PIPE_AUDIT_KEY

interface Store {
  root: string
  run: string
  other: string
  runDir: string
  spec: string
  evidence: string
  feature: string
  ledgerEntry: string
}

/** `pipe audit verify [RUN] --json` in this process (audit-fixtures' verify is its process): the exit code, and the report it prints. */
async function verifyHere(cwd: string, run?: string): Promise<{code: number | null; report: Report; stdout: string}> {
  const result = await pipeHere(['audit', 'verify', ...(run ? [run] : []), '--json'], {cwd, env: {PIPE_AUDIT_KEY: undefined}})
  return {code: result.code, report: json<Report>(result), stdout: result.stdout + result.stderr}
}

describe('audit verify: every change to every record kind, re-sealed or not', function () {
  this.timeout(300000)
  let base: string
  let cleanup: () => Promise<void>
  let names: Omit<Store, 'root' | 'runDir'>

  before(async () => {
    ;({dir: base, cleanup} = await tempDir('pipe-audit-base-'))
    // The runs that make the store, in this process; the clean store's verify below is a process.
    const first = await pipeHere(fullRun, {cwd: base, env: {PIPE_AUDIT_KEY: undefined}})
    expect(first.code, first.stderr).to.equal(0)
    await writeFile(path.join(base, 'two.yaml'), 'version: 1\nname: two\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop}\n')
    const second = await pipeHere(['run', 'two.yaml', '--json'], {cwd: base, env: {PIPE_AUDIT_KEY: undefined}})
    expect(second.code, second.stderr).to.equal(0)
    const run = json<{run_id: string; spec_version: string; feature_id: string}>(first)
    const snapshots = path.join(base, '.pipe', 'runs', run.run_id, 'snapshots')
    const firstSnapshot = await readJson<Snapshot>(path.join(snapshots, '000001.json'))
    const ledger = (await readdir(path.join(base, '.pipe', 'ledger'))).filter((n) => n.endsWith('.json'))
    expect(ledger).to.have.length(1)
    names = {
      run: run.run_id,
      other: json<{run_id: string}>(second).run_id,
      spec: run.spec_version,
      evidence: firstSnapshot.evidence_links[0]!.evidence_id,
      feature: run.feature_id,
      ledgerEntry: ledger[0]!,
    }
    const clean = await verify(base)
    expect(clean.code, clean.stdout).to.equal(0)
    expect(clean.report.head).to.match(/^sha256:[0-9a-f]{64}$/)
  })
  after(async () => cleanup())

  let work: string
  let cleanWork: () => Promise<void>
  let s: Store
  beforeEach(async () => {
    ;({dir: work, cleanup: cleanWork} = await tempDir('pipe-audit-case-'))
    await cp(path.join(base, '.pipe'), path.join(work, '.pipe'), {recursive: true})
    const root = path.join(work, '.pipe')
    s = {...names, root, runDir: path.join(root, 'runs', names.run)}
  })
  afterEach(async () => cleanWork())

  const runJson = (): string => path.join(s.runDir, 'run.json')
  const events = (): string => path.join(s.runDir, 'events.jsonl')
  const snapshot = (seq: number): string => path.join(s.runDir, 'snapshots', `${String(seq).padStart(6, '0')}.json`)
  const specFile = (): string => path.join(s.root, 'specs', `${s.spec}.json`)
  const evidenceFile = (): string => path.join(s.root, 'evidence', `${s.evidence}.json`)
  const featureFile = (): string => path.join(s.root, 'features', `${s.feature}.json`)
  const ledgerFile = (): string => path.join(s.root, 'ledger', s.ledgerEntry)

  /**
   * The first tampering caught by `pipe audit verify --json`, and the first by `pipe audit verify RUN
   * --json`, is checked by a process (its exit code and the report it prints); the others by the same
   * command in this process (test/helpers/pipe-here.ts: from argv, its output and exit code). What
   * tells one tampering from another is the audit; a process for each was this file's ~50 processes.
   */
  const byProcess = new Set<string>()

  /** Verify must fail (exit 4) with a problem whose `file  field  record: message` line matches each pattern. */
  async function caught(...patterns: RegExp[]): Promise<void> {
    await caughtBy(undefined, ...patterns)
  }

  /** As caught, by `pipe audit verify RUN` (the whole store without RUN). */
  async function caughtBy(run: string | undefined, ...patterns: RegExp[]): Promise<void> {
    const asProcess = !byProcess.has(run === undefined ? 'store' : 'run')
    byProcess.add(run === undefined ? 'store' : 'run')
    const {code, report, stdout} = asProcess ? await verify(work, {}, run) : await verifyHere(work, run)
    expect(code, stdout).to.equal(4)
    expect(report.ok).to.equal(false)
    const lines = report.problems.map((p) => `${path.relative(s.root, p.file)}  ${p.field}  ${p.record}: ${p.message}`)
    for (const pattern of patterns)
      expect(
        lines.some((l) => pattern.test(l)),
        `${pattern} in:\n${lines.join('\n')}`,
      ).to.equal(true)
  }

  async function editRun(change: (r: RunRecord) => void, reseal: boolean): Promise<void> {
    const record = await readJson<RunRecord>(runJson())
    change(record)
    await writeJson(runJson(), reseal ? sealRecord(record) : record)
  }

  describe('the run record (run.json)', () => {
    it('an edited status', async () => {
      await editRun((r) => (r.status = 'failed'), false)
      await caught(/run\.json {2}seal {2}R-\S+: the seal does not match/)
    })
    it('an edited status, re-sealed', async () => {
      await editRun((r) => (r.status = 'failed'), true)
      await caught(/run\.json {2}\(state\) {2}R-\S+: the run record is not the state its timeline line \d+ recorded/)
    })
    it('an edited owner, re-sealed', async () => {
      await editRun((r) => (r.owner = {...r.owner, user: 'mallory'}), true)
      await caught(/run\.json {2}\(state\)/)
    })
    it('an edited review decision, re-sealed', async () => {
      await editRun((r) => (r.review = {...r.review!, decision: 'hold'}), true)
      await caught(/run\.json {2}\(state\)/)
    })
    it('an edited input, re-sealed together with the timeline line that binds the state', async () => {
      await editRun((r) => (r.input = {...r.input, text: 'something else'}), false)
      const record = await readJson<RunRecord>(runJson())
      const {runStateHash} = await import('../../src/store/trail/integrity.js')
      const lines = await readLines(events())
      // The last line binds the record's state (each step's start is a line too).
      const last = lines.length - 1
      lines[last] = {...lines[last]!, run_state: runStateHash(record as unknown as Record<string, unknown>)}
      const chained = rechain(lines, last)
      await writeLines(events(), chained)
      record.head = {...record.head!, event_hash: chained[last]!.hash}
      await writeJson(runJson(), sealRecord(record))
      await caught(/run\.json {2}\(created\) {2}R-\S+: what the run was created with .* differs from the run index/)
    })
    it('a deleted run record', async () => {
      await rm(runJson())
      await caught(/run\.json {2}\(file\) {2}R-\S+: file is missing/)
    })
  })

  describe('the timeline (events.jsonl)', () => {
    it('an edited line', async () => {
      const lines = await readLines(events())
      lines[1]!.reason = 'nothing to see'
      await writeLines(events(), lines)
      await caught(/events\.jsonl {2}line 2 {2}R-\S+: the seal does not match/)
    })
    it('an edited line, re-sealed', async () => {
      const lines = await readLines(events())
      lines[1] = sealLine({...lines[1]!, by: 'mallory'}, lines[1]!.prev)
      await writeLines(events(), lines)
      await caught(/events\.jsonl {2}line 3 {2}R-\S+: does not link to the line before it/)
    })
    it('reordered lines', async () => {
      const lines = await readLines(events())
      await writeLines(events(), [lines[1], lines[0], lines[2]])
      await caught(/events\.jsonl {2}line 1 {2}R-\S+: does not link/, /events\.jsonl {2}line 3 {2}R-\S+: does not link/)
    })
    it('reordered lines, re-chained', async () => {
      const lines = await readLines(events())
      await writeLines(events(), rechain([lines[1]!, lines[0]!, ...lines.slice(2)]))
      await caught(new RegExp(`events\\.jsonl {2}line ${lines.length} {2}R-\\S+: is not the line the run record's head names`))
    })
    it('a deleted line', async () => {
      const lines = await readLines(events())
      await writeLines(events(), [lines[0], lines[2]])
      await caught(/events\.jsonl {2}line 2 {2}R-\S+: does not link/)
    })
    it('a deleted last line', async () => {
      const lines = await readLines(events())
      await writeLines(events(), lines.slice(0, -1))
      const n = lines.length
      await caught(new RegExp(`events\\.jsonl {2}line ${n} {2}R-\\S+: the timeline has ${n - 1} line\\(s\\), the run record's head names ${n}`))
    })
    it('the last line rewritten and re-sealed', async () => {
      const lines = await readLines(events())
      const last = lines.length - 1
      lines[last] = sealLine({...lines[last]!, reason: 'all fine'}, lines[last]!.prev)
      await writeLines(events(), lines)
      await caught(new RegExp(`events\\.jsonl {2}line ${lines.length} {2}R-\\S+: is not the line the run record's head names`))
    })
    it('a deleted timeline', async () => {
      await rm(events())
      await caught(/events\.jsonl {2}line 1 {2}R-\S+: the timeline has 0 line\(s\)/)
    })
  })

  describe('snapshots', () => {
    it('an edited snapshot', async () => {
      const text = await readFile(snapshot(3), 'utf8')
      await writeFile(snapshot(3), text.replace('"decision": "fail"', '"decision": "pass"'))
      await caught(/000003\.json {2}decisions {2}R-\S+#3: field changed/)
    })
    it('the last snapshot, edited and re-sealed', async () => {
      const last = await readJson<Snapshot>(snapshot(11))
      last.decisions[0]!.reason = 'rewritten after the fact'
      await writeJson(snapshot(11), sealSnapshot(last))
      await caught(/000011\.json {2}meta\.record_hash {2}R-\S+#11: is not the snapshot the run record's head names/)
    })
    it('the last snapshot deleted', async () => {
      await rm(snapshot(11))
      await caught(/000011\.json {2}\(file\) {2}R-\S+#11: the run record's head names snapshot #11, but the last is #10/)
    })
    it('the last two snapshots deleted', async () => {
      await rm(snapshot(11))
      await rm(snapshot(10))
      await caught(/the run record's head names snapshot #11, but the last is #9/)
    })
    it('the snapshots folder deleted', async () => {
      await rm(path.join(s.runDir, 'snapshots'), {recursive: true})
      await caught(/snapshots {2}\(folder\) {2}R-\S+: the snapshots folder is missing/, /head names snapshot #11, but there are none/)
    })
    it('two snapshots swapped', async () => {
      await rename(snapshot(4), `${snapshot(4)}.x`)
      await rename(snapshot(5), snapshot(4))
      await rename(`${snapshot(4)}.x`, snapshot(5))
      await caught(/000004\.json {2}step\.seq {2}R-\S+#4: is 5, but the file is seq 4/, /000004\.json {2}meta\.prev_hash/)
    })
    it('a snapshot added after the run ended, chained and sealed', async () => {
      const last = await readJson<Snapshot>(snapshot(11))
      const extra = sealSnapshot({...last, step: {...last.step, seq: 12}, meta: {...last.meta, prev_hash: last.meta.record_hash!}})
      await writeJson(snapshot(12), extra)
      await caught(/000012\.json {2}\(file\) {2}R-\S+#12: was written after the run record was sealed, yet the run is succeeded/)
    })
    it('the whole run folder deleted', async () => {
      await rm(s.runDir, {recursive: true})
      await caught(/runs\/R-\S+ {2}\(folder\) {2}R-\S+: the run is missing \(the run index names it/)
    })
  })

  describe('spec versions and evidence', () => {
    it('an edited spec version', async () => {
      await writeFile(specFile(), (await readFile(specFile(), 'utf8')).replace('monthly sales', 'monthly Sales'))
      await caught(/specs\/S-\S+\.json {2}goal {2}S-\S+: field changed/)
    })
    it('an edited spec version, re-sealed', async () => {
      const spec = await readJson<CanonicalSpec>(specFile())
      spec.goal = 'something else entirely'
      await writeJson(specFile(), sealSpec(spec))
      await caught(/specs\/S-\S+\.json {2}\(file\) {2}S-\S+: is not the file snapshot R-\S+#\d+ bound/)
    })
    it('a deleted spec version', async () => {
      await rm(specFile())
      await caught(/specs\/S-\S+\.json {2}\(file\) {2}S-\S+: file is missing \(referenced by R-\S+#\d+\)/)
    })
    it('an edited evidence record', async () => {
      const evidence = await readJson<Evidence>(evidenceFile())
      evidence.created_at = '2020-01-01T00:00:00.000Z'
      await writeJson(evidenceFile(), evidence)
      await caught(/evidence\/E-\d+\.json {2}created_at {2}E-\d+: field changed/)
    })
    it('an edited evidence record, re-sealed', async () => {
      const evidence = await readJson<Evidence>(evidenceFile())
      evidence.created_at = '2020-01-01T00:00:00.000Z'
      await writeJson(evidenceFile(), sealEvidence(evidence))
      await caught(/evidence\/E-\d+\.json {2}\(file\) {2}E-\d+: is not the file snapshot R-\S+#1 bound/)
    })
    it('a deleted evidence record', async () => {
      await rm(evidenceFile())
      await caught(/evidence\/E-\d+\.json {2}\(file\) {2}E-\d+: file is missing/)
    })
  })

  describe('features', () => {
    it('an edited feature', async () => {
      const feature = await readJson<Record<string, unknown>>(featureFile())
      await writeJson(featureFile(), {...feature, title: 'renamed'})
      await caught(/features\/F-\S+\.json {2}seal {2}F-\S+: the seal does not match/)
    })
    it('an edited feature, re-sealed', async () => {
      const feature = await readJson<Record<string, unknown>>(featureFile())
      await writeJson(featureFile(), sealRecord({...feature, title: 'renamed'}))
      await caught(/features\/F-\S+\.json {2}\(file\) {2}F-\S+: is not the feature record the run index bound/)
    })
    it('a deleted feature', async () => {
      await rm(featureFile())
      await caught(/features\/F-\S+\.json {2}\(file\) {2}F-\S+: feature record is missing \(named by R-/)
    })
  })

  describe('the ledger', () => {
    it('an edited entry', async () => {
      const entry = await readJson<LedgerEntry>(ledgerFile())
      await writeJson(ledgerFile(), {...entry, status: 'failed'})
      await caught(/ledger\/\S+\.json {2}seal {2}F-\S+: the seal does not match/)
    })
    it('an edited entry, re-sealed', async () => {
      const entry = await readJson<LedgerEntry>(ledgerFile())
      await writeJson(ledgerFile(), sealRecord({...entry, external_id: 'elsewhere'}))
      await caught(/ledger\/\S+\.json {2}seal {2}F-\S+: is not an entry the ledger log recorded/)
    })
    it('a deleted entry', async () => {
      await rm(ledgerFile())
      await caught(/ledger\/\S+\.json {2}\(file\) {2}F-\S+: ledger entry is missing \(the ledger log recorded \d+ writes of it\)/)
    })
    it("pipe audit verify RUN: the run's own entry deleted, or re-sealed, fails the run's check (and not another run's)", async () => {
      const entry = await readJson<LedgerEntry>(ledgerFile())
      expect(entry.run_id).to.equal(s.run)
      await writeJson(ledgerFile(), sealRecord({...entry, external_id: 'elsewhere'}))
      await caughtBy(s.run, /ledger\/\S+\.json {2}seal {2}F-\S+: is not an entry the ledger log recorded/)
      await rm(ledgerFile())
      await caughtBy(s.run, /ledger\/\S+\.json {2}\(file\) {2}F-\S+: ledger entry is missing/)
      const other = await verifyHere(work, s.other)
      expect(other.code, other.stdout).to.equal(0)
    })
    it("pipe audit verify RUN: the ledger log line of the run's entry edited", async () => {
      const file = path.join(s.root, 'audit', 'ledger.jsonl')
      const lines = await readLines(file)
      await writeLines(file, [{...lines[0], entries: 7}, ...lines.slice(1)])
      await caughtBy(s.run, /audit\/ledger\.jsonl {2}line 1 {2}F-\S+: the seal does not match/)
    })
    it('reordered ledger log lines', async () => {
      const file = path.join(s.root, 'audit', 'ledger.jsonl')
      const lines = await readLines(file)
      expect(lines.length).to.be.greaterThan(1)
      await writeLines(file, [lines[1], lines[0], ...lines.slice(2)])
      await caught(/audit\/ledger\.jsonl {2}line 1 {2}F-\S+: does not link/)
    })
    it('the last ledger log line deleted, the log re-chained', async () => {
      const file = path.join(s.root, 'audit', 'ledger.jsonl')
      await writeLines(file, rechain((await readLines(file)).slice(0, -1)))
      await caught(/ledger\/\S+\.json {2}seal {2}F-\S+: is not an entry the ledger log recorded/)
    })
  })

  describe('the run index', () => {
    it("a run's index line deleted", async () => {
      const file = path.join(s.root, 'audit', 'runs.jsonl')
      const lines = await readLines(file)
      await writeLines(file, rechain(lines.filter((l) => l.run_id !== s.run)))
      await caught(/runs\/R-\S+ {2}\(index\) {2}R-\S+: the run is not in the run index/)
    })
    it("pipe audit verify RUN: the run's index line edited", async () => {
      const file = path.join(s.root, 'audit', 'runs.jsonl')
      const lines = await readLines(file)
      await writeLines(
        file,
        lines.map((l) => (l.run_id === s.run ? {...l, feature_hash: null} : l)),
      )
      await caughtBy(s.run, /audit\/runs\.jsonl {2}line \d+ {2}R-\S+: the seal does not match/)
    })
    it('reordered index lines', async () => {
      const file = path.join(s.root, 'audit', 'runs.jsonl')
      const lines = await readLines(file)
      await writeLines(file, [...lines].reverse())
      await caught(/audit\/runs\.jsonl {2}line 1 {2}R-\S+: does not link/)
    })
    it('an edited index line', async () => {
      const file = path.join(s.root, 'audit', 'runs.jsonl')
      const lines = await readLines(file)
      lines[0] = {...lines[0]!, feature_id: 'F-2026-999'}
      await writeLines(file, lines)
      await caught(/audit\/runs\.jsonl {2}line 1 {2}R-\S+: the seal does not match/)
    })
  })

  it('a rewrite of everything after an edit passes without a key, but changes the head digest', async () => {
    const before = (await verifyHere(work)).report.head
    await editRun((r) => (r.owner = {...r.owner, user: 'mallory'}), false)
    const record = await readJson<RunRecord>(runJson())
    const {runStateHash} = await import('../../src/store/trail/integrity.js')
    const lines = await readLines(events())
    const last = lines.length - 1
    lines[last] = {...lines[last]!, run_state: runStateHash(record as unknown as Record<string, unknown>)}
    const chained = rechain(lines, last)
    await writeLines(events(), chained)
    record.head = {...record.head!, event_hash: chained[last]!.hash}
    await writeJson(runJson(), sealRecord(record))
    const after = await verifyHere(work)
    expect(after.code, after.stdout).to.equal(0)
    expect(after.report.head).to.not.equal(before)
  })
})
