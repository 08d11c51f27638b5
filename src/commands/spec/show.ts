import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {stringify} from 'yaml'
import {PipeCommand} from '../../cli/base-command.js'
import {specToMarkdown} from '../../spec/markdown.js'
import {openStore} from '../../store/open.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {PipeError} from '../../errors.js'
import {assertId} from '../../store/file/ids.js'
import {visible} from '../../util/terminal-text.js'

export default class SpecShow extends PipeCommand {
  static override summary = "Show a spec version, or a run's latest one (its content hash is checked on read)."
  static override examples = [
    {description: 'Read a version as Markdown', command: '<%= config.bin %> <%= command.id %> S-20261121-0003'},
    {description: 'The latest version a run has', command: '<%= config.bin %> <%= command.id %> R-20261121-0001'},
    {description: 'The stored record', command: '<%= config.bin %> <%= command.id %> S-20261121-0003 --json'},
  ]
  static override args = {
    version: Args.string({description: "Spec version (S-YYYYMMDD-NNNN), or a run (R-YYYYMMDD-NNNN): the run's latest version.", required: true}),
  }
  static override flags = {
    format: Flags.string({description: 'Human output format.', options: ['markdown', 'yaml'], default: 'markdown'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<CanonicalSpec> {
    const {args, flags} = await this.parse(SpecShow)
    // A run id is what pipe run prints last, so it is what a reader has at hand: its latest version is shown.
    const isRun = args.version.startsWith('R-')
    assertId(isRun ? 'run' : 'spec', args.version)
    const store = await openStore(this.storeDir(flags.store), 'existing')
    let version = args.version
    if (isRun) {
      const record = await store.readRun(args.version)
      if (!record.spec_version)
        throw new PipeError('E_NOT_FOUND', `run ${args.version} has no spec version yet`, {hint: `pipe runs show ${args.version} shows how far it got.`})
      version = record.spec_version
    }
    const spec = await store.readSpec(version)
    if (!this.jsonEnabled()) {
      // yaml is imported statically: the bundle's import() of it gave a namespace without stringify (E_INTERNAL).
      if (flags.format === 'yaml') process.stdout.write(visible(stringify(spec, {lineWidth: 110})))
      else process.stdout.write(visible(specToMarkdown(spec)))
    }
    return spec
  }
}
