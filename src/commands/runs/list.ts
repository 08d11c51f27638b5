import * as Flags from '../../cli/flags.js'
import {applyPassedDeadlines} from '../../app/sessions/confirm-deadline.js'
import {PipeCommand} from '../../cli/base-command.js'
import {line as t} from '../../util/terminal-text.js'
import {renderRunList} from '../../cli/views.js'
import {listRuns, type RunSummary} from '../../store/queries.js'
import {openStore} from '../../store/open.js'
import type {RunStatus} from '../../types/run.js'
import {assertId} from '../../store/file/ids.js'

export default class RunsList extends PipeCommand {
  static override summary = 'List runs, newest first.'
  static override description =
    "A run recorded as running whose process no longer exists is shown as interrupted; pipe resume continues it. A run waiting for a person past its gate's deadline is first decided as the policy's on_timeout says (docs/policy.md), so it is listed as it now is. Child runs (of pipeline and foreach steps) are listed under their parent; --all lists every run on its own row."
  static override examples = [
    {description: 'The last 20 runs', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'Runs waiting for a person', command: '<%= config.bin %> <%= command.id %> --status awaiting_input'},
    {description: 'Every run, child runs on rows of their own', command: '<%= config.bin %> <%= command.id %> --all'},
    {description: 'All runs of a feature, as JSON', command: '<%= config.bin %> <%= command.id %> --feature F-2026-001 --limit 1000 --json'},
  ]
  static override flags = {
    limit: Flags.integer({char: 'n', description: 'Most runs to show.', default: 20, min: 1}),
    status: Flags.string({
      description: 'Only runs in this status.',
      options: ['pending', 'running', 'awaiting_input', 'succeeded', 'failed', 'blocked', 'cancelled', 'interrupted'],
    }),
    feature: Flags.string({description: 'Only runs of this feature.', helpValue: 'F-YYYY-NNN'}),
    all: Flags.boolean({description: 'List every run, child runs too, each on its own row (filters and --limit then apply to each).', default: false}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{runs: RunSummary[]}> {
    const {flags} = await this.parse(RunsList)
    if (flags.feature !== undefined) assertId('feature', flags.feature, '--feature')
    const store = await openStore(this.storeDir(flags.store), 'if-exists')
    // A gate whose deadline passed acts first (its on_timeout), as on pipe runs show: a run the policy decided is not listed as waiting.
    if (store !== null)
      for (const failed of await applyPassedDeadlines({cwd: process.cwd(), store: this.storeDir(flags.store), opened: store}))
        process.stderr.write(
          t`warning: run ${failed.run_id}'s deadline passed, but what the policy says it does could not be done: [${failed.code}] ${failed.message}\n`,
        )
    const runs =
      store === null
        ? []
        : await listRuns(store, {
            limit: flags.limit,
            ...(flags.status ? {status: flags.status as RunStatus} : {}),
            ...(flags.feature ? {feature: flags.feature} : {}),
            all: flags.all,
          })
    // A shared store names the worker of each running run (a folder store has none: its list is as it was).
    if (store?.holding) {
      const running = (list: RunSummary[]): RunSummary[] => list.flatMap((r) => [...(r.status === 'running' ? [r] : []), ...running(r.children ?? [])])
      for (const run of running(runs)) {
        const worker = (await store.holding(run.run_id))?.worker
        if (worker) run.worker = worker.name ?? `${worker.host}:${worker.pid}`
      }
    }
    if (!this.jsonEnabled()) process.stdout.write(renderRunList(runs))
    return {runs}
  }
}
