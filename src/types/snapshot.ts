/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * What one step of a run took in, gave out and decided, and why (seed 002). Written on success and on failure, before the run moves on.
 */
export interface Snapshot {
  run_id: string
  feature_id: string
  /**
   * The spec version the step read; null only for a step that ran before the run had any spec (such as ingest).
   */
  spec_version_in: string | null
  /**
   * The spec version the step wrote; null when the step failed or does not change the spec.
   */
  spec_version_out: string | null
  step: {
    /**
     * The step's id in the pipeline.
     */
    name: string
    /**
     * The step's kind.
     */
    kind: string
    seq: number
    /**
     * How many times this step has run in the run, this time included.
     */
    iteration?: number
    /**
     * Attempts made, retries included.
     */
    attempts?: number
    started_at: string
    ended_at: string
    duration_ms?: number
  }
  /**
   * References to what the step read (canonical_spec_ref, context_ref, user_answer_ref, ...).
   */
  inputs: {
    /**
     * The context the step read: the run's project context ref (pipe run --context-ref), and the repository context a context step gathered that this step's fields read (its step, seq, evidence id and sha256), or that this context step gathered; null when neither.
     */
    context_ref?: {
      project?: {
        project_id: string
        context_version: string
      }
      step?: string
      seq?: number
      evidence_id?: string
      hash?: string
      bytes?: number
      /**
       * Further context bundles the step read, when it read more than one.
       */
      also?: {}[]
    } | null
    [k: string]: unknown | undefined
  }
  /**
   * What the step produced; its shape depends on the step kind.
   */
  outputs: {}
  decisions: {
    decision: string
    reason: string
    /**
     * The step the run goes to; null when the run ends or waits here.
     */
    next_step: string | null
    /**
     * Who decided, for decisions made by a person.
     */
    by?: string
    at?: string
    note?: string
    /**
     * The run status this decision leads to when it ends or pauses the run.
     */
    run_status?: 'succeeded' | 'failed' | 'cancelled' | 'awaiting_input' | 'blocked'
  }[]
  evidence_links: {
    type: 'quote' | 'doc' | 'repo' | 'file' | 'api_result' | 'log' | 'repo_ref' | 'partial_success'
    evidence_id: string
  }[]
  errors: {
    code: string
    message: string
    hint?: string
    retryable: boolean
    attempt?: number
    at?: string
    details?: {}
    /**
     * Identifies this occurrence of the error: the same id is on stderr, in the --json error, in the daily log entry, in the failing step's snapshot errors[] and in the run's failed/blocked event and record. Random; never part of a model request or a cassette key.
     */
    trace_id?: string
  }[]
  /**
   * An agent step's tool calls, in order: what was asked (arguments redacted), at which level, who decided, what came back.
   */
  tool_calls?: {
    call_id: string
    turn: number
    name: string
    arguments: unknown
    level?: 'safe' | 'moderate' | 'dangerous'
    /**
     * auto: ran without asking; preapproved: ran by tools_preapproved; confirmed / refused: a person said yes / no; denied: the policy refused it; invalid: its arguments did not match the tool's schema (or the tool is unknown), so it did not run.
     */
    decision: 'auto' | 'preapproved' | 'confirmed' | 'refused' | 'denied' | 'invalid'
    ok?: boolean
    summary: string
    duration_ms: number
    cache_hit: boolean
    files_changed?: string[]
    by?: string
    note?: string
    /**
     * The tool ran in this step run (its effect happened): recorded in the step's sealed state too, so that a redrive never runs the call again.
     */
    executed?: boolean
    /**
     * Not run again: the call ran in the earlier attempt of this step with this seq (before a redrive), and its recorded result was given to the model again.
     */
    replayed_from?: number
  }[]
  meta: {
    engine_version: string
    llm_model: string | null
    provider?: string
    endpoint_host?: string | null
    policy_version?: string
    pipeline?: string
    pipeline_hash?: string
    /**
     * record_hash of the run's previous snapshot; null for the first.
     */
    prev_hash?: string | null
    /**
     * The snapshot's seal: sha256 (or, with PIPE_AUDIT_KEY, hmac-sha256) of this snapshot with record_hash removed.
     */
    record_hash?: string
    /**
     * The spec versions and evidence records this snapshot names, each with the sha256 of its file as written, so a changed or re-sealed record shows against the snapshot that used it.
     */
    binds?: {
      [k: string]: string | undefined
    }
    extensions: {}
    /**
     * sha256 of each top-level field (meta without its hashes), so that pipe audit verify can name the field that changed.
     */
    field_hashes?: {
      [k: string]: string | undefined
    }
    /**
     * For the first snapshot of a replay: the run and seq it forks from.
     */
    replay_of?: {
      run_id: string
      seq: number
    }
    /**
     * Tokens the step's model calls used (repairs included), and their cost when the pipeline gives prices.
     */
    usage?: {
      prompt_tokens: number
      completion_tokens: number
      total_tokens: number
      calls: number
      cost?: number
      currency?: string
    }
    /**
     * Each model request the step made (all attempts, repairs included), in order: the request's key (sha256 of the normalised request, as in cassettes and the store's reply cache) and what answered it.
     */
    model_calls?: {
      key: string
      /**
       * live: the model endpoint; cassette: a recorded reply (--replay, or a repeat of a request already recorded in this run); cache: the store's reply cache (--cache reuse).
       */
      source: 'live' | 'cassette' | 'cache'
    }[]
  }
}
