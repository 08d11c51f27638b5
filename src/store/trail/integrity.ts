/**
 * Sealing records with hashes, and checking them. A record carries the hash of each top-level field
 * and a hash of the whole (which covers the field hashes too), so a check can say which field was
 * changed after the fact, and an edit of the field hashes themselves is caught by the whole-record
 * hash.
 *
 * Seals that anchor the trail (a snapshot's record hash, each timeline line, the run record, the
 * store's indexes, ledger entries, features) are keyed when PIPE_AUDIT_KEY is set: HMAC-SHA256 with
 * that key, written `hmac-sha256:HEX`, so nobody without the key can re-seal an edited record. A
 * seal names its algorithm; the key itself is never written anywhere. Content hashes (spec
 * versions, evidence, field hashes) stay plain SHA-256: they name content, and the keyed snapshot
 * that binds them protects them.
 */
import {createHmac} from 'node:crypto'
import type {Evidence} from '../../types/evidence.js'
import type {Snapshot} from '../../types/snapshot.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {canonicalJson, canonicalMember, canonicalObject, hashJson, sha256} from '../../util/hash.js'

export const AUDIT_KEY_ENV = 'PIPE_AUDIT_KEY'

/** The audit key of this process, if any. Read each time so tests and long-lived callers see changes. */
export function auditKey(): string | undefined {
  return process.env[AUDIT_KEY_ENV] || undefined
}

function sealText(text: string, key: string | undefined): string {
  return key ? `hmac-sha256:${createHmac('sha256', key).update(text).digest('hex')}` : sha256(text)
}

/** The seal of a value: keyed with PIPE_AUDIT_KEY when it is set, plain SHA-256 otherwise. */
export function sealOf(value: unknown, key: string | undefined = auditKey()): string {
  return sealText(canonicalJson(value), key)
}

/**
 * ok; mismatch: the value is not what was sealed; unkeyed: a plain seal where a key is in use
 * (re-sealed by someone without the key, or written before keyed mode); no-key: a keyed seal that
 * cannot be checked without the key.
 */
export type SealCheck = 'ok' | 'mismatch' | 'unkeyed' | 'no-key'

export function checkSeal(stored: unknown, value: unknown, key: string | undefined = auditKey()): SealCheck {
  return checkSealOfText(stored, () => canonicalJson(value), key)
}

/** checkSeal of a value given as its canonical JSON (made only when the seal can be checked). */
function checkSealOfText(stored: unknown, text: () => string, key: string | undefined): SealCheck {
  if (typeof stored !== 'string') return 'mismatch'
  if (stored.startsWith('hmac-sha256:')) {
    if (!key) return 'no-key'
    return stored === sealText(text(), key) ? 'ok' : 'mismatch'
  }
  if (stored !== sealText(text(), undefined)) return 'mismatch'
  return key ? 'unkeyed' : 'ok'
}

export function sealMessage(check: Exclude<SealCheck, 'ok'>): string {
  if (check === 'no-key') return 'sealed with an audit key: set PIPE_AUDIT_KEY to check it'
  if (check === 'unkeyed') return 'sealed without the audit key (re-sealed by someone without the key, or written before keyed mode)'
  return 'the seal does not match (the record was changed after it was sealed)'
}

export interface IntegrityProblem {
  field: string
  message: string
  /** Set when the problem is the seal itself: `no-key` means it could not be checked, not that it was changed. */
  check?: Exclude<SealCheck, 'ok'>
}

type Plain = Record<string, unknown>

function fieldHashesOf(record: Plain, strip: (meta: Plain) => Plain, metaKey: string | null): Record<string, string> {
  const out: Record<string, string> = {}
  for (const key of Object.keys(record).sort()) {
    if (key === 'field_hashes' || key === 'record_hash') continue
    const value = key === metaKey ? strip(record[key] as Plain) : record[key]
    out[key] = hashJson(value)
  }
  return out
}

/** Compares stored field hashes with recomputed ones, naming each field that differs. */
function compareFields(stored: Record<string, string | undefined>, actual: Record<string, string>): IntegrityProblem[] {
  const problems: IntegrityProblem[] = []
  for (const key of new Set([...Object.keys(stored), ...Object.keys(actual)])) {
    if (stored[key] === actual[key]) continue
    problems.push({
      field: key,
      message: stored[key] === undefined ? 'field was added' : actual[key] === undefined ? 'field was removed' : 'field changed (hash mismatch)',
    })
  }
  return problems
}

function withoutKeys(object: Plain, keys: string[]): Plain {
  const copy = {...object}
  for (const key of keys) delete copy[key]
  return copy
}

// Snapshots: meta.field_hashes, meta.record_hash

const stripSnapshotMeta = (meta: Plain): Plain => withoutKeys(meta, ['field_hashes', 'record_hash'])

/**
 * The same seal as fieldHashesOf then sealOf(snapshotBody) would give, with each field put in
 * canonical form once: its text makes its field hash and is reused in the text of the whole (only
 * meta, which then holds the field hashes, is put in canonical form again).
 */
export function sealSnapshot(snapshot: Snapshot): Snapshot {
  // A copy of the top level and of meta, the two objects sealing changes; the fields below them are
  // shared with the caller's snapshot, which the store writes once and nothing changes afterwards
  // (a deep copy here was the largest cost of sealing a step).
  const sealed = {...snapshot}
  const meta = stripSnapshotMeta(sealed.meta) as Snapshot['meta']
  sealed.meta = meta
  const record = sealed as unknown as Plain
  const texts: Record<string, string | undefined> = {}
  const fieldHashes: Record<string, string> = {}
  for (const key of Object.keys(record).sort()) {
    const text = canonicalMember(record[key])
    texts[key] = text
    if (key !== 'field_hashes' && key !== 'record_hash') fieldHashes[key] = sha256(text ?? 'null')
  }
  meta.field_hashes = fieldHashes
  texts['meta'] = canonicalMember(meta)
  meta.record_hash = sealText(canonicalObject(texts), auditKey())
  return sealed
}

function snapshotBody(snapshot: Snapshot): unknown {
  return {...snapshot, meta: withoutKeys(snapshot.meta, ['record_hash'])}
}

/**
 * Checks the record hash first: when it holds, the record is exactly as sealed and the field hashes
 * (which it covers) need no recomputing; they are only worked out to name the field that changed.
 */
export function verifySnapshot(snapshot: Snapshot, key: string | undefined = auditKey()): IntegrityProblem[] {
  const seal = checkSeal(snapshot.meta?.record_hash, snapshotBody(snapshot), key)
  if (seal === 'ok') return []
  if (seal !== 'mismatch') return [{field: 'meta.record_hash', message: sealMessage(seal), check: seal}]
  const problems = compareFields(snapshot.meta?.field_hashes ?? {}, fieldHashesOf(snapshot as unknown as Plain, stripSnapshotMeta, 'meta'))
  if (problems.length === 0) problems.push({field: 'meta.field_hashes', message: 'the record hash does not match (field hashes were edited)'})
  return problems
}

// Spec versions: meta.field_hashes, meta.content_hash

const stripSpecMeta = (meta: Plain): Plain => withoutKeys(meta, ['field_hashes', 'content_hash'])

export function specContentHash(spec: CanonicalSpec): string {
  return hashJson({...spec, meta: withoutKeys(spec.meta, ['content_hash'])})
}

export function sealSpec(spec: CanonicalSpec): CanonicalSpec {
  const sealed = structuredClone(spec)
  const {field_hashes: _f, content_hash: _c, ...meta} = sealed.meta
  sealed.meta = {...meta, content_hash: ''}
  sealed.meta.field_hashes = fieldHashesOf(sealed as unknown as Plain, stripSpecMeta, 'meta')
  sealed.meta.content_hash = specContentHash(sealed)
  return sealed
}

export function verifySpec(spec: CanonicalSpec): IntegrityProblem[] {
  const problems = compareFields(spec.meta?.field_hashes ?? {}, fieldHashesOf(spec as unknown as Plain, stripSpecMeta, 'meta'))
  if (spec.meta?.content_hash !== specContentHash(spec) && problems.length === 0) {
    problems.push({field: 'meta.content_hash', message: 'the content hash does not match'})
  }
  return problems
}

// Evidence: field_hashes, record_hash

const identity = (meta: Plain): Plain => meta

export function evidenceHash(evidence: Evidence): string {
  return hashJson(withoutKeys(evidence as unknown as Plain, ['record_hash']))
}

export function sealEvidence(evidence: Evidence): Evidence {
  const sealed = withoutKeys(structuredClone(evidence) as unknown as Plain, ['record_hash', 'field_hashes']) as unknown as Evidence
  sealed.field_hashes = fieldHashesOf(sealed as unknown as Plain, identity, null)
  sealed.record_hash = evidenceHash(sealed)
  return sealed
}

export function verifyEvidence(evidence: Evidence): IntegrityProblem[] {
  const problems = compareFields(evidence.field_hashes ?? {}, fieldHashesOf(evidence as unknown as Plain, identity, null))
  if (evidence.record_hash !== evidenceHash(evidence) && problems.length === 0)
    problems.push({field: 'field_hashes', message: 'the record hash does not match (field hashes were edited)'})
  return problems
}

// Chained lines (a run's timeline, the store's run index, the ledger log): each line carries the
// hash of the line before it and its own seal, so an edited, removed or reordered line breaks the chain.

export function sealLine<T extends object>(line: T, prev: string | null): T & {prev: string | null; hash: string} {
  const {hash: _h, prev: _p, ...rest} = line as T & {hash?: string; prev?: string | null}
  const body = {...rest, prev}
  return {...body, hash: sealOf(body)} as T & {prev: string | null; hash: string}
}

export function checkLine(line: {hash?: unknown}, key: string | undefined = auditKey()): SealCheck {
  const {hash, ...body} = line
  return checkSeal(hash, body, key)
}

// Records sealed as a whole under a `seal` field: the run record, ledger entries, features.

export function sealRecord<T extends object>(record: T): T & {seal: string} {
  const {seal: _s, ...body} = record as T & {seal?: string}
  return {...body, seal: sealOf(body)} as T & {seal: string}
}

export function checkRecord(record: {seal?: unknown}, key: string | undefined = auditKey()): SealCheck {
  const {seal, ...body} = record
  return checkSeal(seal, body, key)
}

/**
 * runStateHash and sealRecord of one run record, each field of its state put in canonical form
 * once: a change of a run hashes the state for its timeline line, then seals the record with the
 * head that line gives it.
 */
export function runRecordSealer(state: Plain): {stateHash: string; seal: (head: Plain) => string} {
  const texts: Record<string, string | undefined> = {}
  for (const key of Object.keys(state)) if (key !== 'head' && key !== 'seal') texts[key] = canonicalMember(state[key])
  return {
    stateHash: sha256(canonicalObject(texts)),
    seal: (head) => sealText(canonicalObject({...texts, head: canonicalMember(head)}), auditKey()),
  }
}

/** The hash a snapshot binds a spec version or evidence record by: SHA-256 of the file's bytes. */
export function fileHash(bytes: string | Uint8Array): string {
  return sha256(bytes)
}

/** The facts of a run fixed at its creation, as the store's run index binds them (created_hash). */
export function runCreationHash(record: Plain): string {
  return hashJson(creationFacts(record, CREATED))
}

const CREATED = ['run_id', 'feature_id', 'pipeline', 'policy_version', 'policy_path', 'provider', 'input', 'workspace', 'replay_of', 'created_at']
/**
 * The wider set bound field by field since issue 35 (created_facts): a worker must not run typed
 * inputs, a child's item or parent, or the repository a run acts in that a database user put in its
 * row afterwards. Field by field, so a refusal and the audit name what was changed.
 */
const FACTS = [...CREATED, 'inputs', 'aliases', 'parent', 'workspace_git', 'context_ref']

/** The hash of each fact fixed at a run's creation (see FACTS), as a run index line created since issue 35 binds them. */
export function runCreationFacts(record: Plain): Record<string, string> {
  const facts = creationFacts(record, FACTS)
  const out: Record<string, string> = {}
  for (const key of FACTS) out[key] = hashJson(facts[key])
  return out
}

/** The fields of `bound` (a run index line's created_facts) whose facts differ in `record`; a fact the line does not name is not compared. */
export function changedCreationFacts(bound: Record<string, unknown>, record: Plain): string[] {
  const actual = runCreationFacts(record)
  return Object.keys(bound).filter((key) => bound[key] !== (actual[key] ?? hashJson(null)))
}

/**
 * What the audit says of a run's creation facts against its run index line: each field changed
 * since (a problem), or a note that the line predates the field-by-field binding (only the narrower
 * created_hash binds that run).
 */
export function creationFindings(line: Plain, record: RunRecordTexts): Array<{note: boolean; finding: {field: string; message: string}}> {
  const bound = line.created_facts
  if (bound === undefined || bound === null || typeof bound !== 'object')
    return [
      {
        note: true,
        finding: {
          field: '(created)',
          message: 'created before runs bound their typed inputs, parent and item: the run index binds only its pipeline, input, workspace and policy',
        },
      },
    ]
  return record.changedCreationFacts(bound as Plain).map((field) => ({
    note: false,
    finding: {field, message: `changed since the run was created (the run index bound it): a worker refuses to run it`},
  }))
}

/** pipe resume --policy moves the run to another policy; what it was created with is kept on the first such redrive. */
function firstPolicyRedrive(record: Plain): Plain | undefined {
  return Array.isArray(record.redrives)
    ? (record.redrives as unknown[]).find((r): r is Plain => typeof (r as Plain | null)?.previous_policy_version === 'string')
    : undefined
}

function creationFacts(record: Plain, keys: readonly string[]): Plain {
  const fixed: Plain = {}
  for (const key of keys) fixed[key] = record[key] ?? null
  const first = firstPolicyRedrive(record)
  if (first) {
    fixed.policy_version = first.previous_policy_version
    fixed.policy_path = first.previous_policy_path ?? null
  }
  return fixed
}

/** What a timeline line binds of its run record: everything but the head and the seal. */
export function runStateHash(record: Plain): string {
  const {head: _h, seal: _s, ...state} = record
  return hashJson(state)
}

/**
 * What the audit recomputes of a stored run record, each top-level field put in canonical form once:
 * its seal (checkRecord), the state its timeline line binds (runStateHash) and the facts fixed at its
 * creation (runCreationHash, runCreationFacts) hash the same fields, and a whole-store audit did it
 * three times over.
 */
export class RunRecordTexts {
  /** Field name -> its canonical JSON (undefined: left out, as canonicalJson leaves it). Null prototype: a `__proto__` field is a field. */
  private readonly texts: Record<string, string | undefined> = Object.create(null) as Record<string, string | undefined>

  constructor(private readonly record: Plain) {
    for (const key of Object.keys(record)) this.texts[key] = canonicalMember(record[key])
  }

  private textWithout(...left: string[]): string {
    const members: Record<string, string | undefined> = Object.create(null) as Record<string, string | undefined>
    for (const key of Object.keys(this.texts)) if (!left.includes(key)) members[key] = this.texts[key]
    return canonicalObject(members)
  }

  /** checkRecord(record, key). */
  checkSeal(key: string | undefined): SealCheck {
    return checkSealOfText(this.record.seal, () => this.textWithout('seal'), key)
  }

  /** runStateHash(record). */
  stateHash(): string {
    return sha256(this.textWithout('head', 'seal'))
  }

  /** The canonical JSON of each fact of creationFacts(record, keys), by key. */
  private factTexts(keys: readonly string[]): Record<string, string> {
    const out: Record<string, string> = Object.create(null) as Record<string, string>
    for (const key of keys) out[key] = this.record[key] === undefined || this.record[key] === null ? 'null' : (this.texts[key] ?? 'null')
    const first = firstPolicyRedrive(this.record)
    if (first) {
      out.policy_version = canonicalJson(first.previous_policy_version)
      out.policy_path = canonicalJson(first.previous_policy_path ?? null)
    }
    return out
  }

  /** runCreationHash(record). */
  creationHash(): string {
    return sha256(canonicalObject(this.factTexts(CREATED)))
  }

  /** changedCreationFacts(bound, record). */
  changedCreationFacts(bound: Record<string, unknown>): string[] {
    const texts = this.factTexts(FACTS)
    const none = hashJson(null)
    return Object.keys(bound).filter((key) => bound[key] !== (key in texts ? sha256(texts[key]!) : none))
  }
}
