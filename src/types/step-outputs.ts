/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * What each step kind records as its snapshot's outputs (steps.<id>.outputs), keyed by kind. Composed by the build (scripts/compose-schemas.mjs) from schemas/kinds/KIND.outputs.json and this file; do not edit schemas/step-outputs.schema.json by hand.
 */
export type StepOutputsRecord =
  | {
      kind: 'ingest'
      outputs: IngestOutputs
    }
  | {
      kind: 'compile'
      outputs: CompileOutputs
    }
  | {
      kind: 'clarify_questions'
      outputs: ClarifyQuestionsOutputs
    }
  | {
      kind: 'apply_answers'
      outputs: ApplyAnswersOutputs
    }
  | {
      kind: 'plan_tasks'
      outputs: PlanTasksOutputs
    }
  | {
      kind: 'generate_vv'
      outputs: GenerateVvOutputs
    }
  | {
      kind: 'gate'
      outputs: GateOutputs
    }
  | {
      kind: 'review'
      outputs: ReviewOutputs
    }
  | {
      kind: 'publish'
      outputs: PublishOutputs
    }
  | {
      kind: 'noop'
      outputs: NoopOutputs
    }
  | {
      kind: 'command'
      outputs: CommandOutputs
    }
  | {
      kind: 'qa'
      outputs: QaOutputs
    }
  | {
      kind: 'git'
      outputs: GitOutputs
    }
  | {
      kind: 'edit'
      outputs: EditOutputs
    }
  | {
      kind: 'write'
      outputs: WriteOutputs
    }
  | {
      kind: 'model'
      outputs: ModelOutputs
    }
  | {
      kind: 'choice'
      outputs: ChoiceOutputs
    }
  | {
      kind: 'end'
      outputs: EndOutputs
    }
  | {
      kind: 'pipeline'
      outputs: PipelineOutputs
    }
  | {
      kind: 'foreach'
      outputs: ForeachOutputs
    }
  | {
      kind: 'agent'
      outputs: AgentOutputs
    }
  | {
      kind: 'context'
      outputs: ContextOutputs
    }
/**
 * Citations a model gave that pipe could not find in the source, dropped.
 */
export type Citations = {
  spec_path?: string
  excerpt?: string
  note?: string
  question_id?: string
}[]

export interface IngestOutputs {
  ingest_result?: {
    source_ref?: string
    source_kind?: string
    sha256?: string
    bytes?: number
    chars?: number
    lines?: number
    language?: string
    text?: string
  }
}
export interface CompileOutputs {
  missing_fields?: string[]
  counts?: {
    features?: number
    acceptance_criteria?: number
    non_functional?: number
    constraints?: number
  }
  citations_dropped?: Citations
}
export interface ClarifyQuestionsOutputs {
  questions?: {
    id?: string
    field?: string
    question?: string
  }[]
  round?: number
}
export interface ApplyAnswersOutputs {
  applied?: {
    question_id?: string
    field?: string
    key?: string
  }[]
  citations_dropped?: Citations
}
export interface PlanTasksOutputs {
  tasks?: {
    id?: string
    title?: string
    type?: string
    depends_on?: string[]
  }[]
  uncovered_acceptance_criteria?: string[]
}
export interface GenerateVvOutputs {
  vv?: {
    id?: string
    kind?: string
    method?: string
    acceptance_criteria?: string[]
  }[]
  uncovered_acceptance_criteria?: string[]
}
export interface GateOutputs {
  gate_result?: {
    pass?: boolean
    missing_fields?: string[]
    completeness_score?: number
    completeness_threshold?: number
    [k: string]:
      | (
          | {
              pass?: boolean
              missing_fields?: string[]
              failed_rules?: unknown[]
            }
          | boolean
          | string[]
          | number
        )
      | undefined
  }
}
export interface ReviewOutputs {
  review_decision?: 'go' | 'hold' | 'drop'
  reviewed_version?: string
  gate_pass?: boolean | null
  summary?: {
    features?: number
    acceptance_criteria?: number
    tasks?: number
    vv?: number
  }
}
export interface PublishOutputs {
  publish_result?: {
    target?: string
    type?: string
    key?: string
    status?: 'published' | 'already_published'
    external_id?: string
    attempts?: number
  }[]
}
export interface NoopOutputs {}
/**
 * A command step's result. With parse: lines, json or text, stdout parsed as that field too: lines (its non-empty lines), json (any JSON value) or text (the whole stdout); only that one of the three is there, and it is null when the command failed and printed more than the policy keeps.
 */
export interface CommandOutputs {
  exit_code?: number | null
  stdout?: string
  stderr?: string
  duration_ms?: number
  command?: CommandResult
  lines?: string[] | null
  json?: unknown
  text?: string | null
}
/**
 * One command as run: its argument vector, where, how it ended and what it printed (policy/exec.ts).
 */
export interface CommandResult {
  argv?: string[]
  cwd?: string
  exit_code?: number | null
  signal?: string | null
  timed_out?: boolean
  duration_ms?: number
  stdout?: CapturedOutput
  stderr?: CapturedOutput
  spawn_error?: string
  /**
   * How the command was contained (policy sandbox); warning says why it ran less contained than the policy asks.
   */
  sandbox?: {
    mode?: 'required' | 'auto' | 'off'
    contained?: boolean
    network?: boolean
    limits?: {
      memory_mb?: number
      cpu_seconds?: number
      max_processes?: number
      max_file_bytes?: number
    }
    processes_by?: 'rlimit' | 'cgroup' | 'none'
    warning?: string
  }
  /**
   * The output streams stayed open after the command ended and were cut.
   */
  output_cut?: boolean
}
/**
 * A command's stdout or stderr as recorded: its head and tail, and how much lay between them.
 */
export interface CapturedOutput {
  head?: string
  tail?: string
  omitted_bytes?: number
  total_bytes?: number
}
export interface QaOutputs {
  verdict?: {
    status?: 'pass' | 'fail'
    failed_stage?: 'static' | 'tests' | 'acceptance' | null
    error_category?: string | null
    top_errors?: string[]
    log_lines?: string[]
    files_to_read?: string[]
    command?: string[] | null
    full_logs?: string[]
  }
  stages?: {
    stage?: string
    commands?: CommandResult[]
  }[]
}
export interface GitOutputs {
  checkpoint?: {
    commit?: string
    parent?: string | null
    branch?: string
    files?: string[]
    empty?: boolean
  }
  rollback?: {
    from?: string | null
    to?: string
    files?: string[]
  }
}
export interface EditOutputs {
  edit?: {
    changed_lines?: number
  }
}
export interface WriteOutputs {
  path?: string
  sha256?: string
  bytes?: number
  mode?: 'create' | 'overwrite' | 'append'
}
/**
 * A model step's reply. value matches the step's own output_schema, which pipe validate reads to type steps.<id>.outputs.value.
 */
export interface ModelOutputs {
  value: unknown
}
export interface ChoiceOutputs {
  /**
   * The step the choice went to: one of its choices' next or its default.
   */
  chosen?: string
  matched?: number | null
  condition?: string
}
export interface EndOutputs {
  status?: 'succeeded' | 'failed' | 'blocked' | 'cancelled'
  reason?: string
}
/**
 * A pipeline step's child run: its id, status (a run's status), reason, last step, spec version and declared outputs.
 */
export interface PipelineOutputs {
  run_id?: string
  status?: 'succeeded' | 'failed' | 'cancelled' | 'blocked' | 'awaiting_input' | 'interrupted' | 'pending' | 'running'
  reason?: string
  last_step?: {
    id?: string
    outcome?: string
  } | null
  spec_version?: string | null
  /**
   * The child run's declared outputs (its pipeline's outputs:) when it succeeded; null when it did not.
   */
  outputs?: {} | null
}
/**
 * A foreach step's items, one per element of its list: each child run's id, status, reason (not_started: never run; skipped: a person skipped it) and declared outputs (null unless it succeeded), and the counts.
 */
export interface ForeachOutputs {
  items?: {
    index?: number
    key?: string
    run_id?: string | null
    status?:
      | 'succeeded'
      | 'failed'
      | 'cancelled'
      | 'blocked'
      | 'skipped'
      | 'awaiting_input'
      | 'interrupted'
      | 'pending'
      | 'running'
      | 'not_started'
    reason?: string
    blocked_by?: string
    /**
     * The child run's declared outputs (its pipeline's outputs:) when it succeeded; null when it did not, or was not run.
     */
    outputs?: {} | null
  }[]
  succeeded?: number
  failed?: number
  cancelled?: number
  blocked?: number
  /**
   * Items a person skipped (pipe resume RUN --skip KEY); present when there are any.
   */
  skipped?: number
  total?: number
}
/**
 * What an agent step recorded. value is its answer: a string, or what its output_schema declares.
 */
export interface AgentOutputs {
  value: unknown
  summary: string
  files_changed: string[]
  turns: number
  tool_calls: number
  patch?: string
  attempt?: number
}
export interface ContextOutputs {
  /**
   * The context as a model is shown it: the tree, the files, the history, and what was cut.
   */
  text?: string
  /**
   * sha256 of text (the evidence's source.hash).
   */
  hash?: string
  bytes?: number
  /**
   * Estimated tokens of text (4 bytes a token).
   */
  tokens?: number
  budget_bytes?: number
  tree?: {
    total?: number
    listed?: number
  }
  /**
   * Every file chosen for its content: its path, size and sha256 as found, and how much of it is shown.
   */
  files?: {
    path?: string
    bytes?: number
    sha256?: string
    shown_bytes?: number
    cut?: 'none' | 'truncated' | 'omitted'
    why?: string
    redacted?: boolean
  }[]
  history?: {
    commits?: number
    shown?: number
  }
  /**
   * What was left out to fit the budget, one line each (also at the end of text).
   */
  cut?: string[]
}
