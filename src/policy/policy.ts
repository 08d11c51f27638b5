/** policy.yaml once loaded: the rules every step runs under, and the version recorded with each run. */
import type {Policy} from '../types/policy.js'
import {hashJson} from '../util/hash.js'

export interface LoadedPolicy {
  /** The file it came from; null for the built-in default. */
  file: string | null
  policy: Policy
  /** Content hash of the policy's values (comments and layout do not change it). */
  version: string
  /** Absolute directories no step may touch whatever the policy says (the store). */
  protected?: string[]
}

export const DEFAULT_POLICY: Policy = {
  version: 1,
  allowed_commands: [],
  forbidden_paths: ['.git/**', '.env', '.env.*', '**/*.{pem,key}', '**/id_rsa*'],
  max_patch_lines: 500,
  max_retries_default: 2,
  resource_limits: {command_timeout_ms: 300000, step_timeout_ms: 600000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576},
  sandbox: 'auto',
  network: false,
  tool_versions: {},
}

export function policyFrom(policy: Policy, file: string | null): LoadedPolicy {
  return {file, policy, version: hashJson(policy)}
}

export function defaultPolicy(): LoadedPolicy {
  return policyFrom(DEFAULT_POLICY, null)
}
