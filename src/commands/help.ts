import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {PipeCommand} from '../cli/base-command.js'
import PipeHelp from '../cli/help.js'

/** `pipe help [COMMAND]`: pipe's own, so that its help class and errors are the bundle's (cli/help.ts). */
export default class HelpCommand extends PipeCommand {
  static override description = 'Display help for <%= config.bin %>.'
  static override args = {command: Args.string({description: 'Command to show help for.', required: false})}
  static override flags = {'nested-commands': Flags.boolean({char: 'n', description: 'Include all nested commands in the output.'})}
  static override strict = false

  async run(): Promise<void> {
    const {argv, flags} = await this.parse(HelpCommand)
    const words = argv.filter((a): a is string => typeof a === 'string')
    await new PipeHelp(this.config, {all: flags['nested-commands']}).showHelp(this.jsonEnabled() ? [...words, '--json'] : words)
  }
}
