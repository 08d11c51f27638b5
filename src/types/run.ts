/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * This interface was referenced by `RunRecord`'s JSON-Schema
 * via the `definition` "runStatus".
 */
export type RunStatus =
  'pending' | 'running' | 'awaiting_input' | 'succeeded' | 'failed' | 'blocked' | 'cancelled' | 'interrupted'

/**
 * One run of a pipeline: its lifecycle state and what it was started with. The snapshots hold what each step did; the timeline (events.jsonl) holds every state change.
 */
export interface RunRecord {
  run_id: string
  feature_id: string
  status: RunStatus
  status_reason?: string
  error?: {
    code: string
    message: string
    hint?: string
    step?: string
    /**
     * Identifies this occurrence of the error: the same id is on stderr, in the --json error, in the daily log entry, in the failing step's snapshot errors[] and in the run's failed/blocked event and record. Random; never part of a model request or a cassette key.
     */
    trace_id?: string
  }
  pipeline: {
    /**
     * Absolute path of the pipeline file.
     */
    path: string
    name: string
    hash: string
  }
  policy_version: string
  policy_path?: string | null
  /**
   * The versions of the tools the policy declares (tool_versions), each measured once when the run started (`TOOL --version`, sandboxed like any command): declared, what ran (null when the tool is not installed or did not answer), and whether they agree (a declared version matches when it is a prefix of the measured one by dot-separated parts: 20 matches v20.20.0).
   */
  tool_versions?: {
    [k: string]:
      | {
          declared: string
          actual: string | null
          status: 'match' | 'mismatch' | 'missing'
          /**
           * What the tool printed for --version (its first line, capped), when the version could not be read from it or it failed.
           */
          output?: string
        }
      | undefined
  }
  provider: {
    kind: string
    model: string | null
    endpoint_host?: string | null
    /**
     * Model replies came from (or were recorded to) a cassette: pipe run --record / --replay.
     */
    cassette?: {
      /**
       * Absolute path of the cassette file.
       */
      file: string
      mode: 'record' | 'replay'
      /**
       * replay: what a request with no recorded reply does (error, or ask the live endpoint).
       */
      missing?: 'error' | 'live'
      /**
       * replay with missing live: replies fetched live are added to the cassette.
       */
      append?: boolean
      /**
       * replay: sha256 of the cassette file when the run started.
       */
      sha256?: string
    }
    /**
     * reuse: requests the store's reply cache answered before were answered from it (--cache reuse).
     */
    cache?: 'off' | 'reuse'
  }
  /**
   * A person accepted a replayed cassette that changed since the run started (--accept-cassette): later resumes compare the file with this sha256, not provider.cassette.sha256, which stays as the run was created.
   */
  cassette_accepted?: {
    sha256: string
    previous_sha256: string
    by: string
    at: string
  }
  input: {
    kind: 'file' | 'stdin' | 'text' | 'none'
    ref: string
    /**
     * The raw input, kept so that a resumed or replayed run reads exactly what the first did.
     */
    text?: string
  }
  /**
   * The values of the pipeline's typed inputs this run uses (given with -i or --inputs, or defaulted); resume and replay use them again.
   */
  inputs?: {
    [k: string]: (string | number | boolean | {} | unknown[]) | undefined
  }
  /**
   * For a child run of a foreach's inline steps: its item under the foreach's alias (as:), and the aliases of the runs above it, by name; its expressions read them, and resume and replay bind them again.
   */
  aliases?: {
    [k: string]: unknown | undefined
  }
  /**
   * The pipeline's declared outputs (outputs:), evaluated when the run succeeded.
   */
  outputs?: {
    [k: string]: unknown | undefined
  }
  /**
   * Answers given to this run so far, by question id or spec field.
   */
  answers?: {
    [k: string]: string | undefined
  }
  review?: {
    decision: 'go' | 'hold' | 'drop'
    by: string
    at: string
    /**
     * Where the person gave it when not on the command line: view (a form of pipe view's run page, by the OS user running pipe view).
     */
    via?: 'view'
    note?: string
  }
  /**
   * A person's answer to the tool call a confirm pause waits for (pipe confirm).
   */
  confirmation?: {
    call_id: string
    decision: 'yes' | 'no'
    by: string
    at: string
    /**
     * Where the person gave it when not on the command line: view (a form of pipe view's run page, by the OS user running pipe view).
     */
    via?: 'view'
    note?: string
    /**
     * The sha256 of the action the person was shown (pending.action.sha256): the confirmation runs that exact call, once.
     */
    action_sha256?: string
    /**
     * What the answer covers (pipe confirm --for): call (this call or this one run of a step), step (every confirmation of the same step in this run), run (every confirmation in this run). Absent: call.
     */
    scope?: 'call' | 'step' | 'run'
    /**
     * The step the answer was given at.
     */
    step?: string
  }
  /**
   * Answers given with pipe confirm --for step or --for run: they answer every later confirmation of that step (or of the whole run) without asking, and a resume honours them.
   */
  standing_confirmations?: {
    scope: 'step' | 'run'
    /**
     * For scope step: the step it answers for.
     */
    step?: string
    decision: 'yes' | 'no'
    by: string
    at: string
    /**
     * Where the person gave it when not on the command line: view (a form of pipe view's run page, by the OS user running pipe view).
     */
    via?: 'view'
    note?: string
  }[]
  /**
   * Raises of the run's budgets a person granted (pipe budget RUN --add-tokens N | --add-usd X): each adds to the budget that paused the run (scope: pipeline or a step id).
   */
  budget_grants?: {
    scope: string
    /**
     * The child run whose pause at this run's budget the grant answered, and when it paused: one grant per pause, however often pipe budget is given again after a failed continuation.
     */
    for?: {
      run_id: string
      since: string
    }
    tokens?: number
    usd?: number
    by: string
    at: string
    note?: string
    /**
     * Tokens the paused step spent before it paused: no snapshot records them (the step runs again), so the pause and then the grant do.
     */
    unrecorded?: {
      step: string
      prompt_tokens: number
      completion_tokens: number
    }
  }[]
  /**
   * What a run in awaiting_input waits for.
   */
  pending?: {
    kind: 'answers' | 'review' | 'confirm' | 'budget'
    step: string
    since: string
    reason: string
    /**
     * For a gate under a deadline (the policy's confirm.timeout_s, or its approvals rule's timeout_s): when the person's time runs out. After it the run stays paused and says so, and still takes a decision, unless on_timeout says otherwise.
     */
    deadline?: string
    /**
     * What the policy's on_timeout (confirm's or the gate's approvals rule's) does when the deadline passes (deny or cancel), fixed when the run paused; absent: the run keeps waiting.
     */
    on_timeout?: 'deny' | 'cancel'
    /**
     * The policy's approvals rule this gate runs under (its key), fixed when the run paused.
     */
    rule?: string
    /**
     * The votes cast at this gate under the policy's approvals rule, in order.
     */
    votes?: {
      by: DecisionPerson
      at: string
      /**
       * go, hold or drop (a review), yes or no (a confirmation), answered (answers).
       */
      decision: string
      note?: string
      /**
       * The sha256 of what the person was shown: the pending gate (its step, reason, questions, action) as it read when they voted.
       */
      shown_sha256: string
    }[]
    questions?: {
      id: string
      field?: string
      question: string
    }[]
    /**
     * For a confirm: the exact tool call (or step) waiting for a person.
     */
    action?: {
      call_id: string
      tool: string
      level: 'safe' | 'moderate' | 'dangerous'
      arguments: {}
      /**
       * For run_command: the argument vectors it runs, one per segment.
       */
      argv?: string[][]
      /**
       * The folder the call acts in (the run's workspace).
       */
      cwd?: string
      /**
       * For a step's confirmation (not an agent's tool call): what asked for it: the step's confirm: true, or the policy's confirm.kinds or confirm.commands entry.
       */
      rule?: string
      /**
       * The hash of every other field of this action, exactly as shown: a confirmation binds it, and pipe confirm refuses when the call the step would run no longer hashes the same.
       */
      sha256?: string
    }
    /**
     * For a budget pause: the budget that would be passed (the pipeline's, or a step's), its limits with the grants so far, what was spent, and the request's estimate.
     */
    budget?: {
      /**
       * pipeline, or the id of the step whose budget it is.
       */
      scope: string
      /**
       * The run whose budget it is when not this run's own: an ancestor of this child run (the run of its foreach or pipeline step), which pipe budget raises.
       */
      run_id?: string
      limit_tokens?: number
      limit_usd?: number
      spent_tokens: number
      spent_usd: number
      estimate_tokens?: number
      /**
       * Tokens the paused step spent before it paused: no snapshot records them (the step runs again), so the pause and then the grant do.
       */
      unrecorded?: {
        step: string
        prompt_tokens: number
        completion_tokens: number
      }
    }
  }
  /**
   * The latest spec version of the run.
   */
  spec_version?: string | null
  created_at: string
  updated_at: string
  ended_at?: string
  /**
   * Who started the run (an approvals rule's self_approval: false refuses them); recorded when the policy has approvals.
   */
  started_by?: {
    /**
     * The stable id: PIPE_USER, else the repository's git user.email, else the OS user.
     */
    id: string
    /**
     * The OS user.
     */
    user: string
    host: string
  }
  /**
   * The step a running run is in now, recorded (with its step_started timeline line) before the step acts, and removed by the run's next status change: which step, since when, in which process. A run recorded as running whose process is gone was interrupted at this step.
   */
  current_step?: {
    step: string
    /**
     * The seq its snapshot will have.
     */
    seq: number
    since: string
    /**
     * The process driving the step: its host and pid, and a worker's --name.
     */
    worker: {
      host: string
      pid: number
      name?: string
    }
  }
  /**
   * The process that runs or last ran the run, to tell a live run from an interrupted one.
   */
  owner: {
    pid: number
    host: string
    user: string
    /**
     * When the owner process started (clock ticks after boot, /proc/PID/stat field 22), so a later process that reuses its pid is not taken for it.
     */
    start_time?: string
  }
  /**
   * The run and snapshot this run was replayed from.
   */
  replay_of?: {
    run_id: string
    seq: number
    step: string
  }
  /**
   * Each redrive of the run: a person resumed it after it failed or was blocked, and the step of the snapshot that ended it ran again as a new attempt. That snapshot stays as it was and does not count toward the step's max_iterations.
   */
  redrives?: {
    /**
     * The snapshot that failed or blocked the run; the step it names runs again.
     */
    seq: number
    step: string
    from: 'failed' | 'blocked'
    by: string
    at: string
    /**
     * The policy the run continues under.
     */
    policy_version: string
    /**
     * Set when the redrive changed the policy (pipe resume --policy FILE).
     */
    previous_policy_version?: string
    /**
     * The policy file the run ran under before this redrive changed the policy, when it had one; with previous_policy_version it lets pipe audit verify check what the run was created with.
     */
    previous_policy_path?: string
  }[]
  /**
   * Tasks (a foreach step's child runs) a person skipped with pipe resume RUN --skip KEY --note TEXT while the run was blocked: the child run is cancelled, the item is recorded skipped (never succeeded), and its dependents are blocked as for a failure unless run_dependents.
   */
  skips?: {
    /**
     * The step whose child the task is.
     */
    step: string
    /**
     * The item's key (its key: value, else its index).
     */
    key: string
    index: number
    /**
     * The child run skipped.
     */
    run_id: string
    by: string
    at: string
    /**
     * Why, as the person said it.
     */
    note: string
    /**
     * Whether the items that depend on it run as if it had succeeded.
     */
    run_dependents: boolean
  }[]
  /**
   * A person's rollbacks of the run's workspace to a checkpoint its git step made (pipe rollback RUN --checkpoint): the run was blocked and stays blocked, its working tree back at the checkpoint (seed 001: BLOCKED -> ROLLBACK -> idle).
   */
  rollbacks?: {
    /**
     * The checkpoint step.
     */
    step: string
    /**
     * The checkpoint's snapshot.
     */
    seq: number
    /**
     * The commit HEAD was at before (null: none).
     */
    from: string | null
    /**
     * The checkpoint commit.
     */
    to: string
    /**
     * Files put back or removed.
     */
    files: string[]
    /**
     * The git stash commit holding what the working tree had that HEAD did not (changed and untracked files), saved before the rollback discarded it: git stash apply HASH brings it back.
     */
    saved?: string
    by: string
    at: string
    note: string
  }[]
  /**
   * The working directory (repository root) the run's steps act in; resume and rollback use it too.
   */
  workspace?: string
  /**
   * The .git (folder or gitfile) git found from the workspace when the run was created, or null when there was none; a child run has its parent's. pipe's git steps use exactly this repository and refuse to run when a .git has appeared in the workspace since (a command may have planted hooks in it).
   */
  workspace_git?: string | null
  /**
   * Seed 002's Project Context Ref, given as pipe run --context-ref PROJECT@VERSION: the project and the version of its context this run works from. Every snapshot of the run names it in inputs.context_ref.project; a child run has its parent's.
   */
  context_ref?: {
    project_id: string
    context_version: string
  }
  /**
   * What the trail held when this record was last written: the timeline's length and last line's hash, the last snapshot's seq and record hash. Deleting or rewriting the newest records shows against it.
   */
  head?: {
    events: number
    event_hash: string | null
    seq: number
    snapshot_hash: string | null
  }
  /**
   * sha256 (or, with PIPE_AUDIT_KEY, hmac-sha256) of this record without the seal.
   */
  seal?: string
  /**
   * The run and step that started this run as a child (a pipeline or foreach step); absent for a top-level run.
   */
  parent?: {
    run_id: string
    step: string
    seq: number
    /**
     * The item's index, for a foreach child.
     */
    index?: number
    /**
     * What names the item for people, for a foreach child: the item itself when it is a string, else its id, key, name or task field (at most 80 characters).
     */
    key?: string
  }
  /**
   * The run's OpenTelemetry trace context (W3C ids), kept when the run was first driven with OTEL_EXPORTER_OTLP_ENDPOINT set: each later session of the run (a resume, a redrive, a worker on another machine) sends its spans into this trace, under this span. Absent when no collector was configured.
   */
  trace?: {
    /**
     * The trace id: 32 lowercase hex digits.
     */
    trace_id: string
    /**
     * The id of the span of the run's first session: 16 lowercase hex digits.
     */
    span_id: string
  }
}
/**
 * Who decided, as pipe records a person.
 *
 * This interface was referenced by `RunRecord`'s JSON-Schema
 * via the `definition` "person".
 */
export interface DecisionPerson {
  /**
   * The stable id: PIPE_USER, else the repository's git user.email, else the OS user.
   */
  id: string
  /**
   * The OS user.
   */
  user: string
  host: string
  /**
   * The trusted key's name the person decided as (--as NAME): only when their signing key is that key of the policy's attestation.trusted_keys.
   */
  name?: string
}
/**
 * One line of a run's timeline (events.jsonl).
 *
 * This interface was referenced by `RunRecord`'s JSON-Schema
 * via the `definition` "runEvent".
 */
export interface RunEvent {
  at: string
  /**
   * What happened: created, started, resumed, redriven (a failed or blocked run resumed by a person, `by`), paused, interrupted, succeeded, failed, blocked, cancelled, answers_given, review_given, ...
   */
  event: string
  from?: RunStatus
  to?: RunStatus
  step?: string
  seq?: number
  attempt?: number
  duration_ms?: number
  reason?: string
  /**
   * Where the person gave it when not on the command line: view (a form of pipe view's run page, by the OS user running pipe view).
   */
  via?: 'view'
  by?: string
  /**
   * On tool_call_request / tool_call_result: the agent's tool call the line is about.
   */
  call_id?: string
  /**
   * On tool_call_request / tool_call_result: the tool called.
   */
  tool?: string
  /**
   * On tool_call_request / tool_call_result: the tool's permission level in the policy.
   */
  level?: 'safe' | 'moderate' | 'dangerous'
  /**
   * On tool_call_result: how the call was let through (auto, preapproved, confirmed, refused, denied, invalid).
   */
  decision?: string
  /**
   * On tool_call_result: whether the call did what was asked.
   */
  ok?: boolean
  /**
   * On tool_call_result: one redacted line on what the call did (never a file's content).
   */
  summary?: string
  /**
   * On tool_call_result: when the call started (its request line's at); at is when it ended.
   */
  started_at?: string
  /**
   * The policy a run continues under, on a redriven event that changed it.
   */
  policy_version?: string
  /**
   * sha256 of the run record (without head and seal) as this event left it.
   */
  run_state?: string
  /**
   * hash of the line before; null for the first.
   */
  prev?: string | null
  /**
   * This line's seal: sha256 (or hmac-sha256) of the line without hash.
   */
  hash?: string
  /**
   * Identifies this occurrence of the error: the same id is on stderr, in the --json error, in the daily log entry, in the failing step's snapshot errors[] and in the run's failed/blocked event and record. Random; never part of a model request or a cassette key.
   */
  trace_id?: string
  signed?: SignedDecision
}
/**
 * On the timeline line of a person's decision (vote_cast, review_given, answers_given, confirm_given, budget_granted): what they decided, exactly as signed. The signature covers the RFC 8785 canonical JSON of this object without its signature member.
 *
 * This interface was referenced by `RunRecord`'s JSON-Schema
 * via the `definition` "signedDecision".
 */
export interface SignedDecision {
  run_id: string
  /**
   * The gate: the step the run waited at.
   */
  step: string
  /**
   * go, hold or drop (a review), yes or no (a confirmation), answered (answers), granted (a budget).
   */
  decision: string
  /**
   * The note given, or the answers (answers {JSON}), or the amount granted.
   */
  note?: string
  /**
   * The sha256 of what the person was shown: the pending gate (its step, reason, questions, action).
   */
  shown_sha256: string
  by: DecisionPerson
  at: string
  signature: {
    /**
     * sha256 of the raw 32-byte Ed25519 public key, sha256:HEX.
     */
    key_id: string
    alg: 'ed25519'
    /**
     * The Ed25519 signature, base64.
     */
    sig: string
    /**
     * The raw 32-byte Ed25519 public key, base64: whether it is trusted is the policy's attestation.trusted_keys to say.
     */
    public_key: string
  }
}
