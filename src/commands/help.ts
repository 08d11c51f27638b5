import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {readManifest} from '../cli/manifest.js'
import {showHelp} from '../cli/router.js'

/** `pipe help [COMMAND]`: the router answers it from the manifest without loading this class (cli/router.ts); this is its entry there. */
export default class HelpCommand extends PipeCommand {
  static override description = 'Display help for <%= config.bin %>.'
  static override args = {command: Args.string({description: 'Command to show help for.', required: false})}
  static override flags = {'nested-commands': Flags.boolean({char: 'n', description: 'Include all nested commands in the output.'})}
  static override strict = false

  async run(): Promise<void> {
    await this.parse(HelpCommand)
    showHelp(readManifest(this.config.root), this.argv)
  }
}
