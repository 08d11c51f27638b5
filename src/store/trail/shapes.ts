/**
 * The shapes of the store's records that have no schema file of their own (the lines of the chained
 * logs), and the one check every record read from disk passes first: it is a JSON object. A record
 * of the wrong shape was changed outside pipe; callers report it as damage, never dereference it.
 */
import {ID_PATTERNS} from '../file/ids.js'

export type Plain = Record<string, unknown>

export function isObject(value: unknown): value is Plain {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** How a value that should be a record is described when it is not one. */
export function notAnObject(value: unknown): string {
  return `is not a JSON object (${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value})`
}

const SEAL = /^(sha256|hmac-sha256):[0-9a-f]{64}$/
const LEDGER_KEY = /^F-\d{4}-\d{3,}\+[a-z][a-z0-9_-]*\+S-\d{8}-\d{4,}$/

function idProblem(line: Plain, field: string, pattern: RegExp, what: string): string | null {
  const value = line[field]
  return typeof value === 'string' && pattern.test(value) ? null : `${field} ${JSON.stringify(value) ?? 'is missing'} is not ${what}`
}

/** A timeline line (schemas/run.schema.json, runEvent): the fields pipe reads back. */
export function eventLineProblem(line: Plain): string | null {
  if (typeof line.event !== 'string') return 'event is not a string'
  if (typeof line.at !== 'string') return 'at is not a string'
  if (line.seq !== undefined && !Number.isInteger(line.seq)) return 'seq is not an integer'
  if (line.run_state !== undefined && (typeof line.run_state !== 'string' || !SEAL.test(line.run_state))) return 'run_state is not a hash'
  return null
}

/** A line of the run index (audit/runs.jsonl): the run, its feature, and the hashes that bind them. */
export function indexLineProblem(line: Plain): string | null {
  return (
    idProblem(line, 'run_id', ID_PATTERNS.run, 'a run id') ??
    idProblem(line, 'feature_id', ID_PATTERNS.feature, 'a feature id') ??
    (typeof line.created_hash === 'string' && SEAL.test(line.created_hash) ? null : 'created_hash is not a hash') ??
    (line.created_facts === undefined || (isObject(line.created_facts) && Object.values(line.created_facts).every((h) => typeof h === 'string' && SEAL.test(h)))
      ? null
      : 'created_facts is not a map of hashes') ??
    (line.feature_hash === undefined || line.feature_hash === null || (typeof line.feature_hash === 'string' && SEAL.test(line.feature_hash))
      ? null
      : 'feature_hash is not a hash')
  )
}

/** A line of the ledger log (audit/ledger.jsonl): a key and the seal its entry was written with. */
export function ledgerLineProblem(line: Plain): string | null {
  return (
    idProblem(line, 'key', LEDGER_KEY, 'a ledger key') ??
    (typeof line.entry_seal === 'string' && SEAL.test(line.entry_seal) ? null : 'entry_seal is not a seal') ??
    (line.entries === undefined || Number.isInteger(line.entries) ? null : 'entries is not an integer')
  )
}
