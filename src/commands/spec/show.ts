import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {stringify} from 'yaml'
import {PipeCommand} from '../../cli/base-command.js'
import {specToMarkdown} from '../../spec/markdown.js'
import {Store} from '../../store/store.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {assertId} from '../../store/ids.js'
import {visible} from '../../util/terminal-text.js'

export default class SpecShow extends PipeCommand {
  static override summary = 'Show a spec version (its content hash is checked on read).'
  static override examples = [
    {description: 'Read a version as Markdown', command: '<%= config.bin %> <%= command.id %> S-20261121-0003'},
    {description: 'The stored record', command: '<%= config.bin %> <%= command.id %> S-20261121-0003 --json'},
  ]
  static override args = {version: Args.string({description: 'Spec version (S-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    format: Flags.string({description: 'Human output format.', options: ['markdown', 'yaml'], default: 'markdown'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<CanonicalSpec> {
    const {args, flags} = await this.parse(SpecShow)
    assertId('spec', args.version)
    const store = await Store.existing(this.storeDir(flags.store))
    const spec = await store.readSpec(args.version)
    if (!this.jsonEnabled()) {
      // yaml is imported statically: the bundle's import() of it gave a namespace without stringify (E_INTERNAL).
      if (flags.format === 'yaml') process.stdout.write(visible(stringify(spec, {lineWidth: 110})))
      else process.stdout.write(visible(specToMarkdown(spec)))
    }
    return spec
  }
}
