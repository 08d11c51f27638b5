/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * One publication: a spec version to a target. Its idempotency key is feature_id + target + spec_version; a delivered key is never sent again.
 */
export interface LedgerEntry {
  key: string
  feature_id: string
  target: string
  target_type: 'file' | 'webhook'
  format?: string
  spec_version: string
  run_id: string
  /**
   * pending: not delivered yet (or sent with an unknown outcome, to be resent on the next redrive); delivered; failed: the last attempt failed; uncertain: a crash or a timeout left it unknown and the target holds such cases for a person.
   */
  status: 'pending' | 'delivered' | 'failed' | 'uncertain'
  /**
   * What the target calls the delivery (a message id, a file path, or the idempotency key when the target names none).
   */
  external_id?: string
  endpoint_host?: string
  attempts: {
    n: number
    started_at: string
    finished_at?: string
    /**
     * sending: the request went out and no answer was recorded (a crash, if it stays so); unknown: it went out and no answer came (a crash, a timeout, a broken connection).
     */
    state: 'sending' | 'delivered' | 'failed' | 'retryable' | 'unknown'
    status_code?: number
    error?: string
    duration_ms?: number
    by?: string
  }[]
  created_at: string
  updated_at: string
  delivered_at?: string
  /**
   * sha256 (or, with PIPE_AUDIT_KEY, hmac-sha256) of this entry without the seal; the store's ledger log records each one.
   */
  seal?: string
}
