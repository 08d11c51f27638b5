import * as Flags from '../../cli/flags.js'
import path from 'node:path'
import {PipeCommand} from '../../cli/base-command.js'
import {renderDiagnostics} from '../../cli/views.js'
import {resolvePolicy} from '../../config/policy.js'
import {PipeError} from '../../errors.js'
import {checkCommand, checkPath, type Verdict} from '../../policy/rules.js'
import {commandConfirmRule, destructiveRule} from '../../policy/confirm.js'
import {needsConfirmation, preapproval, toolLevel} from '../../policy/tools.js'
import {line as t} from '../../util/terminal-text.js'

export default class PolicyExplain extends PipeCommand {
  static override summary = 'Say whether the policy allows a command or a path, and which rule decides.'
  static override description =
    'Exit code 0 when allowed, 3 (POLICY_DENIED) when denied. A command is given after --, as the argument vector a step would run; nothing is run.'
  static override examples = [
    {
      description: 'Is this command allowed? (everything after the first -- is the argv, an inner -- included)',
      command: '<%= config.bin %> <%= command.id %> -- npm test -- --grep parser',
    },
    {description: 'Shell syntax is only data', command: "<%= config.bin %> <%= command.id %> -- npm test ';' rm -rf /"},
    {description: 'May a step write this path?', command: '<%= config.bin %> <%= command.id %> --path ../outside.txt'},
  ]
  static override strict = false
  static override flags = {
    path: Flags.string({description: 'A path relative to the repository root, instead of a command.', helpValue: 'PATH'}),
    policy: Flags.string({
      description: 'Policy file (default: the nearest policy.yaml from the working directory up to the repository root, else the built-in policy).',
      helpValue: 'FILE',
    }),
    root: Flags.string({description: 'Repository root for --path and for a command\'s "{path}" arguments (default: the working directory).', helpValue: 'DIR'}),
  }

  async run(): Promise<
    Verdict & {subject: string[] | string; policy: string; policy_version: string; agent?: {tool: string; level: string; confirmation: string}}
  > {
    const {flags, argv} = await this.parse(PolicyExplain)
    // Everything after the first -- is the argument vector, verbatim: the parser would drop an inner --.
    const separator = this.argv.indexOf('--')
    const command = separator === -1 ? (argv as string[]) : this.argv.slice(separator + 1)
    if ((flags.path === undefined) === (command.length === 0)) {
      throw new PipeError('E_INVALID_ARGS', 'give either a command after -- or --path PATH', {
        hint: 'pipe policy explain -- npm test, or pipe policy explain --path src/app.ts',
      })
    }
    const loaded = await resolvePolicy(flags.policy, process.cwd())
    if (!loaded.ok) {
      process.stderr.write(renderDiagnostics(loaded.diagnostics))
      throw new PipeError('E_CONFIG', 'the policy is not valid', {hint: 'pipe policy check shows the errors.'})
    }
    const policy = loaded.loaded
    const root = path.resolve(flags.root ?? '.')
    const verdict = flags.path !== undefined ? checkPath(policy, root, flags.path) : checkCommand(policy, command, {root})
    const subject = flags.path ?? command
    // What an agent's run_command of the same argv would meet: its level, and whether a person is asked.
    let agent: {tool: string; level: string; confirmation: string} | undefined
    if (flags.path === undefined && verdict.allowed) {
      const level = toolLevel(policy, 'run_command')
      const approved = preapproval(policy, command, {root})
      const byPattern = commandConfirmRule(policy, [command])
      agent = {
        tool: 'run_command',
        level,
        confirmation:
          byPattern !== null
            ? `needed (pipe confirm): ${byPattern}`
            : !needsConfirmation(policy, level)
              ? 'not needed'
              : approved
                ? `pre-approved by ${approved}`
                : 'needed (pipe confirm)',
      }
    }
    // What a command step running the same argv would meet: a destructive command waits for a person although allowed.
    const stepWaits = flags.path === undefined && verdict.allowed ? (commandConfirmRule(policy, [command]) ?? destructiveRule(policy, [command], {root})) : null
    const step =
      flags.path === undefined && verdict.allowed ? {confirmation: stepWaits === null ? 'not needed' : `needed (pipe confirm): ${stepWaits}`} : undefined
    const result = {
      ...verdict,
      subject,
      policy: policy.file ?? '(built-in default)',
      policy_version: policy.version,
      ...(agent ? {agent} : {}),
      ...(step ? {step} : {}),
    }
    // The agent's line is added outside t``: a line break inside a value would be shown escaped.
    if (!this.jsonEnabled())
      process.stdout.write(
        `${t`${verdict.allowed ? 'allowed' : 'DENIED'}  ${JSON.stringify(subject)}\n  rule: ${verdict.rule}\n  ${verdict.reason}`}\n${agent ? `${t`  agent run_command: level ${agent.level}, confirmation ${agent.confirmation}`}\n` : ''}${t`  policy: ${result.policy} (${policy.version})`}\n${step && stepWaits !== null ? `${t`  a command step: confirmation ${step.confirmation}`}\n` : ''}`,
      )
    if (!verdict.allowed) process.exitCode = 3
    return result
  }
}
