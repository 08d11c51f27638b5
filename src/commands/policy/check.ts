import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import path from 'node:path'
import {Document, isScalar, visit} from 'yaml'
import {PipeCommand} from '../../cli/base-command.js'
import {renderDiagnostics} from '../../cli/views.js'
import {discoverPolicyFile, loadPolicyFile} from '../../config/policy.js'
import {PipeError} from '../../errors.js'
import {defaultPolicy, type LoadedPolicy} from '../../policy/policy.js'
import type {Policy} from '../../types/policy.js'
import {line as t, visible} from '../../util/terminal-text.js'

export default class PolicyCheck extends PipeCommand {
  static override summary = 'Validate a policy file and print its policy_version; with no policy file, say what the built-in policy allows.'
  static override description = `A policy file states only what differs from the built-in policy: a key it leaves out keeps the built-in value; a scalar or a list replaces the built-in one, except forbidden_paths, which adds to the built-in globs; resource_limits, tools, tool_versions and syntax_checks merge key by key. The effective policy (the built-in one with the file over it) is checked whole, and its content hash is the policy_version every run and snapshot records: it changes when a rule changes, not when comments or layout do.

Without FILE, the policy a run would use: the nearest policy.yaml from the working directory up to the repository root, else the built-in policy.`
  static override examples = [
    {description: 'The policy a run from here would use', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'Every value that applies, the built-in ones included, as YAML', command: '<%= config.bin %> <%= command.id %> --effective'},
    {description: 'Another policy', command: '<%= config.bin %> <%= command.id %> examples/coding/policy.yaml --json'},
  ]
  static override args = {
    file: Args.string({description: 'Policy file (default: the nearest policy.yaml up to the repository root, else the built-in policy).'}),
  }
  static override flags = {
    effective: Flags.boolean({description: 'Print the effective policy (the built-in one with the file over it) as YAML.', default: false}),
  }

  async run(): Promise<{file: string | null; valid: true; builtin: boolean; policy_version: string; policy: Policy}> {
    const {args, flags} = await this.parse(PolicyCheck)
    const file = args.file !== undefined ? path.resolve(args.file) : discoverPolicyFile(process.cwd())
    let loaded: LoadedPolicy
    if (file === null) {
      loaded = defaultPolicy()
    } else {
      const result = await loadPolicyFile(file)
      if (!result.ok) {
        // With --json, stdout holds only the error document; the lines go to stderr.
        ;(this.jsonEnabled() ? process.stderr : process.stdout).write(renderDiagnostics(result.diagnostics))
        throw new PipeError('E_CONFIG', `${file} is not a valid policy (${result.diagnostics.length} error(s))`, {
          hint: 'Fix the errors listed above; schemas/policy.schema.json describes every field.',
        })
      }
      loaded = result.loaded
    }
    const {policy, version} = loaded
    if (!this.jsonEnabled()) {
      const head = file === null ? 'no policy.yaml here or above (up to the repository root): the built-in policy applies\n' : t`ok  ${file}\n`
      process.stdout.write(`${head}policy_version ${version}\n`)
      if (flags.effective) process.stdout.write(visible(policyYaml(policy)))
      else process.stdout.write(summary(policy))
      if (file === null) process.stdout.write('Write a policy.yaml that states what differs with: pipe policy init\n')
    }
    return {file, valid: true, builtin: file === null, policy_version: version, policy}
  }
}

/** The policy as YAML, each list of plain values (an argv, confirm) on one line as policy files write them. */
function policyYaml(policy: Policy): string {
  const doc = new Document(policy)
  visit(doc, {
    Seq(_key, node) {
      if (node.items.every((item) => isScalar(item))) node.flow = true
    },
  })
  return doc.toString({flowCollectionPadding: false})
}

function summary(policy: Policy): string {
  const commands =
    policy.allowed_commands.length === 0
      ? 'no commands allowed (allowed_commands is empty)'
      : `${policy.allowed_commands.length} allowed command(s): ${policy.allowed_commands.map((c) => JSON.stringify(c)).join(', ')}`
  return `${visible(commands)}
${policy.forbidden_paths.length} forbidden path(s): ${visible(policy.forbidden_paths.join(', '))}
max_patch_lines ${policy.max_patch_lines}, max_retries_default ${policy.max_retries_default}
sandbox ${policy.sandbox}, network ${policy.network ? 'on' : 'off'}
`
}
