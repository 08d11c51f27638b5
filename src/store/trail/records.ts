/**
 * The text of each write-once record, as every store keeps it (a file's bytes, a row's body, a
 * map's value): the same draft and id give the same bytes everywhere, so a snapshot's binds, a
 * redriven commit and `pipe store copy` agree whichever store wrote them.
 */
import type {Evidence} from '../../types/evidence.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {PipeError} from '../../errors.js'
import {check, describeErrors} from '../../schema/registry.js'
import type {LedgerEntry} from '../../types/ledger.js'
import {redactDeep} from '../../util/redact.js'
import {sealEvidence, sealLine, sealRecord, sealSpec} from './integrity.js'
import type {EvidenceDraft, SpecDraft} from '../types.js'

/** A whole record as it is stored: two-space JSON and a newline. */
export function recordText(value: unknown): string {
  return `${JSON.stringify(value, null, 2)}\n`
}

/** A line of a chained log (a timeline, the run index, the ledger log) as it is stored, without its newline. */
export function lineText(line: object): string {
  return JSON.stringify(line)
}

// A record built here from its typed draft is not checked against its schema again: what came from
// outside in it (a reply, a file, an answer) was checked where it came in, and a record is checked
// when it is read back (checks.ts, wellFormed). The check cost a default run ~6 ms (bench/README.md,
// "Issue 38: a lean start").
export function buildSpec(draft: SpecDraft, id: string): CanonicalSpec {
  // Keep meta's keys in a fixed order so the files read well.
  const spec = {...draft, meta: {spec_version: id, ...draft.meta, content_hash: ''}}
  const sealed = sealSpec(spec)
  return sealed
}

/** The stored text of a spec version. */
export function specText(draft: SpecDraft, id: string): string {
  return recordText(buildSpec(draft, id))
}

export function buildEvidence(draft: EvidenceDraft, now: Date, id: string): Evidence {
  const record = sealEvidence({evidence_id: id, ...draft, created_at: now.toISOString()})
  return record
}

/** The stored text of an evidence record. */
export function evidenceText(draft: EvidenceDraft, now: Date, id: string): string {
  return recordText(buildEvidence(draft, now, id))
}

/** The stored text of a feature registration (`title` when it was created with one, not merely named). */
export function featureText(id: string, now: Date, title?: string): string {
  return recordText(sealRecord(title === undefined ? {feature_id: id, created_at: now.toISOString()} : {feature_id: id, title, created_at: now.toISOString()}))
}

/**
 * A publish ledger entry as every store keeps it: redacted (its attempts carry what targets
 * answered, which may echo a webhook URL), checked against the schema, sealed.
 */
export function sealedLedgerEntry(raw: LedgerEntry): LedgerEntry & {seal: string} {
  const entry = redactDeep(raw)
  const result = check('ledger', entry)
  if (!result.valid) throw new PipeError('E_INTERNAL', `refusing to store an invalid ledger entry: ${describeErrors(result.errors)}`)
  return sealRecord(entry)
}

/** The ledger log's line for a written entry, chained to the line before; `entries`: how many entries the ledger holds with it. */
export function ledgerLogLine(entry: LedgerEntry & {seal: string}, entries: number, prevLine: string | null): ChainedLedgerLine {
  return sealLine(ledgerLogFields(entry, entries), prevLine ? (JSON.parse(prevLine) as {hash: string}).hash : null)
}

/** The ledger log's line for a written entry before it is chained (a store that chains as it appends: the file store). */
export function ledgerLogFields(entry: LedgerEntry & {seal: string}, entries: number): {key: string; entry_seal: string; entries: number} {
  return {key: entry.key, entry_seal: entry.seal, entries}
}

export type ChainedLedgerLine = {key: string; entry_seal: string; entries: number; prev: string | null; hash: string}
