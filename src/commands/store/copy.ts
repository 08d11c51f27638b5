import * as Args from '../../cli/args.js'
import {PipeCommand} from '../../cli/base-command.js'
import {copyStore, type CopyReport} from '../../store/copy.js'
import {line as t} from '../../util/terminal-text.js'

export default class StoreCopy extends PipeCommand {
  static override summary = 'Copy every record of a store into another, empty one: a folder or a PostgreSQL database, either way.'
  static override description = `Runs, timelines, snapshots, spec versions, evidence, features, step states, the run index and the ledger are copied as they are kept (a file's bytes, a row's text), so every seal, chain and bind stays intact: pipe audit verify passes on the copy exactly when it passes on the original, and a store sealed with PIPE_AUDIT_KEY stays keyed (copying needs no key). The destination must hold no records; a database is written in one transaction, so a failed copy leaves it as it was.

SRC and DST are each a folder (a .pipe store) or a URL postgres://user@host:5432/db.`
  static override examples = [
    {description: 'Move a folder store to the team database', command: '<%= config.bin %> <%= command.id %> .pipe postgres://pipe@db.example:5432/pipe'},
    {
      description: 'A database into a folder (a backup that audit verify can check offline)',
      command: '<%= config.bin %> <%= command.id %> postgres://pipe@db.example:5432/pipe ./backup/.pipe',
    },
  ]
  static override args = {
    src: Args.string({description: 'The store to copy: a folder or a postgres:// URL.', required: true}),
    dst: Args.string({description: 'The empty store to copy into: a folder or a postgres:// URL.', required: true}),
  }

  async run(): Promise<CopyReport> {
    const {args} = await this.parse(StoreCopy)
    const report = await copyStore(args.src, args.dst)
    if (!this.jsonEnabled())
      process.stdout.write(
        t`copied ${String(report.runs)} run(s), ${String(report.snapshots)} snapshot(s), ${String(report.specs)} spec version(s), ${String(report.evidence)} evidence record(s), ${String(report.features)} feature(s) and ${String(report.ledger)} ledger entr(ies) from ${report.from} to ${report.to}\n`,
      )
    return report
  }
}
