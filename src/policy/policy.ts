/** policy.yaml once loaded: the rules every step runs under, and the version recorded with each run. */
import type {Policy} from '../types/policy.js'
import {hashJson} from '../util/hash.js'

/** A policy file as written: only what differs from the built-in policy. */
export type PolicyFile = {version: 1} & Partial<Omit<Policy, 'version'>>

export interface LoadedPolicy {
  /** The file it came from; null for the built-in default. */
  file: string | null
  /** The effective policy: the built-in one with the file's values over it. */
  policy: Policy
  /** Content hash of the effective policy's values (comments, layout and restating a built-in value do not change it). */
  version: string
  /** Absolute directories no step may touch whatever the policy says (the store). */
  protected?: string[]
}

/** The built-in policy: every key's default in schemas/policy.schema.json (a unit test keeps the two equal). */
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
  tools: {list_directory: 'safe', find_files: 'safe', search_text: 'safe', read_file: 'safe', apply_edit_blocks: 'moderate', run_command: 'dangerous'},
  confirm: ['dangerous'],
  tools_preapproved: [],
  syntax_checks: {},
}

/**
 * The effective policy of a file: the built-in policy with the file over it. A key the file leaves
 * out keeps the built-in value; scalars and lists replace, except forbidden_paths, which adds to the
 * built-in globs (a policy that names secrets/** must not lose .git/**); the maps (resource_limits,
 * tools, tool_versions, syntax_checks) merge key by key.
 */
export function effectivePolicy(file: PolicyFile, given: Policy = DEFAULT_POLICY): Policy {
  // A copy: whoever changes the loaded policy (a test, a step) must not change the built-in one for everyone after.
  const base = structuredClone(given)
  return {
    ...base,
    ...file,
    // The file's globs first, so a rule named forbidden_paths[i] is the file's own entry i.
    forbidden_paths: [...new Set([...(file.forbidden_paths ?? []), ...base.forbidden_paths])],
    resource_limits: {...base.resource_limits, ...file.resource_limits},
    tool_versions: {...base.tool_versions, ...file.tool_versions},
    tools: {...base.tools, ...file.tools},
    syntax_checks: {...base.syntax_checks, ...file.syntax_checks},
  }
}

export function policyFrom(policy: Policy, file: string | null): LoadedPolicy {
  return {file, policy, version: hashJson(policy)}
}

export function defaultPolicy(): LoadedPolicy {
  return policyFrom(structuredClone(DEFAULT_POLICY), null)
}
