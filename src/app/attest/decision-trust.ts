/**
 * pipe audit verify's check of people's signed decisions against the keys a team trusts. The
 * trail's walk (store/trail/audit-run.ts) already found every signature that does not hold over
 * its decision; what only the policy can say is whose key it is: one of attestation.trusted_keys
 * (trusted), one it marks revoked: true (a failure: the key is no longer anyone's word), or none of
 * them (named as a warning: the decision is intact, but nothing says who holds the key).
 */
import {loadPolicyFile} from '../../config/policy.js'
import type {AuditReport, SignedLine} from '../../store/types.js'
import type {SignedDecision} from '../../types/run.js'
import {decisionSignatureProblem} from '../../util/decision-signature.js'

export type Trust = 'trusted' | 'untrusted' | 'revoked' | 'invalid'

export interface SignedDecisionFinding {
  run_id: string
  /** The timeline line that records it, from 1. */
  line: number
  event: string
  step: string
  decision: string
  by: SignedDecision['by']
  at: string
  key_id: string
  /** The trusted key's name in the run's policy; null when the policy names no such key. */
  key_name: string | null
  trust: Trust
}

type Keys = Map<string, {name: string; revoked: boolean}> | {unreadable: string}

/** The keys a run's policy file trusts as it reads now: a key revoked after the decision is revoked for it too. */
async function keysOf(file: string | null | undefined, cache: Map<string, Keys>): Promise<Keys> {
  if (!file) return new Map()
  const known = cache.get(file)
  if (known) return known
  const result = await loadPolicyFile(file).catch((error: unknown) => ({ok: false as const, error}))
  const keys: Keys = result.ok
    ? new Map((result.loaded.policy.attestation?.trusted_keys ?? []).map((k) => [k.id, {name: k.name, revoked: k.revoked === true}]))
    : {unreadable: `the run's policy ${file} cannot be read or is not valid`}
  cache.set(file, keys)
  return keys
}

/**
 * The signed decisions the audit walk found (AuditKinds.signedDecision), against the keys each
 * run's policy names; a revoked key is added to `report` as a problem, an unknown one as a note.
 */
export async function checkDecisionSignatures(lines: readonly SignedLine[], report: AuditReport): Promise<SignedDecisionFinding[]> {
  const found: SignedDecisionFinding[] = []
  const cache = new Map<string, Keys>()
  for (const {run_id: id, line, event, signed, policy_path: policyPath} of lines) {
    const keys = await keysOf(policyPath, cache)
    const where = {record: `${id}: ${signed.by.id}'s ${signed.decision} at step ${signed.step}`, file: `timeline of ${id}`, field: `line ${line}`}
    const trusted = keys instanceof Map ? keys.get(signed.signature.key_id) : undefined
    const trust: Trust = decisionSignatureProblem(signed) !== null ? 'invalid' : !trusted ? 'untrusted' : trusted.revoked ? 'revoked' : 'trusted'
    found.push({
      run_id: id,
      line,
      event,
      step: signed.step,
      decision: signed.decision,
      by: signed.by,
      at: signed.at,
      key_id: signed.signature.key_id,
      key_name: trusted?.name ?? null,
      trust,
    })
    if (trust === 'revoked') {
      report.problems.push({
        ...where,
        message: `signed by ${trusted!.name} (${signed.signature.key_id}), a key ${policyPath} marks revoked: the decision is no longer anyone's word`,
      })
      report.ok = false
    } else if (trust === 'untrusted')
      report.notes.push({
        ...where,
        message: `signed by key ${signed.signature.key_id}, which ${keys instanceof Map ? `${policyPath ?? 'the built-in default policy'}'s attestation.trusted_keys does not name` : `cannot be looked up: ${keys.unreadable}`}: the decision is intact, but nothing says whose key it is`,
      })
  }
  return found
}
