/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * The pipeline file to run, relative to the test file.
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "pipeline".
 */
export type Pipeline = string
/**
 * A policy file, relative to the test file (default: policy.yaml in the test's workspace, which is empty unless `workspace` copies one in, else the built-in policy).
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "policy".
 */
export type Policy = string
/**
 * A cassette of recorded model replies, relative to the test file; model requests are answered from it and a request it has no reply for fails the test.
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "cassette".
 */
export type Cassette = string
/**
 * A directory, relative to the test file, copied into the test's temporary workspace before the run (default: an empty workspace). The original is never changed.
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "workspace".
 */
export type Workspace = string
/**
 * Commands run in the test's workspace, in order, before the run (the file's first, then the test's own, which adds to them): each an argument vector, run without a shell (no expansion, no redirection), with a fixed git identity and date so the commits they make have the same ids on every machine. A command that fails, or runs over 60 s, fails the test before its run starts. They are the test's own fixture, so the pipeline's policy does not apply to them.
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "setup".
 */
export type Setup = [string, ...string[]][]

/**
 * A pipe test file (*.pipe-test.yaml): one or more tests, each running a pipeline in a temporary store and workspace and checking how it ended. Paths are relative to the test file. Keys at the top level (pipeline, policy, cassette, workspace, setup) are defaults every test may override.
 */
export interface PipeTestFile {
  /**
   * Format version of the test file.
   */
  version: 1
  pipeline?: Pipeline
  policy?: Policy
  cassette?: Cassette
  workspace?: Workspace
  setup?: Setup
  secrets?: Secrets
  /**
   * The tests of this file, run in any order and possibly at once; each in its own store and workspace.
   *
   * @minItems 1
   */
  tests: [Test, ...Test[]]
}
/**
 * Stand-in values of the secrets the pipeline reads (its secrets: list), by name, given to the test's run instead of the environment's: a test needs no real secret. The file's apply to every test; a test's own are added over them. They are redacted from the records like real secrets.
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "secrets".
 */
export interface Secrets {
  [k: string]: string | undefined
}
/**
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "test".
 */
export interface Test {
  /**
   * The test's name, unique in its file; --filter matches it.
   */
  name: string
  pipeline?: Pipeline
  policy?: Policy
  cassette?: Cassette
  workspace?: Workspace
  setup?: Setup
  secrets?: Secrets
  /**
   * The requirement as text (like pipe run --text).
   */
  input?: string
  /**
   * The requirement as a file, relative to the test file (like pipe run --input).
   */
  input_file?: string
  /**
   * Values for the pipeline's typed inputs (like pipe run -i NAME=VALUE).
   */
  inputs?: {
    [k: string]: (string | number | boolean) | undefined
  }
  /**
   * Answers to clarifying questions, given up front (like pipe run --answers): an answers file relative to the test file, or the answers as a mapping of question id or spec field to text.
   */
  answers?:
    | string
    | {
        [k: string]: string | undefined
      }
  /**
   * The review decision, given up front (like pipe run --decision).
   */
  decision?: 'go' | 'hold' | 'drop'
  /**
   * The note recorded with the decision.
   */
  note?: string
  /**
   * What a person answers each time the run waits for a confirmation (a step or tool call pipe confirm would answer), in order: yes or no, or a list of them. A run that asks for more than the test gives stops awaiting_input; one that asks for fewer fails the test.
   */
  confirm?: ('yes' | 'no') | ['yes' | 'no', ...('yes' | 'no')[]]
  /**
   * What a person grants each time the run pauses at a budget (pipe budget RUN --add-tokens N | --add-usd X), in order: add_tokens or add_usd (or both), and a note. A run that pauses more often than the test grants stops awaiting_input; one that pauses less often fails the test.
   *
   * @minItems 1
   */
  budget?: [
    {
      add_tokens?: number
      add_usd?: number
      note?: string
    },
    ...{
      add_tokens?: number
      add_usd?: number
      note?: string
    }[]
  ]
  expect: Expect
}
/**
 * What must hold once the run stops (ends or waits for a person). Every expectation is checked and every failure reported.
 *
 * This interface was referenced by `PipeTestFile`'s JSON-Schema
 * via the `definition` "expect".
 */
export interface Expect {
  /**
   * The run's status when it stopped.
   */
  status?: 'succeeded' | 'failed' | 'blocked' | 'cancelled' | 'awaiting_input' | 'interrupted'
  /**
   * The error code the run stopped with (E_BUILD_FAIL, E_POLICY_DENIED, ...).
   */
  code?: string
  /**
   * The outcome of each named step's latest snapshot (success, pass, fail, go, skipped, ...); null: the step must not have run.
   */
  outcomes?: {
    [k: string]: (string | null) | undefined
  }
  /**
   * Values of step outputs, keyed by STEP.PATH (plan_tasks.tasks, route.next, each.items[0].id); each must equal the value of that path in the step's latest snapshot.
   */
  outputs?: {}
  /**
   * Conditions, each one ${{ }} expression that must be true; it reads inputs, steps.<id>.outputs|outcome, spec and run as pipeline expressions do, and is checked against the pipeline before anything runs.
   */
  assert?: string[]
  /**
   * A file, relative to the test file, holding the run's snapshots normalised (ids, times, durations, hashes and temporary paths masked); pipe test --update writes it.
   */
  golden?: string
}
