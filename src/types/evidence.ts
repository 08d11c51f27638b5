/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * A quotation, document, file, API result or log that supports a spec field or a decision (seed 002).
 */
export interface Evidence {
  evidence_id: string
  type: 'quote' | 'doc' | 'repo' | 'file' | 'api_result' | 'log'
  source: {
    /**
     * Where the content comes from, e.g. file://requirement.md#L3-L5 or run://R-20260113-0008/answers/Q-001.
     */
    ref: string
    /**
     * sha256 of the whole source, to check it has not changed.
     */
    hash?: string
  }
  content: {
    excerpt: string
    note?: string
  }
  /**
   * @minItems 1
   */
  linked_to: [
    {
      spec_path?: string
      step?: string
      run_id?: string
    },
    ...{
      spec_path?: string
      step?: string
      run_id?: string
    }[]
  ]
  created_at: string
  /**
   * sha256 of this record without record_hash, checked by pipe audit verify.
   */
  record_hash?: string
  /**
   * sha256 of each top-level field (meta without its hashes), so that pipe audit verify can name the field that changed.
   */
  field_hashes?: {
    [k: string]: string | undefined
  }
}
