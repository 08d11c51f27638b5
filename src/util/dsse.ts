/**
 * DSSE (Dead Simple Signing Envelope, secure-systems-lab/dsse protocol v1.0) with Ed25519 from
 * node:crypto. The signature covers PAE(payloadType, payload) over the payload's bytes as sent, so
 * no JSON canonicalisation is involved: the payload is serialised once and those bytes are signed.
 */
import * as crypto from 'node:crypto'

export interface Envelope {
  payloadType: string
  /** The payload's bytes, base64 standard encoding (RFC 4648 §4, with padding). */
  payload: string
  signatures: Array<{keyid: string; sig: string}>
}

/** The Pre-Authentication Encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body, LEN the ASCII decimal byte length. */
export function pae(payloadType: string, body: Uint8Array): Buffer {
  const type = Buffer.from(payloadType, 'utf8')
  return Buffer.concat([Buffer.from(`DSSEv1 ${type.length} `), type, Buffer.from(` ${body.length} `), body])
}

/** The raw 32 bytes of an Ed25519 public key (the last 32 bytes of its SPKI DER). */
export function rawPublicKey(key: crypto.KeyObject): Buffer {
  const der = key.export({type: 'spki', format: 'der'})
  return der.subarray(der.length - 32)
}

/** A key's id: sha256 of its raw 32-byte public key, as `sha256:HEX`. */
export function keyIdOf(publicKey: crypto.KeyObject): string {
  return `sha256:${crypto.createHash('sha256').update(rawPublicKey(publicKey)).digest('hex')}`
}

/** An Ed25519 public key from its raw 32 bytes. */
export function publicKeyFromRaw(raw: Uint8Array): crypto.KeyObject {
  // SPKI DER of an Ed25519 key: a fixed 12-byte prefix, then the 32 key bytes.
  const prefix = Buffer.from('302a300506032b6570032100', 'hex')
  return crypto.createPublicKey({key: Buffer.concat([prefix, raw]), format: 'der', type: 'spki'})
}

export function signEnvelope(payloadType: string, payload: Uint8Array, privateKey: crypto.KeyObject): Envelope {
  const sig = crypto.sign(null, pae(payloadType, payload), privateKey)
  const keyid = keyIdOf(crypto.createPublicKey(privateKey))
  return {payloadType, payload: Buffer.from(payload).toString('base64'), signatures: [{keyid, sig: sig.toString('base64')}]}
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/** Strict standard base64: a re-encoded (URL-safe, unpadded, wrapped) field is refused, never guessed at. */
export function decodeBase64(text: string): Buffer | null {
  return BASE64.test(text) ? Buffer.from(text, 'base64') : null
}

/** Whether `sig` (base64) is the key's Ed25519 signature over PAE(payloadType, payload). */
export function verifySignature(envelope: Envelope, payload: Uint8Array, sig: Uint8Array, publicKey: crypto.KeyObject): boolean {
  try {
    return crypto.verify(null, pae(envelope.payloadType, payload), publicKey, sig)
  } catch {
    return false
  }
}
