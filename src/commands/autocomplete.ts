import path from 'node:path'
import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {writeCompletion, type Shell} from '../cli/completion.js'
import {readManifest} from '../cli/manifest.js'
import {PipeError} from '../errors.js'

export default class Autocomplete extends PipeCommand {
  static override summary = 'Display autocomplete installation instructions.'
  static override description = `Writes the completion function for the shell (bash or zsh; default: the one $SHELL names) to pipe's cache folder ($XDG_CACHE_HOME/pipe/autocomplete, default ~/.cache/pipe/autocomplete) and prints how to load it from the shell's start-up file. Commands, topics and flags complete; any other word completes as a file name (a pipeline, a policy).`
  static override examples = [
    {description: 'Set up bash', command: '<%= config.bin %> <%= command.id %> bash'},
    {description: 'Set up zsh', command: '<%= config.bin %> <%= command.id %> zsh'},
    {description: 'After upgrading pipe: rewrite the completion functions', command: '<%= config.bin %> <%= command.id %> --refresh-cache'},
  ]
  static override enableJsonFlag = false
  static override args = {shell: Args.string({description: 'The shell: bash or zsh (default: the one $SHELL names).'})}
  static override flags = {'refresh-cache': Flags.boolean({char: 'r', description: 'Only rewrite the completion functions (no instructions).'})}

  async run(): Promise<void> {
    const {args, flags} = await this.parse(Autocomplete)
    const shell = shellOf(args.shell)
    writeCompletion(readManifest(this.config.root), shell)
    if (flags['refresh-cache']) return
    const bin = this.config.bin
    const rc = shell === 'bash' ? '~/.bashrc' : '~/.zshrc'
    process.stdout.write(
      [
        `Completion for ${shell} is written. To load it in every ${shell}, run once:`,
        '',
        `  printf "$(${bin} autocomplete script ${shell})" >> ${rc}; source ${rc}`,
        '',
        `Then ${bin} <TAB>${shell === 'bash' ? '<TAB>' : ''} completes commands, ${bin} run --<TAB> flags, and other words file names.`,
        `After upgrading ${bin}, run ${bin} autocomplete --refresh-cache.`,
        '',
      ].join('\n'),
    )
  }
}

export function shellOf(given: string | undefined): Shell {
  const shell = given ?? (process.env.SHELL ? path.basename(process.env.SHELL) : 'bash')
  if (shell === 'bash' || shell === 'zsh') return shell
  throw new PipeError('E_INVALID_ARGS', `no completion for the shell ${JSON.stringify(shell)}`, {hint: 'pipe autocomplete bash, or pipe autocomplete zsh.'})
}
