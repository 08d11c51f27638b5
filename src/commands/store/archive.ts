import * as Flags from '../../cli/flags.js'
import {archiveRuns, parseBefore, type ArchiveReport} from '../../app/archive.js'
import {PipeCommand} from '../../cli/base-command.js'
import {openStore} from '../../store/open.js'
import {line as t} from '../../util/terminal-text.js'

export default class StoreArchive extends PipeCommand {
  static override summary =
    'Move the runs that ended before a date out of the store, each into one archive file that pipe audit verify --archive checks on its own.'
  static override description = `A top-level run that ended (succeeded, failed or cancelled) before DATE leaves the store together with the runs it started, once every one of them has ended: a running, paused or queued run never moves, nor a parent whose children still live. Each such run becomes one file, DIR/RUN.pipe-archive.jsonl: its records as the store kept them (run records, timelines, snapshots, step states), the spec versions, evidence and features they name, the ledger entries of its publications with their ledger log lines, its run index lines and its live artifacts. The same run archived twice gives the same bytes.

The store keeps an anchor line per run that left, chained in its run index, so pipe audit verify still proves what stays and what left: a missing or changed archive is a finding. Spec versions, evidence and features stay in the store too (later runs and the ledger may name them).

A crash part way is finished by the next pipe store archive. Runs that are running meanwhile keep running.`
  static override examples = [
    {description: 'Archive the runs that ended before November 2026, into .pipe/archive/', command: '<%= config.bin %> <%= command.id %> --before 2026-11-01'},
    {description: 'What would move, as JSON', command: '<%= config.bin %> <%= command.id %> --before 2026-11-01 --dry-run --json'},
    {description: 'Into another folder', command: '<%= config.bin %> <%= command.id %> --before 2026-11-21T09:00:00Z --to /backups/pipe-archive'},
  ]
  static override flags = {
    store: PipeCommand.storeFlag,
    before: Flags.string({
      description: 'Archive the runs that ended before this day (YYYY-MM-DD, midnight UTC) or time (ISO 8601 with its zone).',
      required: true,
      helpValue: 'DATE',
    }),
    to: Flags.string({description: "The folder to write the archives into (default: the store folder's archive/).", helpValue: 'DIR'}),
    'dry-run': Flags.boolean({description: 'List what would move; move nothing, write nothing.'}),
  }

  async run(): Promise<ArchiveReport> {
    const {flags} = await this.parse(StoreArchive)
    const before = parseBefore(flags.before)
    const store = await openStore(this.storeDir(flags.store), 'existing')
    try {
      const report = await archiveRuns(store, {before, to: flags.to, dryRun: flags['dry-run']})
      if (!this.jsonEnabled()) {
        for (const id of report.finished) process.stderr.write(t`finished: ${id} (an interrupted archiving had anchored it)\n`)
        for (const a of report.archived)
          process.stdout.write(t`${a.run_id}  ${a.status}  ${a.archive}${a.runs.length > 1 ? `  (+${a.runs.length - 1} child run(s))` : ''}\n`)
        const n = report.archived.length
        process.stderr.write(report.dry_run ? `${n} run(s) would be archived (dry run: nothing moved)\n` : `${n} run(s) archived\n`)
      }
      return report
    } finally {
      await store.close?.()
    }
  }
}
