import * as Args from '@oclif/core/args'
import path from 'node:path'
import {PipeCommand} from '../../cli/base-command.js'
import {renderDiagnostics} from '../../cli/views.js'
import {loadPolicyFile} from '../../config/policy.js'
import {PipeError} from '../../errors.js'
import type {Policy} from '../../types/policy.js'
import {line as t} from '../../util/terminal-text.js'

export default class PolicyCheck extends PipeCommand {
  static override summary = 'Validate a policy file and print its policy_version.'
  static override description = 'The policy_version is the content hash of the policy\'s values: it changes when a rule changes, not when comments or layout do. Every run and snapshot records it.'
  static override examples = [
    {description: 'The policy in the working directory', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'Another policy', command: '<%= config.bin %> <%= command.id %> examples/coding/policy.yaml --json'},
  ]
  static override args = {file: Args.string({description: 'Policy file (default: policy.yaml in the working directory).'})}

  async run(): Promise<{file: string; valid: true; policy_version: string; policy: Policy}> {
    const {args} = await this.parse(PolicyCheck)
    const file = path.resolve(args.file ?? 'policy.yaml')
    const result = await loadPolicyFile(file)
    if (!result.ok) {
      // With --json, stdout holds only the error document; the lines go to stderr.
      (this.jsonEnabled() ? process.stderr : process.stdout).write(renderDiagnostics(result.diagnostics))
      throw new PipeError('E_CONFIG', `${file} is not a valid policy (${result.diagnostics.length} error(s))`, {hint: 'Fix the errors listed above; schemas/policy.schema.json describes every field.'})
    }
    const {policy, version} = result.loaded
    if (!this.jsonEnabled()) {
      process.stdout.write(t`ok  ${file}\npolicy_version ${version}\n`)
      process.stdout.write(`${policy.allowed_commands.length} allowed command(s), ${policy.forbidden_paths.length} forbidden path(s), max_patch_lines ${policy.max_patch_lines}, max_retries_default ${policy.max_retries_default}\n`)
      process.stdout.write(`sandbox ${policy.sandbox ?? 'auto'}, network ${policy.network ? 'on' : 'off'}\n`)
    }
    return {file, valid: true, policy_version: version, policy}
  }
}
