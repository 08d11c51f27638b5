import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {PipeCommand} from '../../cli/base-command.js'
import {diffValues, renderChanges, type Change} from '../../spec/diff.js'
import {openStore} from '../../store/open.js'
import {assertId} from '../../store/file/ids.js'
import {line as t, visible} from '../../util/terminal-text.js'

export default class SpecDiff extends PipeCommand {
  static override summary = 'Compare two spec versions field by field.'
  static override description =
    'List items (features, acceptance criteria, tasks, ...) are matched by their id, so a changed item shows as a change of its fields rather than a removal and an addition. Lines start with + (added), - (removed) or ~ (changed).'
  static override examples = [
    {description: 'What apply_answers changed', command: '<%= config.bin %> <%= command.id %> S-20261121-0004 S-20261121-0005'},
    {description: 'Ignore meta (ids, hashes, times)', command: '<%= config.bin %> <%= command.id %> S-20261121-0004 S-20261121-0008 --no-meta'},
  ]
  static override args = {
    from: Args.string({description: 'The older version.', required: true}),
    to: Args.string({description: 'The newer version.', required: true}),
  }
  static override flags = {
    meta: Flags.boolean({description: 'Include meta (version, hash, parent, times).', default: true, allowNo: true}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{from: string; to: string; changes: Change[]}> {
    const {args, flags} = await this.parse(SpecDiff)
    assertId('spec', args.from)
    assertId('spec', args.to)
    const store = await openStore(this.storeDir(flags.store), 'existing')
    const [a, b] = await Promise.all([store.readSpec(args.from), store.readSpec(args.to)])
    const left: Record<string, unknown> = {...a}
    const right: Record<string, unknown> = {...b}
    if (!flags.meta) {
      delete left.meta
      delete right.meta
    }
    const changes = diffValues(left, right)
    if (!this.jsonEnabled()) process.stdout.write(`${t`${args.from} -> ${args.to}`}\n${visible(renderChanges(changes))}`)
    return {from: args.from, to: args.to, changes}
  }
}
