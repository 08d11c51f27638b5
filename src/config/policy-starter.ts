/** pipe policy init: a commented policy.yaml that states only what differs from the built-in policy. */
import {existsSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {DEFAULT_POLICY} from '../policy/policy.js'
import {writeFile} from '../util/fs-async.js'
import {schemaRef} from './scaffold.js'

const flow = (value: unknown): string => JSON.stringify(value)

/** The starter's text. Each built-in value is shown commented out, from DEFAULT_POLICY, so the comments cannot go stale. */
export function policyStarter(schema: string): string {
  const d = DEFAULT_POLICY
  const limits = Object.entries(d.resource_limits)
    .map(([key, value]) => `#   ${key}: ${value}`)
    .join('\n')
  const tools = Object.entries(d.tools)
    .map(([key, value]) => `#   ${key}: ${value}`)
    .join('\n')
  return `# yaml-language-server: $schema=${schema}
#
# What a run's steps may do. This file states only what differs from the built-in policy: a key
# left out keeps the built-in value (shown commented out below). A list or a value given here
# replaces the built-in one, except forbidden_paths, which adds to the built-in globs; the maps
# (resource_limits, tools, tool_versions, syntax_checks) merge key by key.
#   pipe policy check --effective    every value that applies, and the policy_version runs record
#   pipe policy explain -- npm test  whether a command is allowed, and by which entry
version: 1

# Argument vectors a command step (or an agent's run_command) may run, matched whole; never shell
# strings. "{arg}" is any one argument, "{path}" one path inside the repository (not forbidden,
# never an option), and a last "..." any further arguments. The built-in policy allows none.
allowed_commands:
  - [git, status]
  # - [npm, test, "..."]
  # - [node, --check, "{path}"]

# Globs relative to the repository root that no step may read or write, added to the built-in
# ones, which always apply: ${d.forbidden_paths.join(', ')}
# forbidden_paths:
#   - "secrets/**"

# max_patch_lines: ${d.max_patch_lines}          # changed lines an edit may apply; an agent's edits count together over its task
# max_retries_default: ${d.max_retries_default}        # retries of a retry-safe step that sets none

# How commands are contained: required | auto | off (auto falls back, with a warning, without bwrap).
# sandbox: ${d.sandbox}
# network: ${d.network}

# Only the limits you change; the others keep these built-in values.
# resource_limits:
${limits}

# Agent tools' permission levels, and which levels pause for a person (pipe confirm).
# tools:
${tools}
# confirm: ${flow(d.confirm)}
`
}

/** Writes the starter to file; refuses (E_CONFLICT) to overwrite one unless force. */
export async function writePolicyStarter(file: string, force: boolean): Promise<{file: string; overwritten: boolean}> {
  const target = path.resolve(file)
  const existed = existsSync(target)
  if (existed && !force) {
    throw new PipeError('E_CONFLICT', `${target} already exists`, {
      hint: 'Edit it (pipe policy check --effective shows what applies), write elsewhere (pipe policy init FILE), or pass --force to overwrite it.',
    })
  }
  await writeFile(target, policyStarter(schemaRef(path.dirname(target), undefined, 'policy.schema.json')))
  return {file: target, overwritten: existed}
}
