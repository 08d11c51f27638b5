import * as Args from '../../cli/args.js'
import {PipeCommand} from '../../cli/base-command.js'
import {setupLine} from '../../cli/completion.js'
import {shellOf} from '../autocomplete.js'

export default class AutocompleteScript extends PipeCommand {
  static override summary = "Print the line a shell's start-up file loads pipe's completion with."
  static override hidden = true
  static override enableJsonFlag = false
  static override examples = ['<%= config.bin %> <%= command.id %> bash']
  static override args = {shell: Args.string({description: 'The shell: bash or zsh (default: the one $SHELL names).'})}

  async run(): Promise<void> {
    const {args} = await this.parse(AutocompleteScript)
    process.stdout.write(`\n${setupLine(this.config.bin, shellOf(args.shell))}\n`)
  }
}
