/**
 * The exit-code table: the one place that says how pipe ends. `pipe --help` and the README show it.
 */
import type {ErrorCode} from './error-codes.js'

export const ExitCode = {
  OK: 0,
  FAILED: 1,
  USAGE: 2,
  POLICY_DENIED: 3,
  CONFLICT: 4,
  CANCELLED: 5,
  BLOCKED: 6,
  PAUSED: 10,
  INTERRUPTED: 130,
} as const
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode]

export const exitCodeTable: ReadonlyArray<{code: ExitCode; name: string; meaning: string}> = [
  {code: ExitCode.OK, name: 'OK', meaning: 'success; a run succeeded; every file validated'},
  {
    code: ExitCode.FAILED,
    name: 'FAILED',
    meaning: 'a run failed (a step failed, a failure outcome went unrouted or unrecovered, a loop hit its bound, an end step said failed) or an internal error',
  },
  {code: ExitCode.USAGE, name: 'USAGE', meaning: 'bad flags, arguments, input, or an invalid pipeline/policy/answers file'},
  {code: ExitCode.POLICY_DENIED, name: 'POLICY_DENIED', meaning: 'the policy denied a command or a path'},
  {code: ExitCode.CONFLICT, name: 'CONFLICT', meaning: 'a write conflicted with a stored record, or a record failed its hash check'},
  {code: ExitCode.CANCELLED, name: 'CANCELLED', meaning: 'the run was cancelled (a review said drop, an end step said cancelled, or pipe cancel)'},
  {code: ExitCode.BLOCKED, name: 'BLOCKED', meaning: 'the run needs a person to intervene; then pipe resume continues it'},
  {code: ExitCode.PAUSED, name: 'PAUSED', meaning: 'the run is waiting for answers, a review decision or a confirmation'},
  {code: ExitCode.INTERRUPTED, name: 'INTERRUPTED', meaning: 'interrupted by SIGINT or SIGTERM; pipe resume continues it'},
]

const byErrorCode: Record<ErrorCode, ExitCode> = {
  E_POLICY_DENIED: ExitCode.POLICY_DENIED,
  E_IO: ExitCode.FAILED,
  E_TOOL_TIMEOUT: ExitCode.FAILED,
  E_INVALID_ARGS: ExitCode.USAGE,
  E_CONFLICT: ExitCode.CONFLICT,
  E_BUILD_FAIL: ExitCode.FAILED,
  E_GATE_FAIL: ExitCode.FAILED,
  E_MODEL: ExitCode.FAILED,
  E_CONFIG: ExitCode.USAGE,
  E_INPUT: ExitCode.USAGE,
  E_NOT_FOUND: ExitCode.USAGE,
  E_STATE: ExitCode.USAGE,
  E_LOOP_LIMIT: ExitCode.FAILED,
  E_BUDGET: ExitCode.FAILED,
  E_ENDED: ExitCode.FAILED,
  E_INTEGRITY: ExitCode.CONFLICT,
  E_INTERNAL: ExitCode.FAILED,
}

export function exitCodeFor(code: ErrorCode): ExitCode {
  return byErrorCode[code]
}

export function exitCodeHelp(): string {
  return exitCodeTable.map((row) => `  ${String(row.code).padStart(3)}  ${row.name.padEnd(14)} ${row.meaning}`).join('\n')
}
