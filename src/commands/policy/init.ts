import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {PipeCommand} from '../../cli/base-command.js'
import {writePolicyStarter} from '../../config/policy-starter.js'
import {line as t} from '../../util/terminal-text.js'

export default class PolicyInit extends PipeCommand {
  static override summary = 'Write a commented starter policy.yaml that states only what differs from the built-in policy.'
  static override description =
    'The starter allows [git, status] and shows every built-in value commented out; pipe policy check accepts it as written. An existing file is never overwritten unless --force is given (E_CONFLICT).'
  static override examples = [
    {description: 'A policy.yaml in the working directory', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'Then see every value that applies', command: '<%= config.bin %> policy check --effective'},
  ]
  static override args = {file: Args.string({description: 'Where to write it.', default: 'policy.yaml'})}
  static override flags = {force: Flags.boolean({description: 'Overwrite an existing file.', default: false})}

  async run(): Promise<{file: string; overwritten: boolean}> {
    const {args, flags} = await this.parse(PolicyInit)
    const result = await writePolicyStarter(args.file, flags.force)
    if (!this.jsonEnabled())
      process.stdout.write(
        t`${result.overwritten ? 'overwrote' : 'wrote'}  ${result.file}\n` +
          'Next: allow the commands your pipelines run, then pipe policy check --effective\n',
      )
    return result
  }
}
