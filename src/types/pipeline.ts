/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "step".
 */
export type Step =
  | IngestStep
  | CompileStep
  | ClarifyQuestionsStep
  | ApplyAnswersStep
  | PlanTasksStep
  | GenerateVvStep
  | GateStep
  | ReviewStep
  | PublishStep
  | NoopStep
  | CommandStep
  | QaStep
  | GitStep
  | EditStep
  | WriteStep
  | ModelStep
  | ChoiceStep
  | EndStep
  | PipelineStep
  | ForeachStep
  | AgentStep
  | ContextStep
/**
 * Reads the run's input (--input FILE, --input - for stdin, or --text), normalises it and records it as evidence.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "ingestStep".
 */
export type IngestStep = StepCommon & {
  kind: 'ingest'
  /**
   * Largest input accepted, in bytes (default 1 MiB).
   */
  max_bytes?: number
}
/**
 * A step id: lower case letters, digits and underscores, starting with a letter.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "stepId".
 */
export type StepId = string
/**
 * What the step does. Each kind has its own fields besides the common ones; pipe graph and the README list them.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "stepKind".
 */
export type StepKind =
  | 'ingest'
  | 'compile'
  | 'clarify_questions'
  | 'apply_answers'
  | 'plan_tasks'
  | 'generate_vv'
  | 'gate'
  | 'review'
  | 'publish'
  | 'noop'
  | 'command'
  | 'qa'
  | 'git'
  | 'edit'
  | 'write'
  | 'model'
  | 'choice'
  | 'end'
  | 'pipeline'
  | 'foreach'
  | 'agent'
  | 'context'
/**
 * A condition: one ${{ expression }} that gives a boolean. When it is false the step does not run; its snapshot records the outcome skipped and the run follows on.skipped, else next.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "condition".
 */
export type Condition = string
/**
 * The id of another step of this pipeline.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "stepRef".
 */
export type StepRef = string
/**
 * One ${{ expression }} that gives an integer, checked when validate can type it and again when it is evaluated.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "intExpression".
 */
export type IntExpression = string
/**
 * Compiles the ingested input, and the previous spec version when looping, into a new spec version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "compileStep".
 */
export type CompileStep = StepCommon & {
  kind: 'compile'
  prompt?: ModelPrompt
}
/**
 * A prompt file, relative to the pipeline file, used when the step runs on a model.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "modelPrompt".
 */
export type ModelPrompt = string
/**
 * Asks one question for each missing field of the latest gate result. Never writes a spec version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "clarifyQuestionsStep".
 */
export type ClarifyQuestionsStep = StepCommon & {
  kind: 'clarify_questions'
  prompt?: ModelPrompt
  max_questions?: number
}
/**
 * Applies the answers to the open questions to the spec, writing a new version. Pauses the run when answers are missing.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "applyAnswersStep".
 */
export type ApplyAnswersStep = StepCommon & {
  kind: 'apply_answers'
  prompt?: ModelPrompt
}
/**
 * Derives tasks, each with a definition of done, from the features and acceptance criteria, writing a new version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "planTasksStep".
 */
export type PlanTasksStep = StepCommon & {
  kind: 'plan_tasks'
  prompt?: ModelPrompt
}
/**
 * Derives verification and validation items linked to acceptance criteria and tasks, writing a new version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "generateVvStep".
 */
export type GenerateVvStep = StepCommon & {
  kind: 'generate_vv'
  prompt?: ModelPrompt
}
/**
 * Evaluates named gates and the completeness score against the current spec. Outcome pass or fail. Never writes a spec version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "gateStep".
 */
export type GateStep = StepCommon & {
  kind: 'gate'
  /**
   * @minItems 1
   */
  gates: [string, ...string[]]
  /**
   * Whether the pipeline's completeness score takes part (default: when the pipeline defines one).
   */
  completeness?: boolean
}
/**
 * A person decides go, hold or drop. go continues, hold keeps the run waiting, drop cancels it. Never writes a spec version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "reviewStep".
 */
export type ReviewStep = StepCommon & {
  kind: 'review'
}
/**
 * Publishes the current spec version to its targets once a review said go. Never writes a spec version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "publishStep".
 */
export type PublishStep = StepCommon & {
  kind: 'publish'
  /**
   * Refuse to publish unless the run's latest review decision is go (default true).
   */
  require_review?: boolean
  /**
   * @minItems 1
   */
  targets: [PublishTarget, ...PublishTarget[]]
}
/**
 * Where a publish step sends the reviewed spec.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "publishTarget".
 */
export type PublishTarget = FileTarget | WebhookTarget
/**
 * Does nothing but record a snapshot; a placeholder while a pipeline is drafted, or a join point. Its outcome is success unless outcome names another.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "noopStep".
 */
export type NoopStep = StepCommon & {
  kind: 'noop'
  outcome?: OutcomeName
  /**
   * Wait this long before finishing (useful to rehearse timeouts).
   */
  sleep_ms?: number
}
/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "outcomeName".
 */
export type OutcomeName = string
/**
 * Runs one command the policy allows, in the repository root, without a shell. Outcome success when it exits 0, failure otherwise.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "commandStep".
 */
export type CommandStep = StepCommon & {
  kind: 'command'
  run: Argv
  /**
   * Working directory relative to the repository root.
   */
  cwd?: string
  /**
   * Extra environment variables; the command otherwise sees only PATH, HOME, locale and the like.
   */
  env?: {
    [k: string]: string | undefined
  }
  /**
   * Kill the command's whole process tree after this long (default: the policy's command_timeout_ms).
   */
  command_timeout_ms?: number
  /**
   * Also parse stdout into outputs: lines (outputs.lines, a list of non-empty lines), json (outputs.json, the parsed value; invalid JSON fails the step) or text (outputs.text, the whole stdout).
   */
  parse?: 'lines' | 'json' | 'text'
}
/**
 * A command as an argument vector: the program, then each argument. No shell: ; | $( ) and backticks are plain characters.
 *
 * @minItems 1
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "argv".
 */
export type Argv = [string, ...string[]]
/**
 * Layered QA (seed 004): static checks, then tests, then acceptance commands; stops at the first failing stage and gives a verdict. Outcome pass or fail.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "qaStep".
 */
export type QaStep = StepCommon & {
  kind: 'qa'
  /**
   * The task this QA checks, for the export layout.
   */
  task?: string
  /**
   * The commands of each stage, as argument vectors; or one ${{ expression }} that gives such a mapping (a task's definition of done), resolved when the step runs and checked against the policy then.
   */
  stages:
    | {
        static?: Argv[]
        tests?: Argv[]
        acceptance?: Argv[]
      }
    | string
  command_timeout_ms?: number
}
/**
 * checkpoint commits the workspace (a named point to return to); rollback returns to a checkpoint. The commit hashes go into the snapshot.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "gitStep".
 */
export type GitStep = StepCommon & {
  kind: 'git'
  action: 'checkpoint' | 'rollback'
  /**
   * Commit message of a checkpoint (default: pipe: RUN STEP).
   */
  message?: string
  /**
   * checkpoint: include uncommitted changes instead of refusing a dirty tree (default false).
   */
  allow_dirty?: boolean
  /**
   * checkpoint: commit on the branch pipe/RUN instead of the current branch.
   */
  branch?: boolean
  /**
   * The id of another step of this pipeline.
   */
  to?: string
}
/**
 * Applies SEARCH/REPLACE blocks to files of the repository: all of them or none. Paths must stay inside the repository root and outside forbidden_paths.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "editStep".
 */
export type EditStep = StepCommon & {
  kind: 'edit'
  /**
   * The task this edit works on, for the export layout.
   */
  task?: string
  /**
   * The edit: for each block, the file path, <<<<<<< SEARCH, old lines, =======, new lines, >>>>>>> REPLACE.
   */
  blocks?: string
  /**
   * A file with the blocks, relative to the pipeline file.
   */
  blocks_file?: string
}
/**
 * Writes one file of the repository from a template (content) or a value (value + format), and records its sha256 as evidence. The path must stay inside the repository root, outside forbidden_paths, .git and pipe's store, and lead through no symlink.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "writeStep".
 */
export type WriteStep = StepCommon & {
  kind: 'write'
  /**
   * The file, relative to the repository root (the run's workspace); may hold ${{ }} expressions.
   */
  path: string
  /**
   * The text to write, as it is; may hold ${{ }} expressions (a value inside a longer text is stringified). Give content or value, not both.
   */
  content?: string
  /**
   * A value to write in `format` (a whole ${{ }} keeps its type: a list or a map). Give content or value, not both.
   */
  value?: {
    [k: string]: unknown | undefined
  }
  /**
   * How value is written: json (pretty, the default), yaml, or text / markdown (value must be a string, written as it is).
   */
  format?: 'json' | 'yaml' | 'text' | 'markdown'
  /**
   * create (the default): fail with outcome `exists` (E_CONFLICT) if the file exists; overwrite: replace it atomically; append: add to its end (creating it if missing).
   */
  mode?: 'create' | 'overwrite' | 'append'
}
/**
 * A model step of your own: fills the prompt file's {{name}} placeholders from vars, asks the model for JSON matching output_schema (bounded repairs, then E_MODEL), and records the valid reply as outputs.value; with spec_path it also writes the reply into the spec as a new version.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "modelStep".
 */
export type ModelStep = StepCommon & {
  kind: 'model'
  /**
   * The prompt file, relative to the pipeline file: Markdown with {{name}} placeholders, each filled from vars.
   */
  prompt: string
  /**
   * Values for the prompt's {{name}} placeholders. Strings go in as they are, numbers and booleans as written, null as nothing, lists and maps as indented JSON. Every placeholder must have a var (pipe validate checks it).
   */
  vars?: {
    [k: string]: unknown | undefined
  }
  /**
   * A JSON Schema file (draft-07, or 2019-09/2020-12 by its $schema), relative to the pipeline file, with an object at its root. The reply must validate against it; an invalid reply is sent back with its errors up to max_repairs times, then the step fails with E_MODEL. The valid reply is the step's outputs.value.
   */
  output_schema: string
  /**
   * Write the reply into the spec as a new immutable version, at this dotted path under the spec's sections (release_notes writes sections.release_notes). The core fields and meta are written only by the built-in kinds.
   */
  spec_path?: string
  /**
   * The model for this step, instead of provider.model.
   */
  model?: string
  /**
   * Sampling temperature for this step, instead of provider.temperature.
   */
  temperature?: number
  /**
   * How many times an invalid reply is sent back for repair (default: provider.repair_attempts, else 2).
   */
  max_repairs?: number
}
/**
 * Routes the run: the first of choices whose when holds names the next step, else default. Its outcome is the id of the step it chose.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "choiceStep".
 */
export type ChoiceStep = StepCommon & {
  kind: 'choice'
  /**
   * Tried in order: the first whose when holds names the next step.
   *
   * @minItems 1
   * @maxItems 100
   */
  choices: [
    {
      when: Condition
      next: StepRef
    },
    ...{
      when: Condition
      next: StepRef
    }[]
  ]
  /**
   * The id of another step of this pipeline.
   */
  default: string
}
/**
 * Ends the run with a status and a reason, whatever comes after it.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "endStep".
 */
export type EndStep = StepCommon & {
  kind: 'end'
  /**
   * How the run ends: succeeded, failed (error E_ENDED, exit 1), blocked (exit 6; pipe resume continues at next) or cancelled (exit 5).
   */
  status: 'succeeded' | 'failed' | 'blocked' | 'cancelled'
  /**
   * Why, recorded on the run and printed; may hold ${{ }} expressions.
   */
  reason?: string
}
/**
 * Runs another pipeline as one step: a child run in the same store (own run id, snapshots and loop counters) whose final status is the outcome: success, fail, or blocked (the child waits for a person; pipe resume of this run continues it).
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "pipelineStep".
 */
export type PipelineStep = StepCommon & {
  kind: 'pipeline'
  /**
   * The child pipeline's file, relative to the file that holds this step.
   */
  file: string
  /**
   * The child pipeline's inputs, by name: values or ${{ }} expressions (a list or map given to a string input is passed as its JSON text).
   */
  with?: {
    [k: string]: (string | number | boolean | unknown[] | {} | null) | undefined
  }
}
/**
 * Runs one child run of a pipeline per item of a list, at most `concurrency` at a time. With key: and depends_on:, an item starts only when the items it depends on succeeded; one whose dependency did not is not run and is recorded blocked. Outcomes: success (every child succeeded), partial (some did; an item a dependency blocked counts as not succeeded), fail (none did, or fail_fast stopped them), blocked (a child waits for a person).
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "foreachStep".
 */
export type ForeachStep = StepCommon & {
  kind: 'foreach'
  /**
   * One ${{ expression }} that gives a list.
   */
  items: string
  /**
   * The name each item has in the with:, key: and depends_on: expressions, and in the expressions of inline steps: (default item).
   */
  as?: string
  /**
   * The pipeline each item runs, relative to the file that holds this step (or give its steps inline with steps:).
   */
  pipeline?: string
  /**
   * The child pipeline's inputs, by name: values or ${{ }} expressions (a list or map given to a string input is passed as its JSON text).
   */
  with?: {
    [k: string]: (string | number | boolean | unknown[] | {} | null) | undefined
  }
  /**
   * How many children run at once (1 to 64, default 1): an integer, or one ${{ expression }} that gives one (e.g. ${{ inputs.parallel }}), resolved when the step runs.
   */
  concurrency?: number | IntExpression
  /**
   * Each item's id, one ${{ expression }} over the alias that gives a string (e.g. ${{ task.id }}); what depends_on names. Default: the item's index as text.
   */
  key?: string
  /**
   * The keys of the items this item waits for, one ${{ expression }} over the alias that gives a list of strings (e.g. ${{ task.depends_on }}). An item starts only when every one of them succeeded; if one did not, the item is not run and is recorded blocked. A cycle, an unknown key or a duplicate key is an error before any item runs.
   */
  depends_on?: string
  /**
   * When true, the first failed child cancels the children not yet finished, and the outcome is fail.
   */
  fail_fast?: boolean
  /**
   * The steps of an anonymous child pipeline each item runs (instead of pipeline:); they read the item under its alias (${{ item }}, or the name as: gives) and what with: gives as inputs.NAME, declared under inputs:.
   *
   * @minItems 1
   */
  steps?: [Step, ...Step[]]
  inputs?: Inputs
  outputs?: Outputs
}
/**
 * A bounded think/act/observe loop: the model works on the task in the prompt with the named tools (reading, searching, editing files by SEARCH/REPLACE blocks, running allowed commands), each call validated against its argument schema and the policy, until it gives a final answer (done), gives up or runs out of turns (gave_up), or gives up after a refusal (denied).
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "agentStep".
 */
export type AgentStep = StepCommon & {
  kind: 'agent'
  /**
   * The task this agent works on (a task id), for the artifacts layout (task_ID/attempt_NN) and pipe stats.
   */
  task?: string
  /**
   * The task for the agent: a prompt file, relative to the pipeline file, Markdown with {{name}} placeholders, each filled from vars.
   */
  prompt: string
  /**
   * Values for the prompt's {{name}} placeholders. Strings go in as they are, numbers and booleans as written, null as nothing, lists and maps as indented JSON. Every placeholder must have a var (pipe validate checks it).
   */
  vars?: {
    [k: string]: unknown | undefined
  }
  /**
   * The tools the model may call, by name: list_directory, find_files, search_text, read_file, apply_edit_blocks, run_command, and any tool the pipeline declares under its top-level tools:. Each runs under the policy (paths inside the repository root, forbidden_paths, allowed_commands, the sandbox) at the level policy.yaml's tools: gives it; levels named in confirm: pause the run for a person (pipe confirm).
   *
   * @minItems 1
   */
  tools: [string, ...string[]]
  /**
   * The only files apply_edit_blocks may change or create: paths or globs relative to the repository root (a glob that matches a directory covers what is under it), as a task's files_touched, or one ${{ expression }} that gives such a list. An edit naming any other file is refused whole, and the model is told why as the call's result. Absent: any file the policy allows. The policy's forbidden_paths apply besides.
   */
  files_touched?: string[] | string
  /**
   * Paths or globs apply_edit_blocks may never change, even inside files_touched (a task's constraints.forbidden_paths), or one ${{ expression }} that gives such a list. Unlike the policy's forbidden_paths, the agent may still read them.
   */
  forbidden_paths?: string[] | string
  /**
   * How many model replies the loop may take (default 20). Reaching it ends the step gave_up (denied when a call was refused or denied).
   */
  max_turns?: number
  /**
   * What one request to the model may carry, in bytes of message text (default 200000, about 50k tokens). Past it, the oldest tool results are replaced by a note saying what was dropped (the task, the instructions and the latest result never are), so a long conversation costs the same per turn and what is stored grows linearly.
   */
  max_context_bytes?: number
  /**
   * A JSON Schema file, relative to the pipeline file, that the agent's final answer must match (as JSON); an invalid answer is sent back with its errors up to max_repairs times, then the step fails with E_MODEL. Without it the final answer is the model's text.
   */
  output_schema?: string
  /**
   * The model for this step, instead of provider.model.
   */
  model?: string
  /**
   * Sampling temperature for this step, instead of provider.temperature.
   */
  temperature?: number
  /**
   * How many times an invalid final answer is sent back (default 2).
   */
  max_repairs?: number
  /**
   * How tools are offered: native (the endpoint's function tools), json (tools described in the prompt; the model replies {"tool": NAME, "arguments": {...}} or {"final": ...}), or auto (native, switching to json for the rest of the step when the endpoint rejects tools with 400). Default auto.
   */
  tool_protocol?: 'auto' | 'native' | 'json'
}
/**
 * Gathers repository context for later model and agent steps (seed 000 CONTEXT_BUILDING, seed 004 READ_CONTEXT): the file tree, files chosen by glob or by a search, recent history, within forbidden_paths and a byte budget, cut the same way every time. outputs.text goes into a prompt through vars (${{ steps.ID.outputs.text }}); it is recorded as repo evidence with each file's sha256, and the snapshot of every step that reads it names it in inputs.context_ref.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "contextStep".
 */
export type ContextStep = StepCommon & {
  kind: 'context'
  /**
   * List the repository's files (git ls-files, tracked and untracked but not ignored, minus forbidden_paths), sorted (default true).
   */
  tree?: boolean
  /**
   * Most paths the tree lists (default 500); the rest are counted as cut.
   */
  max_tree_files?: number
  /**
   * Globs of files whose content is shown (package.json, src/** /*.ts), matched against the tree's paths, in path order.
   *
   * @maxItems 100
   */
  files?: string[]
  /**
   * Literal strings: the files that contain one (git grep -F) are shown too, after the files the globs chose.
   *
   * @maxItems 20
   */
  search?:
    | []
    | [string]
    | [string, string]
    | [string, string, string]
    | [string, string, string, string]
    | [string, string, string, string, string]
    | [string, string, string, string, string, string]
    | [string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string, string, string]
    | [string, string, string, string, string, string, string, string, string, string, string, string, string, string]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
    | [
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string,
        string
      ]
  /**
   * Most files whose content is shown (default 50).
   */
  max_files?: number
  /**
   * Most bytes of one file shown (default 8000, at most 1 MiB); a longer file is cut at a line end and says so.
   */
  max_file_bytes?: number
  /**
   * How many recent commits to show, each with its files (git log --numstat; default 10, 0 for none).
   */
  history?: number
  /**
   * The budget of the whole text in bytes (default 32000, at most 4 MiB: more than any model's context window). What does not fit is cut, the same way every time, and the text says what was cut.
   */
  max_bytes?: number
  /**
   * The budget in tokens, estimated as pipe does everywhere: 4 bytes a token (at most 1,048,576). The smaller of max_bytes and 4 × max_tokens applies.
   */
  max_tokens?: number
}
/**
 * A gate name. The names pass, missing_fields, completeness_score and completeness_threshold are reserved for the gate result.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "gateName".
 */
export type GateName = string

/**
 * A pipe pipeline: a graph of steps, the gates that route it and the model provider its model steps use.
 */
export interface Pipeline {
  /**
   * Version of the pipeline language. Only 1 exists.
   */
  version: 1
  /**
   * Name of the pipeline, shown in runs and graphs.
   */
  name: string
  description?: string
  /**
   * A pipeline file this one starts from, relative to this file. Its settings and steps are the base; this file's top-level keys override them, its steps are appended, then overlay edits the result. pipe pipeline resolve FILE prints the composed pipeline.
   */
  extends?: string
  /**
   * Edits to the steps of the extended pipeline, applied in order, by step id.
   *
   * @maxItems 1000
   */
  overlay?: OverlayOperation[]
  /**
   * The id of another step of this pipeline.
   */
  start?: string
  provider?: ProviderSettings
  budget?: Budget
  /**
   * Named gates. A gate step evaluates some of them against the current spec.
   */
  gates?: {
    [k: string]: Gate | undefined
  }
  completeness?: Completeness
  /**
   * @minItems 1
   * @maxItems 10000
   */
  steps: [Step, ...Step[]]
  inputs?: Inputs1
  outputs?: Outputs1
  /**
   * Environment variables steps may read as ${{ secrets.NAME }}. Each must be set when a run starts; their values are redacted from every record, log and output.
   *
   * @maxItems 100
   */
  secrets?: string[]
  /**
   * Agent tools this pipeline declares, by name: each runs one argument vector built from the model's arguments, under the policy and the sandbox like run_command. An agent step offers one when its tools: list names it.
   */
  tools?: {
    [k: string]: CustomTool | undefined
  }
  /**
   * Write seed 004's artifacts layout (prd.md, arch.json, tasks.json, runs/RUN/state.json, timeline.md, task_ID/attempt_NN/…) to STORE/artifacts/ as the run goes, for this run and its child runs; pipe export writes the same layout anywhere afterwards.
   */
  artifacts?: boolean
  /**
   * When pipe worker (PostgreSQL store) or pipe schedule run-due (folder store) starts runs of this pipeline by itself: each slot of each schedule fires once, whichever workers look (docs/team.md, Schedules).
   *
   * @maxItems 100
   */
  schedules?: Schedule[]
}
/**
 * One edit of the extended pipeline's steps: exactly one of insert_before, insert_after, replace or remove, naming a step id.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "overlayOperation".
 */
export interface OverlayOperation {
  /**
   * Insert step (or steps) before this step: every transition into it goes to the first new step; the last new step's next defaults to it.
   */
  insert_before?: string
  /**
   * Insert step (or steps) after this step: its next goes to the first new step; the last new step's next defaults to its old next.
   */
  insert_after?: string
  /**
   * Put step in this step's place: transitions into it go to the new step, which keeps its next and on when it sets neither.
   */
  replace?: string
  /**
   * Remove this step: transitions into it go to next when given, else to its own next; with neither they are errors.
   */
  remove?: string
  /**
   * With remove: where transitions into the removed step go instead.
   */
  next?: string
  step?: Step
  /**
   * With insert_before or insert_after: several steps, chained in order unless they set next.
   *
   * @minItems 1
   * @maxItems 1000
   */
  steps?: [Step, ...Step[]]
}
/**
 * The fields every step takes, whatever its kind.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "stepCommon".
 */
export interface StepCommon {
  id: StepId
  kind: StepKind
  description?: string
  when?: Condition
  next?: StepRef
  on?: Transitions
  /**
   * How many times the run may enter this step (1 to 1000): an integer, or one ${{ expression }} that gives one (evaluated each time the run comes to the step, e.g. a task's max_retries).
   */
  max_iterations?: number | IntExpression
  on_exhausted?: StepRef
  timeout_ms?: number
  retry?: Retry
  /**
   * Pause the run before the step acts until a person confirms it (pipe confirm RUN --yes|--no); --no gives the step the outcome denied, a failure an on: entry routes. The policy's confirm.kinds and confirm.commands select steps too.
   */
  confirm?: boolean
  budget?: Budget
}
/**
 * The next step for each outcome of this step. The outcome error routes a failed step; without it a failure ends the run.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "transitions".
 */
export interface Transitions {
  [k: string]: StepRef
}
/**
 * Retries after a retryable error (timeouts, rate limits, unavailable services), with backoff 200 ms, 500 ms, 1 s, then 1 s.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "retry".
 */
export interface Retry {
  /**
   * Retries after the first attempt; policy.yaml's max_retries_default when omitted.
   */
  max_retries?: number
  /**
   * Whether the step is safe to run twice. Steps that are not safe are never retried. Defaults to the step kind's own answer.
   */
  safe?: boolean
}
/**
 * A spending limit on model requests, counted from the replies' usage (retries, child runs and resumes included; a resume never resets it). Before each model request pipe adds the request's estimated size (its characters / 4, plus its max_tokens) to what was spent: a request that would pass the limit is not sent. See docs/budgets.md.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "budget".
 */
export interface Budget {
  /**
   * Prompt plus completion tokens.
   */
  tokens?: number
  /**
   * US dollars, from provider.prices or pipe's default prices for the model in use (src/util/default-prices.json); pipe validate refuses a cost budget when no price is known for the model.
   */
  cost_usd?: number
  /**
   * pause (the default): the run waits awaiting_input until pipe budget RUN --add-tokens N | --add-usd X raises the limit; fail: the step ends with the failure outcome over_budget, which an on: entry routes.
   */
  on_exceed?: 'pause' | 'fail'
}
/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "fileTarget".
 */
export interface FileTarget {
  /**
   * The target's name; part of the idempotency key feature_id + target + spec_version.
   */
  name: string
  type: 'file'
  /**
   * Directory, relative to the working directory, that receives FEATURE/VERSION.json and .md; a store other than .pipe publishes under DIR/STORE-NAME, since ids are numbered per store.
   */
  dir: string
}
/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "webhookTarget".
 */
export interface WebhookTarget {
  /**
   * The target's name; part of the idempotency key feature_id + target + spec_version.
   */
  name: string
  type: 'webhook'
  /**
   * The payload: feishu (a Feishu/Lark custom bot), slack (a Slack incoming webhook) or json (the spec and its metadata).
   */
  format: 'feishu' | 'slack' | 'json'
  /**
   * Name of the environment variable that holds the webhook URL (never the URL itself).
   */
  url_env: string
  /**
   * Name of the environment variable that holds the signing secret (Feishu/Lark signature verification).
   */
  secret_env?: string
  /**
   * Per request (default 10000). No answer by then is an unknown outcome, handled as `uncertain` says, never retried blindly.
   */
  timeout_ms?: number
  /**
   * When it is unknown whether a delivery arrived (a crash between sending and recording, a timeout, a broken connection): resend (once per redrive, with the same Idempotency-Key) or hold (stop and ask a person). Default resend.
   */
  uncertain?: 'resend' | 'hold'
}
/**
 * With steps: inline, the anonymous child pipeline's inputs (what with: gives).
 */
export interface Inputs {
  [k: string]: InputDeclaration | undefined
}
/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "inputDeclaration".
 */
export interface InputDeclaration {
  /**
   * The value type; command-line values are converted to it strictly. object and array take a mapping or a list (from with: of a pipeline or foreach step, a values file, or -i name=JSON) so a child pipeline can receive structured data such as a task.
   */
  type: 'string' | 'number' | 'integer' | 'boolean' | 'object' | 'array'
  description?: string
  /**
   * The run refuses to start without it. A required input has no default.
   */
  required?: boolean
  /**
   * Used when neither -i nor the values file gives the input.
   */
  default?: string | number | boolean | unknown[] | {}
  /**
   * The only values allowed.
   *
   * @minItems 1
   */
  enum?: [string | number | boolean, ...(string | number | boolean)[]]
  minimum?: number
  maximum?: number
}
/**
 * With steps: inline, the anonymous child pipeline's outputs (what each item carries as items[].outputs).
 */
export interface Outputs {
  [k: string]: OutputDeclaration | undefined
}
/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "outputDeclaration".
 */
export interface OutputDeclaration {
  /**
   * The value type; a value of another type fails the run, naming the output.
   */
  type: 'string' | 'number' | 'integer' | 'boolean' | 'object' | 'array'
  /**
   * One ${{ expression }} over the pipeline's inputs and steps (not secrets), or a template whose text makes a string.
   */
  value: string
  description?: string
}
/**
 * Model settings for the model steps. The API key and endpoint come from OPENAI_API_KEY and OPENAI_BASE_URL, never from this file.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "providerSettings".
 */
export interface ProviderSettings {
  kind?: 'auto' | 'offline' | 'openai'
  /**
   * Whose models answer at the endpoint, as traces name it (gen_ai.provider.name: openai, anthropic, ollama, ...), when the endpoint's host does not tell (a proxy, a local address). Unset: named from the host, else _OTHER.
   */
  name?: string
  model?: string
  temperature?: number
  max_tokens?: number
  timeout_ms?: number
  /**
   * How model steps ask for JSON: json_schema (the endpoint checks the reply against the schema), json_object (JSON mode), or none (the prompt alone asks for JSON). pipe validates every reply itself in all three.
   */
  response_format?: 'json_schema' | 'json_object' | 'none'
  /**
   * How many times an invalid reply is sent back with its validation errors for repair (default 2).
   */
  repair_attempts?: number
  /**
   * Prices per 1,000 tokens, to record the cost of each step.
   */
  prices?: {
    prompt_per_1k: number
    completion_per_1k: number
    currency?: string
  }
}
/**
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "gate".
 */
export interface Gate {
  description?: string
  /**
   * @minItems 1
   */
  rules: [GateRule, ...GateRule[]]
}
/**
 * One check on a spec path. A rule passes when every check it names passes; a rule must name at least one check.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "gateRule".
 */
export interface GateRule {
  id?: string
  /**
   * A spec path: dotted names with [N] or [*], e.g. goal, features, features[*].priority.
   */
  path: string
  /**
   * The path must hold a non-empty value.
   */
  required?: boolean
  /**
   * The path must hold a list with at least this many items.
   */
  min_items?: number
  /**
   * The path must hold a list with at most this many items.
   */
  max_items?: number
  /**
   * Every string at the path must have at least this many characters.
   */
  min_length?: number
  /**
   * Every string at the path must match this regular expression.
   */
  pattern?: string
  /**
   * Every value at the path must be one of these.
   *
   * @minItems 1
   */
  enum?: [string | number | boolean, ...(string | number | boolean)[]]
  /**
   * What to tell the author when the rule fails.
   */
  message?: string
}
/**
 * A weighted completeness score: the share of weight whose spec paths hold a non-empty value. A gate step fails when the score is below the threshold.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "completeness".
 */
export interface Completeness {
  threshold: number
  weights: {
    [k: string]: number | undefined
  }
}
/**
 * Typed inputs of the pipeline, given as pipe run FILE -i name=value or --inputs FILE.yaml, read in expressions as ${{ inputs.name }}.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "inputs".
 */
export interface Inputs1 {
  [k: string]: InputDeclaration | undefined
}
/**
 * What a run of this pipeline gives back when it succeeds, by name: each a typed ${{ expression }} over its own inputs and steps, evaluated when the run succeeds and recorded in its run record. A foreach item (items[].outputs) and a pipeline step (outputs.outputs) of a parent run read them, typed from this declaration.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "outputs".
 */
export interface Outputs1 {
  [k: string]: OutputDeclaration | undefined
}
/**
 * One agent tool declared by the pipeline: the model calls it with arguments matching parameters; pipe builds argv from them (each element one argument, never a shell) and runs it under the policy and the sandbox.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "customTool".
 */
export interface CustomTool {
  /**
   * What the tool does, as the model reads it.
   */
  description: string
  /**
   * A JSON Schema (type: object) for the tool's arguments: offered to the model, checked as a schema by pipe validate and against every call's arguments before anything runs. Constrain each string (pattern, maxLength): a pattern such as ^[A-Za-z_][A-Za-z0-9_]*$ keeps an argument from starting with -.
   */
  parameters: {}
  /**
   * The argument vector to run: literals and ${{ args.NAME }} expressions over the call's arguments (the only name they read), each element exactly one argument whatever its text holds (an expression must give a string, number or boolean). The first element is a literal program name; pipe validate judges the vector against the policy's allowed_commands, and every call is checked against it again before it runs.
   *
   * @minItems 1
   * @maxItems 100
   */
  argv: [string, ...string[]]
  /**
   * The permission level (default dangerous): safe results are cached within the step, levels named in the policy's confirm: pause the run for a person. The policy's tools: entry for this name, when stricter, wins.
   */
  level?: 'safe' | 'moderate' | 'dangerous'
  /**
   * Let an argument built from an expression start with - (default false: such a call is refused with an error to the model and nothing runs, so a model cannot turn a value into an option such as --output=FILE). Set it only when every such argument follows -- or an option that takes it (git grep -e PATTERN).
   */
  allow_leading_dash?: boolean
  /**
   * Kill the command's process tree after this long (default: the policy's command_timeout_ms, never more).
   */
  timeout_ms?: number
  /**
   * The most of stdout and of stderr the model is given (head and tail kept; default 8000, never more than the policy's max_output_bytes).
   */
  max_output_bytes?: number
}
/**
 * One schedule: a cron expression read in a timezone, the inputs its runs get, the queue they go to and what to do with slots missed while nothing looked.
 *
 * This interface was referenced by `Pipeline`'s JSON-Schema
 * via the `definition` "schedule".
 */
export interface Schedule {
  /**
   * A name for the schedule, kept in its firings' records; required when there is more than one schedule (a lone one defaults to 0, its place in the list). Naming a schedule that had none 0, 1, ... as its place was keeps its recorded firings.
   */
  name?: string
  /**
   * Five fields (minute hour day-of-month month day-of-week), or six with seconds first; names (MON, JAN) and @daily, @hourly ... are read too.
   */
  cron: string
  /**
   * An IANA timezone the cron expression is read in (Europe/Berlin); default UTC. Across a DST change a slot that does not exist that day fires once at the hour after, and one that exists twice fires once.
   */
  timezone?: string
  /**
   * The inputs each run of this schedule gets, checked against the pipeline's inputs.
   */
  inputs?: {}
  /**
   * The queue its runs go to on a PostgreSQL store (pipe worker --queue); default: default.
   */
  queue?: string
  /**
   * Slots missed while no worker looked (a slot is missed once a minute has passed since its time): none skips them to the next slot; latest fires the most recent one once; all fires each of them, at most 100 at a time.
   */
  catch_up?: 'none' | 'latest' | 'all'
}
