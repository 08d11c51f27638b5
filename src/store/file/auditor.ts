/**
 * The auditor: what pipe audit verify found so far, and the checks of the records a run refers to
 * (spec versions, evidence, features) and of those no run refers to. The run's own records are
 * checked in audit-run.ts, the ledger and the reply cache in audit-trails.ts.
 */
import {renameSync, rmSync, statSync, unlinkSync} from 'node:fs'
import path from 'node:path'
import type {Evidence} from '../../types/evidence.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {processAlive} from '../../util/lock.js'
import {listDir, parseBytes, parseFile, readBytes, schemaFindings} from './audit-read.js'
import {ORPHAN_FEATURE} from '../trail/audit-notes.js'
import type {FileLayout} from './files.js'
import {ID_PATTERNS} from './ids.js'
import {auditKey, checkRecord, fileHash, sealMessage, verifyEvidence, verifySpec, type IntegrityProblem, type SealCheck} from '../trail/integrity.js'
import {isObject, notAnObject} from '../trail/shapes.js'
import {stagedRun, tempWriter} from './trail.js'
import type {AuditFinding, AuditReport} from '../types.js'

/** What the audit reads of a file store: its layout and its runs. */
export type AuditedStore = FileLayout & {listRunIds(): Promise<string[]>}

export class Auditor {
  /** Spec versions and evidence already checked, with the sha256 of their file (null: unreadable). */
  readonly files = new Map<string, string | null>()
  private readonly fullyChecked = new Set<string>()
  /** '' when no key is set, so that the seal functions do not look the environment up again per record. */
  readonly key = auditKey() ?? ''
  readonly report: AuditReport = {
    ok: true,
    keyed: false,
    runs: 0,
    snapshots: 0,
    specs: 0,
    evidence: 0,
    events: 0,
    features: 0,
    ledger: 0,
    unverifiable: 0,
    problems: [],
    notes: [],
    cleaned: [],
    head: null,
  }
  /** run id -> the run's seal, for the head digest. */
  readonly runSeals = new Map<string, string | null>()
  /** run id -> when the run record says it was created, for time running backwards in the run index. */
  readonly runCreated = new Map<string, unknown>()

  constructor(readonly store: AuditedStore) {
    this.report.keyed = this.key !== ''
  }

  problem(finding: AuditFinding): void {
    this.report.problems.push(finding)
    this.report.ok = false
  }

  /** Reports a failed seal check; a keyed seal without the key is counted, not reported one by one. */
  seal(result: SealCheck, record: string, file: string, field: string): void {
    if (result === 'ok') return
    if (result === 'no-key') {
      this.report.unverifiable++
      return
    }
    this.problem({record, file, field, message: sealMessage(result)})
  }

  integrity(problems: IntegrityProblem[], record: string, file: string): void {
    for (const p of problems) {
      if (p.check === 'no-key') this.report.unverifiable++
      else this.problem({record, file, field: p.field, message: p.message})
    }
  }

  /** Removes a temp file whose writer is gone; one being written right now is left alone. */
  tidyTemp(dir: string, name: string): boolean {
    const pid = tempWriter(name)
    if (pid === null) return false
    if (pid !== process.pid && !processAlive(pid)) {
      const file = path.join(dir, name)
      try {
        unlinkSync(file)
        this.report.cleaned.push({record: name, file, field: '(file)', message: `removed a temporary file left by process ${pid}, which is gone`})
      } catch {
        // Gone already.
      }
    }
    return true
  }

  tidyDir(dir: string): void {
    for (const name of listDir(dir)) this.tidyTemp(dir, name)
  }

  /**
   * A run folder a crash left half-made: before it was indexed it is removed; after, it is complete
   * and is renamed into place. A folder whose creator is alive is left alone.
   */
  tidyStagedRuns(indexed: Set<string>): void {
    for (const name of listDir(this.store.runsDir)) {
      if (this.tidyTemp(this.store.runsDir, name)) continue
      const staged = stagedRun(name)
      if (!staged || processAlive(staged.pid)) continue
      const from = path.join(this.store.runsDir, name)
      const to = path.join(this.store.runsDir, staged.runId)
      const exists = (() => {
        try {
          statSync(to)
          return true
        } catch {
          return false
        }
      })()
      try {
        if (indexed.has(staged.runId) && !exists) {
          renameSync(from, to)
          this.report.cleaned.push({
            record: staged.runId,
            file: to,
            field: '(file)',
            message: `finished creating the run (process ${staged.pid} was killed after indexing it)`,
          })
        } else {
          rmSync(from, {recursive: true})
          this.report.cleaned.push({
            record: staged.runId,
            file: from,
            field: '(file)',
            message: `removed a run creation that process ${staged.pid} abandoned (it never became a run)`,
          })
        }
      } catch {
        // Another audit verify tidied it first.
      }
    }
  }

  /** The sha256 of a spec or evidence file, read once. */
  fileOf(id: string, file: string): string | null {
    if (!this.files.has(id)) {
      const bytes = readBytes(file)
      this.files.set(id, typeof bytes === 'string' ? null : fileHash(bytes))
    }
    return this.files.get(id)!
  }

  /** Checks a spec version fully: parse, content hash, schema, name. */
  spec(version: string, referencedBy: string): CanonicalSpec | null {
    if (this.fullyChecked.has(version)) return null
    this.fullyChecked.add(version)
    const file = this.store.specFile(version)
    const parsed = parseFile<CanonicalSpec>(file)
    if (!parsed.ok) {
      this.problem({record: version, file, field: '(file)', message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`})
      return null
    }
    if (!isObject(parsed.value)) {
      this.problem({record: version, file, field: '(record)', message: notAnObject(parsed.value)})
      return null
    }
    this.integrity(verifySpec(parsed.value), version, file)
    const malformed = schemaFindings('spec', parsed.value, version, file)
    for (const f of malformed) this.problem(f)
    if (parsed.value.meta?.spec_version !== version)
      this.problem({record: version, file, field: 'meta.spec_version', message: `names ${String(parsed.value.meta?.spec_version)}, not the file's version`})
    // A malformed version is reported; nothing further is read from it.
    return malformed.length === 0 ? parsed.value : null
  }

  evidence(id: string, referencedBy: string): void {
    if (this.fullyChecked.has(id)) return
    this.fullyChecked.add(id)
    const file = this.store.evidenceFile(id)
    const parsed = parseFile<Evidence>(file)
    if (!parsed.ok) {
      this.problem({record: id, file, field: '(file)', message: `${parsed.message}${referencedBy ? ` (referenced by ${referencedBy})` : ''}`})
      return
    }
    if (!isObject(parsed.value)) {
      this.problem({record: id, file, field: '(record)', message: notAnObject(parsed.value)})
      return
    }
    this.integrity(verifyEvidence(parsed.value), id, file)
    for (const f of schemaFindings('evidence', parsed.value, id, file)) this.problem(f)
    if (parsed.value.evidence_id !== id)
      this.problem({record: id, file, field: 'evidence_id', message: `names ${String(parsed.value.evidence_id)}, not the file's id`})
  }

  /**
   * A spec version or evidence record a snapshot names: when its file is byte for byte the one the
   * snapshot bound, it is exactly what pipe wrote (and checked) and needs no further work.
   */
  bound(id: string, kind: 'spec' | 'evidence', snapshot: Snapshot, record: string, snapshotFile: string): void {
    const file = kind === 'spec' ? this.store.specFile(id) : this.store.evidenceFile(id)
    const first = !this.files.has(id)
    const actual = this.fileOf(id, file)
    if (first && kind === 'spec') this.report.specs++
    else if (first) this.report.evidence++
    const expected = snapshot.meta?.binds?.[id]
    if (actual !== null && expected === actual) return
    // Name the field that changed, if the file says which.
    if (kind === 'spec') this.spec(id, record)
    else this.evidence(id, record)
    if (expected === undefined) this.problem({record, file: snapshotFile, field: 'meta.binds', message: `does not bind ${id}, which the snapshot names`})
    else if (actual !== null)
      this.problem({record: id, file, field: '(file)', message: `is not the file snapshot ${record} bound (changed or re-sealed after the fact)`})
  }

  /** Records no snapshot refers to: left by a step whose commit was never finished. */
  unreferenced(): void {
    for (const name of listDir(this.store.specsDir)) {
      if (this.tidyTemp(this.store.specsDir, name)) continue
      const version = name.endsWith('.json') ? name.slice(0, -5) : ''
      if (!ID_PATTERNS.spec.test(version) || this.files.has(version)) continue
      this.report.specs++
      const spec = this.spec(version, '')
      if (spec)
        this.report.notes.push({
          record: version,
          file: this.store.specFile(version),
          field: '(file)',
          message: `no snapshot refers to it (written by ${spec.meta.run_id} step ${spec.meta.created_by_step}, whose commit did not finish)`,
        })
    }
    for (const name of listDir(this.store.evidenceDir)) {
      if (this.tidyTemp(this.store.evidenceDir, name)) continue
      const id = name.endsWith('.json') ? name.slice(0, -5) : ''
      if (!ID_PATTERNS.evidence.test(id) || this.files.has(id)) continue
      this.report.evidence++
      this.evidence(id, '')
      this.report.notes.push({record: id, file: this.store.evidenceFile(id), field: '(file)', message: 'no snapshot refers to it'})
    }
  }

  /** Feature records: sealed, present for every run that names one, and as the run index bound them. */
  features(referenced: Map<string, string[]>, bound: Map<string, string>): Map<string, string | null> {
    const seals = new Map<string, string | null>()
    const present = new Set<string>()
    for (const name of listDir(this.store.featuresDir)) {
      if (this.tidyTemp(this.store.featuresDir, name)) continue
      const id = name.endsWith('.json') ? name.slice(0, -5) : ''
      if (!ID_PATTERNS.feature.test(id)) continue
      present.add(id)
      this.report.features++
      const file = this.store.featureFile(id)
      const bytes = readBytes(file)
      const parsed = parseBytes<{feature_id?: string; seal?: string}>(bytes)
      if (!parsed.ok || !isObject(parsed.value)) {
        this.problem({record: id, file, field: parsed.ok ? '(record)' : '(file)', message: parsed.ok ? notAnObject(parsed.value) : parsed.message})
        continue
      }
      seals.set(id, parsed.value.seal ?? null)
      if (parsed.value.seal === undefined) this.problem({record: id, file, field: 'seal', message: 'the feature record is not sealed'})
      else this.seal(checkRecord(parsed.value, this.key), id, file, 'seal')
      if (parsed.value.feature_id !== id)
        this.problem({record: id, file, field: 'feature_id', message: `names ${String(parsed.value.feature_id)}, not the file's feature`})
      const expected = bound.get(id)
      if (expected && expected !== fileHash(parsed.bytes))
        this.problem({record: id, file, field: '(file)', message: 'is not the feature record the run index bound (changed or re-sealed after the fact)'})
    }
    // A feature is recorded just before the run that names it: one no run names is a creation that was interrupted between the two.
    for (const id of present)
      if (!referenced.has(id)) this.report.notes.push({record: id, file: this.store.featureFile(id), field: '(file)', message: ORPHAN_FEATURE})
    for (const [id, runs] of referenced) {
      if (!present.has(id))
        this.problem({record: id, file: this.store.featureFile(id), field: '(file)', message: `feature record is missing (named by ${runs.join(', ')})`})
    }
    return seals
  }
}
