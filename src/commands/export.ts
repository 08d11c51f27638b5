import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {PipeCommand} from '../cli/base-command.js'
import {exportRun} from '../engine/export.js'
import {Store} from '../store/store.js'
import {assertId} from '../store/ids.js'
import {line as t} from '../util/terminal-text.js'

export default class Export extends PipeCommand {
  static override summary = "Write a run's records as files: state.json and timeline.md per run, each step's command logs, and for coding work each task's attempts and verdict.json."
  static override examples = [{description: 'Export a coding run', command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --dir artifacts'}]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    dir: Flags.string({char: 'd', description: 'Directory to write (created if needed).', default: 'artifacts', helpValue: 'DIR'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{dir: string; files: string[]}> {
    const {args, flags} = await this.parse(Export)
    assertId('run', args.run)
    const store = await Store.existing(this.storeDir(flags.store))
    const result = await exportRun(store, args.run, flags.dir)
    if (!this.jsonEnabled()) process.stdout.write(`${result.files.map((f) => t`${result.dir}/${f}`).join('\n')}\n`)
    return result
  }
}
