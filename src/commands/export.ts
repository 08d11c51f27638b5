import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {exportSession} from '../app/export.js'
import {PipeError} from '../errors.js'
import {exportRunHtml} from '../view/export-html.js'
import {openStore} from '../store/open.js'
import {assertId} from '../store/file/ids.js'
import {line as t} from '../util/terminal-text.js'

export default class Export extends PipeCommand {
  static override summary =
    "Write a run's records as files: state.json and timeline.md per run, each step's command logs, and for coding work each task's attempts and verdict.json; or, with --html, the run's page as one self-contained HTML file."
  static override examples = [
    {description: 'Export a coding run', command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --dir artifacts'},
    {
      description: "The run's page (what pipe view shows) as one HTML file to attach to a ticket",
      command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --html run.html',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    dir: Flags.string({char: 'd', description: 'Directory to write (created if needed).', default: 'artifacts', helpValue: 'DIR'}),
    html: Flags.string({
      description:
        "Write the run's page as one self-contained HTML file (inline style and drawings, no external reference) instead of the files; its folder is made if needed; - writes it on standard output.",
      helpValue: 'FILE|-',
      exclusive: ['dir'],
    }),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{dir: string; files: string[]} | {html: string; bytes: number}> {
    const {args, flags} = await this.parse(Export)
    assertId('run', args.run)
    if (flags.html !== undefined) {
      if (flags.html === '-' && this.jsonEnabled())
        throw new PipeError('E_INVALID_ARGS', '--html - writes the page on standard output, where --json would write its result too', {
          hint: 'Give --html FILE with --json, or leave out --json.',
        })
      const store = await openStore(this.storeDir(flags.store), 'existing')
      const written = await exportRunHtml(store, args.run, flags.html)
      if (!this.jsonEnabled() && written.html !== '-') process.stdout.write(t`${written.html}\n`)
      return written
    }
    const result = await exportSession({cwd: process.cwd(), store: this.storeDir(flags.store), runId: args.run, dir: flags.dir})
    if (!this.jsonEnabled()) process.stdout.write(`${result.files.map((f) => t`${result.dir}/${f}`).join('\n')}\n`)
    return result
  }
}
