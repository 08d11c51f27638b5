/**
 * The one small interface every step kind implements. The engine knows no step by name: it calls
 * `run`, then records what the result says (outputs, a new spec version, evidence, a pause).
 */
import type {KindContract, StepKind, StepOf} from '../config/kind-contract.js'
import type {LoadedPipeline} from '../config/loaded.js'
import type {ErrorCode} from '../errors.js'
import type {JsonValue} from '../expr/index.js'
import type {LoadedPolicy} from '../policy/policy.js'
import type {Provider, SpecBody, Usage} from '../providers/types.js'
import type {ChatBudget} from '../providers/chat.js'
import type {CommandResult} from '../policy/exec.js'
import type {Evidence} from '../types/evidence.js'
import type {Pipeline, Step} from '../types/pipeline.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import type {Ledger} from '../store/file/ledger.js'
import type {ConfirmAction} from './confirm-action.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import type {StepOutputsRecord} from '../types/step-outputs.js'

// The kind contract's parts, for the kinds' modules (config/kind-contract.ts holds them).
export type {ChildPipelineRef, DeferredFields, FailureOutcome, KindFinding, StepKind, StepOf, WorkingTreeRole} from '../config/kind-contract.js'
/**
 * What a step of kind K returns as its outputs: the type generated from its declaration,
 * schemas/kinds/K.outputs.json. A handler returning a field its kind does not declare fails to
 * compile (and, built some other way, fails its step at run time: engine/outputs-check.ts).
 */
export type KindOutputs<K extends StepKind> = Extract<StepOutputsRecord, {kind: K}>['outputs']
// Every kind has its outputs declared: a kind without a schemas/kinds/KIND.outputs.json is a compile error here.
const everyKindDeclaresOutputs: [Exclude<StepKind, StepOutputsRecord['kind']>] extends [never] ? true : never = true
void everyKindDeclaresOutputs

export type EvidenceDraft = Omit<Evidence, 'evidence_id' | 'created_at' | 'record_hash'>

/** Read-only view of what the run has done so far. */
export interface RunHistory {
  readonly snapshots: readonly Snapshot[]
  /**
   * The newest value of an output key, if any step produced it. Steps do not call it with a key of
   * their own: they use the producing kind's typed reader (`gateResult.latest(history)`, see outputs.ts).
   */
  latestOutput<T = unknown>(key: string): T | undefined
  /**
   * The latest failure of the run that nothing recovered since (a step that ended with a failure
   * outcome, or an error its on.error routed), or null; a person's decision after it accepts it.
   */
  unrecoveredFailure(): {step: string; seq: number; outcome: string} | null
}

export interface StepContext<S extends Step = Step> {
  step: S
  pipeline: LoadedPipeline
  run: Readonly<RunRecord>
  /** The spec version the step reads (the run's latest), or null before any exists. */
  spec: CanonicalSpec | null
  history: RunHistory
  policy: LoadedPolicy
  provider(): Promise<Provider>
  /** The budgets over this step (its own, the pipeline's), for its model requests (modelCall); absent when none applies. */
  budget?: ChatBudget
  /** Working directory of the run: relative paths in steps resolve against it. */
  cwd: string
  signal: AbortSignal
  attempt: number
  now(): Date
  /** The OS user running pipe, for decisions made by a person. */
  user: string
  /** The publish ledger of the run's store. */
  ledger: Ledger
  /** Where processes sharing the store take command slots (resource_limits.max_concurrent_commands). */
  slotsDir: string
  /** Named points for the crash tests (see util/faults.ts). */
  hook: (point: string) => Promise<void> | void
  /**
   * The value of a YAML scalar in this step's expression context (inputs, steps, spec, run,
   * secrets, plus `aliases`): a whole `${{ }}` keeps its type, text around expressions gives a
   * string. The engine has already resolved the step's fields (see engine/expressions.ts
   * resolveStep); a kind calls this only for what it evaluates lazily (a choice's `when`s) or with
   * aliases (a foreach item). Throws ExpressionError (E_CONFIG).
   */
  render: (text: string, aliases?: Readonly<Record<string, unknown>>) => JsonValue
  /** Child runs of this step (pipeline, foreach): the engine creates, drives and finds them. */
  children: ChildRuns
  /**
   * The step's own working state, kept across a pause, a crash and a resume of this step run (same
   * step, same seq): an agent's conversation. Written atomically; undefined until first written.
   */
  state: StepState
  /**
   * Appends a line to the run's timeline now, while the step runs (an agent's tool calls): chained
   * and bound to the run record like every line. The timeline is a record for people and audits;
   * nothing a step appends there reaches a model request.
   */
  event(event: StepEvent): Promise<void>
}

/** A timeline line a step may append: what happened and its details (the engine stamps the step, seq and attempt). */
export type StepEvent = Omit<RunEvent, 'step' | 'seq' | 'attempt' | 'from' | 'to' | 'run_state' | 'prev' | 'hash' | 'by' | 'policy_version'> & {
  event: 'tool_call_request' | 'tool_call_result'
}

export interface StepState {
  read(): Promise<unknown>
  write(value: unknown): Promise<void>
  /**
   * The states of the earlier attempts of this step that a redrive ran again (oldest first): what
   * they did stays done, so a kind can tell which of its effects already happened.
   */
  earlier(): Promise<Array<{seq: number; state: unknown}>>
}

/** One tool call of an agent step, as its snapshot records it (schemas/snapshot.schema.json tool_calls). */
export type ToolCallRecord = NonNullable<Snapshot['tool_calls']>[number]

/** One child run a step asks for; `index` tells a foreach's items apart (absent for a pipeline step). */
export interface ChildRequest {
  /** The child pipeline's file, absolute; absent for the step's inline `steps:`. */
  file?: string
  /** Values for the child's declared inputs (checked against them; a list or map given to a string input becomes its JSON). */
  inputs: Record<string, JsonValue>
  index?: number
  /** What names the item for people (`fix-login`), shown beside its index in runs list and runs show. */
  key?: string
  /** Inline steps only: names their expressions read besides inputs, steps… (the foreach's alias bound to the item); recorded in the child's run. */
  aliases?: Record<string, JsonValue>
  /** Aborting it interrupts the child where it stands (pipe resume of the parent continues it). */
  signal?: AbortSignal
  /** How many children of the step may run at once (foreach's concurrency): held over every worker when children are queued (pipe worker). */
  concurrency?: number
}

/** Where a child run stands after the engine drove it as far as it goes. */
export interface ChildResult {
  run_id: string
  /** The child's run status: succeeded, failed, cancelled, blocked, awaiting_input or interrupted. */
  status: RunRecord['status']
  reason?: string
  /** The child's error, when it failed or is blocked. */
  error?: {code: string; message: string}
  /** The child's last snapshot's step and outcome (an end step's reason is `reason`). */
  last_step?: {id: string; outcome: string}
  /** The child's latest spec version, if it wrote one. */
  spec_version?: string | null
  /** The child pipeline's declared outputs, evaluated when it succeeded. */
  outputs?: Record<string, JsonValue>
}

export interface ChildRuns {
  /**
   * Runs the child for `request`, or continues the one this step already started for it (same
   * parent run, step, index, and the step's seq or one a redrive ran again): a finished child is
   * never run again. Resolves once the child finished or stopped.
   */
  run(request: ChildRequest): Promise<ChildResult>
  /** Ends a child that is not finished as cancelled (fail_fast); the parent's reason is its reason. */
  cancel(runId: string, reason: string): Promise<void>
  /**
   * The items whose child this step started and a person skipped since (pipe resume --skip), by
   * index: the step records them skipped, never runs them again, and ends their child runs.
   */
  skipped(): Promise<Map<number, SkippedChild>>
}

/** A child run a person skipped: who, when, why, and whether the items that depend on it run. */
export interface SkippedChild {
  run_id: string
  by: string
  at: string
  note: string
  run_dependents: boolean
}

export interface PersonDecision {
  by: string
  at: string
  note?: string
}

/**
 * The step ran to an outcome; the engine writes its snapshot (and spec version, and evidence).
 * `O` is the kind's declared outputs (KindOutputs); the engine reads them as a plain record.
 */
export interface StepDone<O extends object = Record<string, unknown>> {
  type: 'done'
  outcome: string
  /** Why the step ended with this outcome; becomes the reason of the snapshot's decision. */
  reason: string
  inputs?: Record<string, unknown>
  outputs: O
  /** A new spec version to write (only for kinds that change the spec). */
  spec?: {body: SpecBody; status: CanonicalSpec['meta']['status']; title?: string; missing_fields?: string[]}
  evidence?: Array<EvidenceDraft & {link?: 'quote' | 'partial_success' | 'file' | 'doc' | 'log' | 'api_result' | 'repo'}>
  /** A decision a person made in this step. */
  person?: PersonDecision
  /** After the snapshot, wait again at this step (a review on hold). */
  hold?: {reason: string}
  /** After the snapshot, end the run as cancelled (a review that said drop, an end step). */
  cancel?: {reason: string}
  /** The step chose the next step itself (a choice); it wins over next: and on:. */
  next?: string
  /**
   * After the snapshot, end the run with this status whatever the routes say (an end step).
   * failed ends it with `code`; blocked stops it until pipe resume, which runs the step again.
   */
  end?: {status: 'succeeded' | 'failed' | 'blocked'; reason: string; code?: ErrorCode; hint?: string}
  llmModel?: string | null
  /** Tokens the step's model calls used. */
  usage?: Usage
  /** An agent's tool calls, recorded in the snapshot's tool_calls. */
  toolCalls?: ToolCallRecord[]
}

/** The step cannot start yet: it needs something from a person. Nothing is recorded but the pause. */
export interface StepAwait {
  type: 'await'
  kind: 'answers' | 'review' | 'confirm' | 'budget'
  reason: string
  /** For a budget pause: the budget that would be passed and what was spent (engine/budget.ts). */
  budget?: NonNullable<RunRecord['pending']>['budget']
  questions?: Array<{id: string; field?: string; question: string}>
  /** For a confirm: the exact tool call waiting for a person. */
  action?: NonNullable<RunRecord['pending']>['action']
}

export type StepResult<O extends object = Record<string, unknown>> = StepDone<O> | StepAwait

/**
 * What `pipe export` writes from a kind's snapshots (seed 004's layout). Coding steps are grouped
 * into tasks and attempts: `attempt` says how a snapshot of the kind joins them.
 */
export interface ExportRole {
  /**
   * `starts`: each snapshot starts a new attempt of its task (an edit); `joins`: it joins the
   * task's current attempt (a command); `once`: it joins, unless the attempt already has a
   * snapshot of this kind, then it starts a new one (a second QA run is a new attempt).
   * Absent: the kind takes no part in attempts.
   */
  attempt?: 'starts' | 'joins' | 'once'
  /** What the snapshot adds to its attempt's directory. */
  files?(snapshot: Snapshot, where: {task: string}): ExportFiles
  /** The commit the snapshot left the workspace at (state.json's last_commit_hash). */
  commit?(snapshot: Snapshot): string | undefined
  /** Extra parts of the snapshot's timeline entry. */
  timeline?(snapshot: Snapshot): string[]
  /** What the snapshot adds to `pipe stats`: the size of the patch it made, the QA it ran. */
  metrics?(snapshot: Snapshot): SnapshotMetrics
}

export interface SnapshotMetrics {
  /** Lines the snapshot's patch changed (removed plus added). */
  patch_lines?: number
  /** A failure outside QA and its category (a failed edit: patch_apply_fail), counted with QA's. */
  failure?: string
  /** A QA run: its verdict and how long it took. */
  qa?: {status: 'pass' | 'fail'; category: string | null; duration_ms: number}
}

export interface ExportFiles {
  /** Files by name; a string is written as it is, anything else as pretty JSON. */
  files?: Record<string, unknown>
  /** Command results, each written as the attempt's next numbered log (qa_step_NN_LABEL.log). */
  logs?: Array<{label: string; result: CommandResult}>
  /** A QA verdict: the attempt's verdict.json, and the run's when it is the last one. */
  verdict?: unknown
}

/** An in-toto ResourceDescriptor of something a run made: a file by its path in the repository and its sha256, or a commit by its gitCommit. */
export interface AttestSubject {
  name: string
  digest: {sha256: string} | {gitCommit: string}
}

/** What `pipe replay --check` recomputes for a kind whose result is a pure function of the spec. */
export interface ReplayRole<K extends StepKind> {
  /** What the snapshot recorded, which the replay must reproduce byte for byte. */
  recorded(snapshot: Snapshot): unknown
  /** The same result, computed again from the spec version the step read. */
  recompute(step: StepOf<K>, spec: CanonicalSpec, pipeline: Pipeline): unknown
}

/**
 * A kind: its contract (config/kind-contract.ts: outcomes, routes, checks, what validate and the
 * graph know of it) and what only a run needs. One object per kind, in its module.
 */
export interface StepHandler<K extends StepKind> extends KindContract<K> {
  /** Whether only a real model can run it: the offline rules provider fails it with E_CONFIG (a dry run warns). */
  needsModel?: boolean
  /**
   * Whether its result is a function of its resolved config, the spec, the run's earlier snapshots
   * and its model replies alone, with no effect outside the run: `pipe replay --check` runs it again
   * answered only by the store's reply cache and compares the result.
   */
  rerunsFromReplies?: boolean
  /** The argument vectors it will run, with their place in the step, for checks against a policy before a run. */
  commands?(step: StepOf<K>): Array<{argv: readonly string[]; at: Array<string | number>}>
  /** Whether running it twice does no harm, so it may be retried after a retryable error. */
  safeToRetry: boolean
  /**
   * Whether it waits for child runs (pipeline, foreach): the policy's step_timeout_ms does not
   * bound it (each child step has its own); only the step's own timeout_ms does.
   */
  waitsForChildren?: boolean
  /** What a person gives it that it may pause the run for: answers, a review decision, a confirmation (`pipe run --dry-run` says so). */
  waitsFor?: 'answers' | 'review' | 'confirm'
  /** Whether it reads the run's requirement (--input/--text); a run of such a pipeline needs one. */
  readsInput?: boolean
  /** What `pipe export` writes from its snapshots. */
  exportRole?: ExportRole
  /** The publish-ledger keys a snapshot of this kind records as delivered (audit verify checks each has its entry). */
  deliveredKeys?(snapshot: Snapshot): readonly string[]
  /** What `pipe replay --check` recomputes and compares. */
  replay?: ReplayRole<K>
  /** What a snapshot of the kind made that leaves the run (a file written, a spec published, a commit), each by digest: the subjects of `pipe attest`. */
  attestSubjects?(snapshot: Snapshot): AttestSubject[]
  /**
   * For a kind that pauses for a confirmation: the action a resume with its saved state would run
   * now (null: none), which pipe confirm compares with the one the person was shown.
   */
  pendingAction?(state: unknown, where: {policy: LoadedPolicy; cwd: string}): Promise<ConfirmAction | null>
  run(context: StepContext<StepOf<K>>): Promise<StepResult<KindOutputs<K>>>
}

/** One handler per kind; a kind in the schema without a handler here fails to compile. */
export type StepRegistry = {readonly [K in StepKind]: StepHandler<K>}

/** Whether this step, run successfully, writes a new spec version. */
export function changesSpec<K extends StepKind>(handler: StepHandler<K>, step: StepOf<K>): boolean {
  return typeof handler.changesSpec === 'function' ? handler.changesSpec(step) : handler.changesSpec
}
