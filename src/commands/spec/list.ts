import * as Flags from '../../cli/flags.js'
import {PipeCommand} from '../../cli/base-command.js'
import {renderSpecList} from '../../cli/views.js'
import {listSpecs, type SpecSummary} from '../../store/queries.js'
import {openStore} from '../../store/open.js'
import {assertId} from '../../store/file/ids.js'
import {line as t} from '../../util/terminal-text.js'

export default class SpecList extends PipeCommand {
  static override summary = 'List spec versions, newest first.'
  static override examples = [
    {description: 'Every version of a feature', command: '<%= config.bin %> <%= command.id %> --feature F-2026-001'},
    {description: 'The versions one run wrote', command: '<%= config.bin %> <%= command.id %> --run R-20261121-0001'},
  ]
  static override flags = {
    feature: Flags.string({description: 'Only versions of this feature.', helpValue: 'F-YYYY-NNN'}),
    run: Flags.string({description: 'Only versions written by this run.', helpValue: 'R-YYYYMMDD-NNNN'}),
    limit: Flags.integer({char: 'n', description: 'Most versions to show (newest first).', default: 50, min: 1}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{specs: SpecSummary[]}> {
    const {flags} = await this.parse(SpecList)
    if (flags.feature !== undefined) assertId('feature', flags.feature, '--feature')
    if (flags.run !== undefined) assertId('run', flags.run, '--run')
    const store = await openStore(this.storeDir(flags.store), 'if-exists')
    const specs =
      store === null
        ? []
        : await listSpecs(store, {
            ...(flags.feature ? {feature: flags.feature} : {}),
            ...(flags.run ? {run: flags.run} : {}),
            ...(flags.limit ? {limit: flags.limit} : {}),
          })
    if (!this.jsonEnabled()) {
      process.stdout.write(renderSpecList(specs))
      // A damaged version is listed as such; what is wrong with it, and its file, goes to stderr.
      for (const spec of specs) if (spec.problem) process.stderr.write(t`${spec.spec_version}: ${spec.problem}\n`)
    }
    return {specs}
  }
}
