/**
 * pipe audit verify: recompute every hash and link of the stored trail and name each record that
 * was changed after the fact, with its file and field.
 */
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {check} from '../schema/registry.js'
import type {Evidence} from '../types/evidence.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import {verifyEvidence, verifySnapshot, verifySpec, type IntegrityProblem} from './integrity.js'
import type {Store} from './store.js'

export interface AuditFinding {
  record: string
  file: string
  field: string
  message: string
}

export interface AuditReport {
  ok: boolean
  runs: number
  snapshots: number
  specs: number
  evidence: number
  problems: AuditFinding[]
  /** Not damage, but worth knowing: an unfinished commit, records an interrupted step left unused. */
  notes: AuditFinding[]
}

type Parsed<T> = {ok: true; value: T} | {ok: false; message: string}

async function parseFile<T>(file: string): Promise<Parsed<T>> {
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch (error) {
    return {ok: false, message: (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file is missing' : `cannot read (${String(error)})`}
  }
  try {
    return {ok: true, value: JSON.parse(text) as T}
  } catch (error) {
    return {ok: false, message: `not valid JSON (${(error as Error).message})`}
  }
}

function schemaFindings(schema: 'run' | 'snapshot' | 'spec' | 'evidence', value: unknown, record: string, file: string): AuditFinding[] {
  const result = check(schema, value)
  return result.errors.map((e) => ({record, file, field: e.instancePath.slice(1).replace(/\//g, '.') || '(record)', message: `does not match the ${schema} schema: ${e.message ?? e.keyword}`}))
}

function integrityFindings(problems: IntegrityProblem[], record: string, file: string): AuditFinding[] {
  return problems.map((p) => ({record, file, field: p.field, message: p.message}))
}

export class Auditor {
  private readonly specsSeen = new Map<string, boolean>()
  private readonly evidenceSeen = new Map<string, boolean>()
  readonly report: AuditReport = {ok: true, runs: 0, snapshots: 0, specs: 0, evidence: 0, problems: [], notes: []}

  constructor(private readonly store: Store) {}

  private problem(finding: AuditFinding): void {
    this.report.problems.push(finding)
    this.report.ok = false
  }

  async spec(version: string, referencedBy: string): Promise<CanonicalSpec | null> {
    if (this.specsSeen.has(version)) return null
    this.specsSeen.set(version, true)
    this.report.specs++
    const file = this.store.specFile(version)
    const parsed = await parseFile<CanonicalSpec>(file)
    if (!parsed.ok) {
      this.problem({record: version, file, field: '(file)', message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`})
      return null
    }
    for (const f of integrityFindings(verifySpec(parsed.value), version, file)) this.problem(f)
    for (const f of schemaFindings('spec', parsed.value, version, file)) this.problem(f)
    if (parsed.value.meta?.spec_version !== version) this.problem({record: version, file, field: 'meta.spec_version', message: `names ${String(parsed.value.meta?.spec_version)}, not the file's version`})
    return parsed.value
  }

  async evidence(id: string, referencedBy: string): Promise<void> {
    if (this.evidenceSeen.has(id)) return
    this.evidenceSeen.set(id, true)
    this.report.evidence++
    const file = this.store.evidenceFile(id)
    const parsed = await parseFile<Evidence>(file)
    if (!parsed.ok) {
      this.problem({record: id, file, field: '(file)', message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`})
      return
    }
    for (const f of integrityFindings(verifyEvidence(parsed.value), id, file)) this.problem(f)
    for (const f of schemaFindings('evidence', parsed.value, id, file)) this.problem(f)
    if (parsed.value.evidence_id !== id) this.problem({record: id, file, field: 'evidence_id', message: `names ${parsed.value.evidence_id}, not the file's id`})
  }

  async run(runId: string): Promise<Snapshot[]> {
    this.report.runs++
    const dir = this.store.runDir(runId)
    const runFile = path.join(dir, 'run.json')
    const run = await parseFile<RunRecord>(runFile)
    if (!run.ok) this.problem({record: runId, file: runFile, field: '(file)', message: run.message})
    else for (const f of schemaFindings('run', run.value, runId, runFile)) this.problem(f)

    const eventsFile = path.join(dir, 'events.jsonl')
    const lines = (await readFile(eventsFile, 'utf8').catch(() => '')).split('\n')
    lines.forEach((line, i) => {
      if (!line.trim()) return
      try {
        JSON.parse(line)
      } catch {
        const last = lines.slice(i + 1).every((l) => !l.trim())
        const finding = {record: runId, file: eventsFile, field: `line ${i + 1}`, message: last ? 'torn last line (a crash while appending); earlier lines are intact' : 'not valid JSON'}
        if (last) this.report.notes.push(finding)
        else this.problem(finding)
      }
    })
    if (await this.store.readJournal(runId).catch(() => null)) {
      this.report.notes.push({record: runId, file: this.store.journalFile(runId), field: '(file)', message: 'a step commit was interrupted; pipe resume finishes it'})
    }

    const snapshotDir = path.join(dir, 'snapshots')
    const names = (await readdir(snapshotDir).catch(() => [] as string[])).filter((n) => !n.startsWith('.')).sort()
    const snapshots: Snapshot[] = []
    let expectedPrev: string | null | undefined
    if (run.ok && run.value.replay_of) {
      const origin = await parseFile<Snapshot>(this.store.snapshotFile(run.value.replay_of.run_id, run.value.replay_of.seq - 1)).catch(() => null)
      expectedPrev = run.value.replay_of.seq > 1 && origin?.ok ? origin.value.meta.record_hash : null
    } else expectedPrev = null
    let expectedSeq = 1
    for (const name of names) {
      const file = path.join(snapshotDir, name)
      const seq = /^(\d{6,})\.json$/.exec(name)?.[1]
      if (!seq) {
        this.problem({record: `${runId}/${name}`, file, field: '(file)', message: 'not a snapshot file name'})
        continue
      }
      const record = `${runId}#${Number(seq)}`
      while (expectedSeq < Number(seq)) {
        this.problem({record: `${runId}#${expectedSeq}`, file: this.store.snapshotFile(runId, expectedSeq), field: '(file)', message: 'snapshot is missing (a gap in seq)'})
        expectedSeq++
        expectedPrev = undefined
      }
      expectedSeq = Number(seq) + 1
      this.report.snapshots++
      const parsed = await parseFile<Snapshot>(file)
      if (!parsed.ok) {
        this.problem({record, file, field: '(file)', message: parsed.message})
        expectedPrev = undefined
        continue
      }
      const s = parsed.value
      snapshots.push(s)
      for (const f of integrityFindings(verifySnapshot(s), record, file)) this.problem(f)
      for (const f of schemaFindings('snapshot', s, record, file)) this.problem(f)
      if (s.run_id !== runId) this.problem({record, file, field: 'run_id', message: `names run ${s.run_id}`})
      if (s.step?.seq !== Number(seq)) this.problem({record, file, field: 'step.seq', message: `is ${s.step?.seq}, but the file is seq ${Number(seq)}`})
      if (expectedPrev !== undefined && s.meta?.prev_hash !== expectedPrev) {
        this.problem({record, file, field: 'meta.prev_hash', message: 'does not match the record hash of the snapshot before it (the chain is broken)'})
      }
      expectedPrev = s.meta?.record_hash
      for (const version of [s.spec_version_in, s.spec_version_out]) if (version) await this.spec(version, record)
      for (const link of s.evidence_links ?? []) await this.evidence(link.evidence_id, record)
    }
    return snapshots
  }

  /** Records no snapshot refers to: left by a step whose commit was never finished. */
  async unreferenced(referencedSpecs: Set<string>, referencedEvidence: Set<string>): Promise<void> {
    for (const version of await this.store.listSpecVersions()) {
      if (referencedSpecs.has(version)) continue
      const spec = await this.spec(version, '')
      if (spec) this.report.notes.push({record: version, file: this.store.specFile(version), field: '(file)', message: `no snapshot refers to it (written by ${spec.meta.run_id} step ${spec.meta.created_by_step}, whose commit did not finish)`})
    }
    for (const id of await this.store.listEvidenceIds()) {
      if (referencedEvidence.has(id)) continue
      await this.evidence(id, '')
      this.report.notes.push({record: id, file: this.store.evidenceFile(id), field: '(file)', message: 'no snapshot refers to it'})
    }
  }
}

export async function auditStore(store: Store, runId?: string): Promise<AuditReport> {
  const auditor = new Auditor(store)
  const ids = runId ? [runId] : await store.listRunIds()
  const specs = new Set<string>()
  const evidence = new Set<string>()
  for (const id of ids) {
    for (const s of await auditor.run(id)) {
      for (const v of [s.spec_version_in, s.spec_version_out]) if (v) specs.add(v)
      for (const l of s.evidence_links ?? []) evidence.add(l.evidence_id)
    }
  }
  if (!runId) await auditor.unreferenced(specs, evidence)
  return auditor.report
}
