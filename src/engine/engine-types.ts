/**
 * What callers of the engine see: the dependencies it is built with, the settings of a run it
 * starts or resumes, the outcome it returns and the progress it reports. Kept apart from the
 * engine's code so the commands and use cases that only read these import no machinery.
 */
import type {SkipRequest} from './tasks.js'
import type {LoadedPipeline} from '../config/pipeline.js'
import type {LoadedPolicy} from '../policy/policy.js'
import type {ModelCall} from '../providers/reply-transport.js'
import type {Provider} from '../providers/types.js'
import type {StepEvent, StepRegistry} from '../steps/types.js'
import type {RunStore} from '../store/types.js'
import type {ProviderSettings} from '../types/pipeline.js'
import type {RunRecord, RunStatus, SignedDecision} from '../types/run.js'
import type {RunBirth} from './run-record.js'
import type {BudgetParent} from './budget.js'

export type ProgressEvent = (
  | {type: 'step_start'; run_id: string; step: string; kind: string; seq: number; attempt: number}
  | {type: 'step_retry'; run_id: string; step: string; seq: number; attempt: number; delay_ms: number; error: string}
  | {
      type: 'step_end'
      run_id: string
      step: string
      kind: string
      seq: number
      outcome: string
      /** Whether the step returned a result (false: it threw, the outcome is `error`). */
      ok: boolean
      /** Whether the outcome is a failure: one the kind declares a failure (routed or not), or an error. */
      failure: boolean
      duration_ms: number
      reason: string
      spec_version_out: string | null
    }
  | {type: 'run_status'; run_id: string; status: RunStatus; reason?: string}
  | {type: 'step_event'; run_id: string; step: string; seq: number; event: StepEvent}
) & {
  /** Set for a child run's events: the steps that ran it, outermost first, each as `id` or `id[item index]` (`each[2]`). */
  under?: string[]
}

export interface EngineDeps {
  store: RunStore
  /** Creates the model provider on first use, so runs without model steps never load one. */
  provider: () => Promise<Provider>
  /** What answered each model request a step made (live, a cassette, the reply cache), taken into its snapshot. */
  replies?: {take(run: string, step: string): ModelCall[]}
  registry?: StepRegistry
  now?: () => Date
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
  /** Source of the backoff jitter, a number in [0, 1). */
  random?: () => number
  onProgress?: (event: ProgressEvent) => void
  /** Aborted on SIGINT/SIGTERM: the current step is abandoned and the run marked interrupted. */
  signal?: AbortSignal
  user?: string
  /** Where the person whose input a resume takes gave it, when not on the command line (pipe view's page): recorded beside `by`. */
  via?: 'view'
  /** Test-only: called at named points so fault-injection tests can kill the process there. */
  hook?: (point: string) => Promise<void> | void
  /** Write seed 004's artifacts for every run this engine drives (set for the children of a run whose pipeline says artifacts: true). */
  artifacts?: boolean
  /** Who drives a step's child runs when not this engine: set by pipe worker on a PostgreSQL store, where each child is a job of the queue. */
  children?: ChildDispatch
  /**
   * What a run paused for a person runs with, read from its files by the app layer: a cancel of
   * such a run (by hand, as a parent's child, by fail_fast) records the step it waits at as
   * cancelled. Without it, or when it gives nothing, the run ends without that snapshot.
   */
  waitingSettings?: (record: RunRecord) => Promise<RunSettings | undefined>
}

/**
 * Child runs driven elsewhere (pipe worker): each child is queued as a job of its own, and the
 * parent's step waits for it. The engine decides what a child is (its key, its birth record, which
 * one a re-entered step continues); this decides only who drives it.
 */
export interface ChildDispatch {
  /**
   * Queues the child, created from `birth` unless it exists, once its step has fewer than `limit`
   * children queued (over every worker); resolves with its id when it has stopped (ended or waits
   * for a person), or when `signal` aborts (then where it stands, or, when it was not queued yet,
   * created without being queued).
   */
  drive(child: {birth: RunBirth} | {runId: string}, limit: number, signal: AbortSignal | undefined): Promise<string>
  /** Ends a child as cancelled: its holder stops it at its next heartbeat or commit, or `here` cancels it when nobody holds it; resolves once it has ended. */
  cancel(runId: string, reason: string, here: () => Promise<void>): Promise<void>
}

export interface RunSettings {
  pipeline: LoadedPipeline
  policy: LoadedPolicy
  cwd: string
  /** A child run's parent's provider.prices, for its own snapshots' cost when its pipeline gives none (the model is the parent's too). */
  inheritedPrices?: NonNullable<ProviderSettings['prices']>
  /** A child run's parents, nearest first: their budgets (their pipelines' and the steps that started the children) bound its model requests too. */
  budgetParents?: readonly BudgetParent[]
  /** Where the pipeline's secrets are read from (pipe test gives each test its own); process.env when absent. Never recorded. */
  env?: NodeJS.ProcessEnv
}

/**
 * The settings of a new run: built once by its session (app/sessions/prepare.ts, from what the
 * command was given) and passed down as they are, to Engine.start or, for a run queued for a
 * worker, to birthOf (run-record.ts); the field names are NewRun's.
 */
export interface StartOptions extends RunSettings {
  input: RunRecord['input']
  /** The pipeline's typed inputs, resolved and checked; recorded in run.json for resume and replay. */
  inputs?: NonNullable<RunRecord['inputs']>
  provider: RunRecord['provider']
  featureId?: string
  answers?: Record<string, string>
  review?: {decision: 'go' | 'hold' | 'drop'; note?: string}
  replayOf?: RunRecord['replay_of']
  /** The declared tools' versions as measured for this run (policy/tool-versions.ts). */
  toolVersions?: NonNullable<RunRecord['tool_versions']>
  /** Seed 002's Project Context Ref (pipe run --context-ref). */
  contextRef?: NonNullable<RunRecord['context_ref']>
  /** Who started the run, when the policy has approvals rules (self_approval: false refuses them). */
  startedBy?: NonNullable<RunRecord['started_by']>
}

export interface ResumeOptions extends RunSettings {
  answers?: Record<string, string>
  review?: {decision: 'go' | 'hold' | 'drop'; note?: string}
  /** A person's yes or no to the tool call the run waits at (pipe confirm). */
  confirm?: {
    decision: 'yes' | 'no'
    note?: string
    /** The call the answer is for; another pending call is E_STATE. */
    call_id?: string
    /** What the answer covers: this call (default), every confirmation of the step, or of the run (pipe confirm --for). */
    scope?: 'call' | 'step' | 'run'
  }
  /** A person went on with the run's replayed cassette as it is now, although it changed (--accept-cassette). */
  acceptCassette?: {file: string; previous_sha256: string; sha256: string}
  /** Tasks of a blocked run a person leaves out (pipe resume --skip KEY --note TEXT). */
  skip?: SkipRequest
  /** A raise of the budget a run paused at (pipe budget RUN --add-tokens N | --add-usd X). */
  budgetGrant?: {tokens?: number; usd?: number; note?: string}
  /** The person's signature over this decision (app/sessions/vote.ts castVote): kept on its timeline line. */
  signed?: SignedDecision
}

export interface RunOutcome {
  run_id: string
  feature_id: string
  status: RunStatus
  spec_version: string | null
  steps_run: number
  /** The policy file the run is under (absolute), or null for the built-in policy. */
  policy?: string | null
  reason?: string
  pending?: RunRecord['pending']
  error?: RunRecord['error']
  /** For a failed run: whether pipe resume can redrive it (a step failed; not a loop bound, an end step or a handled failure). */
  redrivable?: boolean
  /** The run was handed to the workers of a shared store on this queue, not driven in this process (a detached run). */
  queued?: string
}
