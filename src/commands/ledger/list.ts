import * as Flags from '../../cli/flags.js'
import {PipeCommand} from '../../cli/base-command.js'
import {table} from '../../cli/views.js'
import {openStore} from '../../store/open.js'
import type {LedgerEntry} from '../../types/ledger.js'
import {assertId} from '../../store/file/ids.js'

export default class LedgerList extends PipeCommand {
  static override summary = 'List publications: one entry per feature + target + spec version, with status, attempts and external id.'
  static override examples = [
    {description: 'Everything published from this store', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'One feature, as JSON', command: '<%= config.bin %> <%= command.id %> --feature F-2026-001 --json'},
  ]
  static override flags = {
    feature: Flags.string({description: 'Only this feature.', helpValue: 'F-YYYY-NNN'}),
    run: Flags.string({description: 'Only publications of this run.', helpValue: 'R-YYYYMMDD-NNNN'}),
    target: Flags.string({description: 'Only this target.', helpValue: 'NAME'}),
    limit: Flags.integer({char: 'n', description: 'Most entries to show: the most recently written (newest update first).', default: 50, min: 1}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{entries: LedgerEntry[]}> {
    const {flags} = await this.parse(LedgerList)
    if (flags.feature !== undefined) assertId('feature', flags.feature, '--feature')
    if (flags.run !== undefined) assertId('run', flags.run, '--run')
    if (flags.target !== undefined) assertId('target', flags.target, '--target')
    const store = await openStore(this.storeDir(flags.store), 'if-exists')
    const entries =
      store === null
        ? []
        : await store
            .ledger()
            .list(
              {...(flags.feature ? {feature: flags.feature} : {}), ...(flags.run ? {run: flags.run} : {}), ...(flags.target ? {target: flags.target} : {})},
              flags.limit,
            )
    if (!this.jsonEnabled()) {
      if (entries.length === 0) process.stdout.write('no publications\n')
      else
        process.stdout.write(
          table([
            ['KEY', 'STATUS', 'ATTEMPTS', 'EXTERNAL ID', 'UPDATED'],
            ...entries.map((e) => [e.key, e.status, String(e.attempts.length), e.external_id ?? '-', e.updated_at]),
          ]),
        )
    }
    return {entries}
  }
}
