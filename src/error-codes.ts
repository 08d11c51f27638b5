/**
 * The codes a PipeError carries (E_CONFIG, E_STATE, ...): errors.ts gives them to errors and
 * exit-codes.ts maps each to the exit code pipe ends with; both import the list from here.
 */
export type ErrorCode =
  | 'E_POLICY_DENIED'
  | 'E_IO'
  | 'E_TOOL_TIMEOUT'
  | 'E_INVALID_ARGS'
  | 'E_CONFLICT'
  | 'E_BUILD_FAIL'
  | 'E_GATE_FAIL'
  | 'E_MODEL'
  | 'E_CONFIG'
  | 'E_INPUT'
  | 'E_NOT_FOUND'
  | 'E_STATE'
  | 'E_LOOP_LIMIT'
  | 'E_BUDGET'
  | 'E_ENDED'
  | 'E_INTEGRITY'
  | 'E_INTERNAL'
