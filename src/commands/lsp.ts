import * as Flags from '../cli/flags.js'
import {serveLanguage} from '../app/lsp/server.js'
import {PipeCommand} from '../cli/base-command.js'
import {writeOut} from '../cli/std-streams.js'
import {PipeError} from '../errors.js'
import {kindCatalog} from '../steps/registry.js'

export default class Lsp extends PipeCommand {
  static override summary = 'A language server for pipeline files: the checks of pipe validate as you type, completion of step ids, kinds and expressions.'
  static override description = `Speaks the Language Server Protocol over standard input and output; an editor starts it (--stdio) and talks to it. For each open pipeline file it publishes the diagnostics pipe validate gives (every error in one pass, with its range), checking the editor's unsaved text: prompt, schema and child pipeline files resolve relative to the document's path. It completes step ids in next:, on: and on_exhausted:, step kinds after kind:, and inside \${{ }} every name an expression may read (inputs.<name>, steps.<id>.outputs.<field>, spec, run, secrets, policy); hovering over a step's kind shows its contract (outcomes, failures, outputs). Policy, answers and test files get no diagnostics here: pipe validate checks them.`
  static override enableJsonFlag = false
  static override examples = [{description: 'Started by an editor (see docs: Editor support)', command: '<%= config.bin %> <%= command.id %> --stdio'}]
  static override flags = {
    stdio: Flags.boolean({description: 'Talk LSP over standard input and output (the only transport).'}),
  }

  async run(): Promise<void> {
    const {flags} = await this.parse(Lsp)
    if (!flags.stdio) {
      throw new PipeError('E_INVALID_ARGS', 'pipe lsp talks to an editor over standard input and output only', {
        hint: "Start it as your editor's language server command: pipe lsp --stdio (docs/language.md, Editor support).",
      })
    }
    await serveLanguage({input: process.stdin, write: writeOut}, kindCatalog)
  }
}
