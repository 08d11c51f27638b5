/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

export type ConfirmLevels = ('safe' | 'moderate' | 'dangerous')[]

/**
 * What the steps of a run may do: the commands they may start, the paths they may not touch, and the limits they run under. A policy file states only what differs from the built-in policy (each key's default): a key it leaves out keeps the built-in value; a scalar or a list it gives replaces the built-in one, except forbidden_paths, which adds to the built-in globs; resource_limits, tools, tool_versions and syntax_checks merge key by key. The content hash of the effective policy (the built-in one with the file over it) is recorded with every run as policy_version; pipe policy check --effective prints it.
 */
export interface Policy {
  /**
   * Version of the policy format. Only 1 exists.
   */
  version: 1
  /**
   * Argument vectors a command may run, matched whole: each element is a literal argument, "{arg}" (any one argument), "{path}" (one argument naming a path inside the repository, outside forbidden_paths, never an option), or, as the last element only, "..." (any further arguments). [node, --check, "{path}"] allows node --check src/a.js and nothing else; [npm, test, "..."] allows npm test with any arguments. The first element is the program, a literal. Never shell strings. A policy's list replaces the built-in one, which allows nothing.
   */
  allowed_commands: [string, ...string[]][]
  /**
   * Globs, relative to the repository root, that no step may read or write (e.g. .git/**, secrets/**). A policy's globs are added to the built-in ones, which always apply.
   */
  forbidden_paths: string[]
  /**
   * Largest edit, in changed lines, that one step may apply.
   */
  max_patch_lines: number
  /**
   * Retries for a retry-safe step that does not set its own.
   */
  max_retries_default: number
  /**
   * Limits of commands and steps. A policy gives the limits it changes; the others keep their built-in values.
   */
  resource_limits: {
    /**
     * Wall-clock limit of one command; the whole process tree is killed after it. At most 2147483647 (about 24.8 days), the longest timer Node keeps: a longer one would fire at once.
     */
    command_timeout_ms?: number
    /**
     * Wall-clock limit of one step that sets no timeout_ms of its own.
     */
    step_timeout_ms?: number
    /**
     * Bytes of a command's output kept in a snapshot (head and tail).
     */
    max_output_bytes?: number
    max_concurrent_commands?: number
    /**
     * Largest input a run may ingest.
     */
    max_input_bytes?: number
    /**
     * Address space of each sandboxed process, in MiB (RLIMIT_AS via prlimit). Node and the JVM reserve more than they use: allow a few GiB for them.
     */
    memory_mb?: number
    /**
     * CPU time of each sandboxed process, in seconds (RLIMIT_CPU via prlimit).
     */
    cpu_seconds?: number
    /**
     * Processes (and threads) a sandboxed command may have at once, counted in its own user namespace (RLIMIT_NPROC via prlimit; as root, where the kernel exempts uid 0, a pids cgroup).
     */
    max_processes?: number
    /**
     * Largest file a sandboxed process may write (RLIMIT_FSIZE via prlimit).
     */
    max_file_bytes?: number
  }
  /**
   * How commands are contained. required: only inside bubblewrap (read-only root, only the repository writable, a private /tmp, no network unless `network`, its own PID namespace, resource limits); without bwrap a command is refused. auto (the default): the same when bwrap is there, else the command runs uncontained with a warning on stderr and in its snapshot. off: never contained.
   */
  sandbox: 'required' | 'auto' | 'off'
  /**
   * Whether sandboxed commands may use the network (default false: their own empty network namespace).
   */
  network: boolean
  /**
   * Versions of the tools a run depends on (e.g. node: '20'): each is measured once per run (TOOL --version) and recorded in run.json with the declared one; a mismatch warns, or refuses the run with tool_versions_mismatch: refuse.
   */
  tool_versions: {
    [k: string]: string | undefined
  }
  /**
   * What a run does when a tool's measured version does not match tool_versions (or the tool is missing): warn (the default) says so on stderr and records both; refuse ends the start with E_POLICY_DENIED before any step runs.
   */
  tool_versions_mismatch?: 'warn' | 'refuse'
  /**
   * The permission level of each agent tool (seed 003). Defaults: list_directory, find_files, search_text, read_file safe; apply_edit_blocks moderate; run_command dangerous. A tool a pipeline declares (its tools: map) may be named too: its level is the stricter of this one and the pipeline's.
   */
  tools: {
    list_directory?: 'safe' | 'moderate' | 'dangerous'
    find_files?: 'safe' | 'moderate' | 'dangerous'
    search_text?: 'safe' | 'moderate' | 'dangerous'
    read_file?: 'safe' | 'moderate' | 'dangerous'
    apply_edit_blocks?: 'safe' | 'moderate' | 'dangerous'
    run_command?: 'safe' | 'moderate' | 'dangerous'
    [k: string]: ('safe' | 'moderate' | 'dangerous') | undefined
  }
  /**
   * What pauses the run until a person confirms or refuses it (pipe confirm RUN --yes|--no). A list names the agent tool levels whose calls pause (default [dangerous]; [] confirms nothing). A map says that and more: levels (the same list), kinds (step kinds whose every step pauses before it acts), commands (patterns over the command line a step would run, e.g. "git push *") timeout_s (a deadline for the person), on_timeout (what a passed deadline does: wait, deny or cancel) and destructive (whether a destructive command a step runs waits for a person even when allowed: ask, the default, or allow).
   */
  confirm: ConfirmLevels | ConfirmRules
  /**
   * Argument vectors run_command, or a command step running a destructive command, may run without confirmation, matched like allowed_commands ("{arg}", "{path}", a last "..."). Each must still be allowed by allowed_commands.
   */
  tools_preapproved: [string, ...string[]][]
  /**
   * A syntax checker per file extension, which apply_edit_blocks runs on each file it changed (through allowed_commands and the sandbox): an argv whose "{path}" element is replaced by the file's path, e.g. ".js": [node, --check, "{path}"]. A failing check rolls the edit back and the model gets the checker's output.
   */
  syntax_checks: {
    /**
     * @minItems 1
     */
    [k: string]: [string, ...string[]] | undefined
  }
  /**
   * Who may decide at a gate, and how many must: a rule per gate, keyed by a step's id (a review step, a step that waits for a confirmation or for answers) or by a gate kind (review, confirm, answers, budget: who may grant more with pipe budget); a step's own rule comes before its kind's. pipe review, pipe confirm, pipe answer and pipe budget refuse a person the rule does not name, a second vote by the same person, and (self_approval: false) the person who started the run; the gate opens when `required` distinct people approved, and a refusal (hold, drop, --no) decides at once. A person is PIPE_USER, else the repository's git user.email, else the OS user.
   */
  approvals?: {
    [k: string]: ApprovalRule | undefined
  }
  /**
   * Webhook targets for what pipe itself sends under the policy (an approvals rule's reminder), named by remind_target: shaped as a publish step's webhook target. The URL is read from url_env, never from the file.
   */
  targets?: {
    [k: string]: NotifyTarget | undefined
  }
  /**
   * Groups of people, named by an approvals rule's from as "@GROUP": each a list of person ids (PIPE_USER, a git user.email or an OS user).
   */
  people?: {
    [k: string]: string[] | undefined
  }
  /**
   * The keys whose attestations this team trusts (pipe attest verify --policy), each as pipe keys generate prints it.
   */
  attestation?: {
    trusted_keys?: {
      /**
       * sha256 of the raw 32-byte Ed25519 public key, sha256:HEX; must be public_key's.
       */
      id: string
      /**
       * Who or what holds the key (a person, a CI machine).
       */
      name: string
      /**
       * The raw 32-byte Ed25519 public key, base64 (standard, padded).
       */
      public_key: string
      /**
       * true: an attestation signed by this key is refused.
       */
      revoked?: boolean
    }[]
  }
}
export interface ConfirmRules {
  /**
   * Agent tool levels whose calls pause (default [dangerous]).
   */
  levels?: ('safe' | 'moderate' | 'dangerous')[]
  /**
   * Step kinds whose every step pauses before it acts, e.g. [publish].
   */
  kinds?: string[]
  /**
   * Patterns over the command line a step would run (its argument vector joined by single spaces; * matches any text, ? one character), e.g. "git push *", "rm -rf *". A step whose command matches pauses before it acts.
   */
  commands?: string[]
  /**
   * Seconds a person has to answer a pending confirmation. When they pass, on_timeout says what happens (by default the run stays paused and says so, and pipe confirm still answers it).
   */
  timeout_s?: number
  /**
   * What a passed timeout_s does: wait (default) keeps the run paused and says so; deny ends the confirmation as a refusal, as pipe confirm RUN --no would (the step gets the outcome denied, routed by its on:); cancel ends the run as cancelled. A worker serving the store, or the next pipe command that touches the run (runs show, resume, confirm, answer, review), applies it, recorded as the policy's.
   */
  on_timeout?: 'wait' | 'deny' | 'cancel'
  /**
   * Whether a command step whose command is destructive (the built-in list of docs/policy.md: rm, git push, git reset --hard, curl, npm publish, ...) waits for a person even though allowed_commands allows it: ask (default) or allow. A tools_preapproved entry that matches the command lifts it for that command.
   */
  destructive?: 'ask' | 'allow'
}
export interface ApprovalRule {
  /**
   * How many distinct people must approve (default 1); at least 1, at most as many as from names.
   */
  required?: number
  /**
   * Who may decide: person ids, and "@GROUP" for a group of people:.
   */
  from: string[]
  /**
   * false: the person who started the run may not approve it (a refusal stays theirs to give). Default true.
   */
  self_approval?: boolean
  /**
   * Seconds the gate waits for its votes (more than 0); then on_timeout acts. Absent: no deadline.
   */
  timeout_s?: number
  /**
   * What a passed timeout_s does: wait (default) keeps the run paused and says so; deny decides as a refusal would (a review: drop; a confirmation: --no; answers, which have no refusal: the run is cancelled); cancel ends the run as cancelled. A worker serving the store, or the next pipe command that touches the run, applies it, recorded as a decision by pipe naming the rule.
   */
  on_timeout?: 'wait' | 'deny' | 'cancel'
  /**
   * Seconds after the gate paused when the people who may still vote are reminded, once, through remind_target (more than 0; less than timeout_s when both are set).
   */
  remind_after_s?: number
  /**
   * The webhook under the policy's targets: the reminder goes through (needed with remind_after_s).
   */
  remind_target?: string
}
export interface NotifyTarget {
  type: 'webhook'
  /**
   * json: an event object (event: approval.reminder); slack: an incoming webhook's message.
   */
  format: 'json' | 'slack'
  /**
   * The environment variable holding the webhook URL (a secret: redacted wherever it would appear).
   */
  url_env: string
  /**
   * No answer by then: the reminder is tried again by the next command or worker that touches the run (default 10000).
   */
  timeout_ms?: number
}
