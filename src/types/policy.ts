/* eslint-disable */
// Generated from schemas/ by `npm run gen:types`. Do not edit by hand.

/**
 * What the steps of a run may do: the commands they may start, the paths they may not touch, and the limits they run under. Its content hash is recorded with every run as policy_version.
 */
export interface Policy {
  /**
   * Version of the policy format. Only 1 exists.
   */
  version: 1
  /**
   * Argument-vector prefixes a command step may run, e.g. [npm, test]. A command is allowed when its argv starts with one of them. Never shell strings.
   */
  allowed_commands: [string, ...string[]][]
  /**
   * Globs, relative to the repository root, that no step may read or write (e.g. .git/**, secrets/**).
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
  resource_limits: {
    /**
     * Wall-clock limit of one command; the whole process tree is killed after it.
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
  }
  /**
   * Versions of the tools a run depends on, recorded for replay (e.g. node: '20').
   */
  tool_versions?: {
    [k: string]: string | undefined
  }
}
