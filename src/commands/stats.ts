import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {renderStats} from '../cli/stats-view.js'
import {collectStats, type StatsReport} from '../app/stats.js'
import {PipeError} from '../errors.js'
import {openStore} from '../store/open.js'

const DATE = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?)?$/

export default class Stats extends PipeCommand {
  static override summary =
    'Metrics of runs: steps run and failed, model tokens and cost; for coding work also task pass rate, mean attempts, failure categories, patch size and QA time; per pipeline and per run.'
  static override description =
    "A run's child runs (a foreach's items) count toward the top-level run that started them. A task is an agent or edit step's task (its task: field) with its attempts; it passed when its latest QA verdict passed on an edit of pipe's, and counts as fixed by a person (tasks_fixed_by_person) when that QA checked a person's fix; a task retried in a new child run is one task. Failure categories count failed QA verdicts (env_fail when QA could not run) and failed edits (patch_apply_fail). Runs without tasks, patches or QA are told in runs and steps only. Cost is summed from the snapshots that recorded one (the pipeline's provider.prices)."
  static override examples = [
    {description: 'Every run in the store', command: '<%= config.bin %> <%= command.id %>'},
    {
      description: "The coding pipeline's runs since a date, as JSON",
      command: '<%= config.bin %> <%= command.id %> --pipeline coding --since 2026-11-01 --json',
    },
  ]
  static override flags = {
    pipeline: Flags.string({char: 'p', description: 'Only runs of the pipeline with this name.', helpValue: 'NAME'}),
    since: Flags.string({description: 'Only runs created at or after this date (YYYY-MM-DD) or time (ISO 8601).', helpValue: 'DATE'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<StatsReport> {
    const {flags} = await this.parse(Stats)
    if (flags.since !== undefined && (!DATE.test(flags.since) || Number.isNaN(Date.parse(flags.since)))) {
      throw new PipeError('E_INVALID_ARGS', `--since ${flags.since} is not a date`, {hint: 'Give --since 2026-11-01 or --since 2026-11-01T08:00:00Z.'})
    }
    const store = await openStore(this.storeDir(flags.store), 'existing')
    const report = await collectStats(store, {
      ...(flags.pipeline !== undefined ? {pipeline: flags.pipeline} : {}),
      ...(flags.since !== undefined ? {since: flags.since} : {}),
    })
    if (!this.jsonEnabled()) process.stdout.write(renderStats(report))
    return report
  }
}
