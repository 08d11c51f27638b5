/**
 * A person's signature over a decision (issue 39 item 3): Ed25519 over the RFC 8785 canonical JSON
 * of exactly what they decided (run, gate, decision, note or answers, the hash of what they were
 * shown, who, when). The record carries the public key beside the signature, so that anyone can
 * check that the decision was not changed after it was signed; whether the key is one to trust is
 * the policy's attestation.trusted_keys to say, not the record's.
 */
import * as crypto from 'node:crypto'
import type {SignedDecision} from '../types/run.js'
import {decodeBase64, keyIdOf, publicKeyFromRaw, rawPublicKey} from './dsse.js'
import {canonicalJson} from './hash.js'

export type DecisionBody = Omit<SignedDecision, 'signature'>

/**
 * The bytes signed. canonicalJson sorts keys by UTF-16 code unit and writes strings and whole
 * numbers as JSON.stringify does: RFC 8785 for a body of strings and objects of strings.
 */
export function decisionText(body: DecisionBody): Buffer {
  const {run_id, step, decision, note, shown_sha256, by, at} = body
  return Buffer.from(canonicalJson({run_id, step, decision, ...(note !== undefined ? {note} : {}), shown_sha256, by, at}), 'utf8')
}

export function signDecision(body: DecisionBody, privateKey: crypto.KeyObject): SignedDecision {
  const publicKey = crypto.createPublicKey(privateKey)
  const sig = crypto.sign(null, decisionText(body), privateKey)
  return {
    ...body,
    signature: {key_id: keyIdOf(publicKey), alg: 'ed25519', sig: sig.toString('base64'), public_key: rawPublicKey(publicKey).toString('base64')},
  }
}

/** null when the signature holds over the body as it is now; else what is wrong. */
export function decisionSignatureProblem(value: unknown): string | null {
  const signed = value as Partial<SignedDecision> | null
  const signature = signed?.signature
  if (typeof signed !== 'object' || signed === null || typeof signature !== 'object' || signature === null) return 'is not a signed decision (no signature)'
  if (signature.alg !== 'ed25519') return `is signed with ${JSON.stringify(signature.alg)}, not ed25519`
  const raw = typeof signature.public_key === 'string' ? decodeBase64(signature.public_key) : null
  const sig = typeof signature.sig === 'string' ? decodeBase64(signature.sig) : null
  if (!raw || raw.length !== 32 || !sig) return 'has a signature or public key that is not base64 of an Ed25519 key and signature'
  let publicKey: crypto.KeyObject
  try {
    publicKey = publicKeyFromRaw(raw)
  } catch {
    return 'has a public key that is not an Ed25519 key'
  }
  if (keyIdOf(publicKey) !== signature.key_id) return `names key ${String(signature.key_id)}, but carries the public key ${keyIdOf(publicKey)}`
  let ok = false
  try {
    ok = crypto.verify(null, decisionText(signed as DecisionBody), publicKey, sig)
  } catch {
    ok = false
  }
  return ok ? null : 'does not verify against its signature: the decision was changed after it was signed'
}

/** Who decided what, for a message: "alice@example.com's go at step manual_review". */
export function describeDecision(value: unknown): string {
  const s = value as Partial<SignedDecision> | null
  const who = typeof s?.by === 'object' && s.by !== null ? String(s.by.id) : 'someone'
  return `${who}'s ${String(s?.decision)} at step ${String(s?.step)}`
}
