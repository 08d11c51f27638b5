import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {withSignals} from '../cli/signals.js'
import {writeErr} from '../cli/std-streams.js'
import {runWorker, type WorkerSummary} from '../app/worker/worker.js'
import {checkQueue} from '../cli/queue-flag.js'

export type {WorkerSummary} from '../app/worker/worker.js'

export default class Worker extends PipeCommand {
  static override summary = 'Claim queued runs from a PostgreSQL store and drive them, until stopped.'
  static override description = `Drives the runs that pipe run --detach put on a queue of the store, up to --concurrency at a time, with the same engine as pipe run. A run is held under a lease on its row that the worker renews while it drives it: a worker that dies (SIGKILL, a lost machine) loses its runs to another worker once the lease runs out (PIPE_LEASE_MS, default 30000), and a worker frozen past its lease cannot commit when it wakes (the run's epoch has moved on). The step that was in flight then runs again on the new worker.

The children of a foreach step are jobs of the queue too: any worker may drive one, the step's concurrency holds over all workers, and fail_fast stops children other workers hold. A parent that waits for its children holds no slot of --concurrency.

A worker serves only the runs of the workspaces it was started for: each --workspace DIR, or the workspace of the folder it was started in. A workspace is the git repository (named by its first commit, so another checkout of it on another machine serves it too), or the folder outside git. A queued run that no live worker of its queue serves waits, and pipe runs show says which workspace it waits for.

With --schedule FILE, the worker also fires the schedules the pipeline declares (docs/team.md, Schedules): it looks about once a second, and each slot queues one run on the schedule's queue, whichever workers look (the slot is the primary key of the row queued with the run).

A run stays queued until it stops: it ends, or waits for a person (answers, a review, a confirmation). SIGTERM or SIGINT drains the worker: it takes no new run, hands back what it drives (recorded as interrupted, still queued, so another worker goes on from the last snapshot) and exits 0.`
  static override examples = [
    {
      description: 'Four runs at a time from the team database',
      command: '<%= config.bin %> <%= command.id %> --concurrency 4 --store postgres://pipe@db.example:5432/pipe',
    },
    {description: 'A queue of its own', command: 'PIPE_STORE=postgres://pipe@db.example:5432/pipe <%= config.bin %> <%= command.id %> --queue nightly'},
    {
      description: "Also fire the nightly pipeline's schedules (each slot once, however many workers do)",
      command: '<%= config.bin %> <%= command.id %> --schedule pipelines/nightly.yaml',
    },
    {description: 'Serve two checkouts', command: '<%= config.bin %> <%= command.id %> --workspace ~/src/app --workspace ~/src/infra'},
  ]
  static override flags = {
    concurrency: Flags.integer({description: 'How many runs this worker drives at once.', default: 1, min: 1, max: 256}),
    queue: Flags.string({description: 'The queue to take runs from (pipe run --detach --queue NAME).', default: 'default', helpValue: 'NAME'}),
    name: Flags.string({description: 'A name for this worker, shown with its host and pid by pipe runs show as the holder of a run.', helpValue: 'NAME'}),
    workspace: Flags.string({
      description: 'A checkout whose runs this worker serves (repeatable); default: the folder it is started in.',
      multiple: true,
      helpValue: 'DIR',
    }),
    schedule: Flags.string({
      description: 'A pipeline whose schedules: this worker fires (repeatable); each slot fires once over every worker of the store.',
      multiple: true,
      helpValue: 'FILE',
    }),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<WorkerSummary> {
    const {flags} = await this.parse(Worker)
    const summary = await withSignals(
      (signal) =>
        runWorker({
          store: this.storeDir(flags.store),
          queue: checkQueue(flags.queue),
          concurrency: flags.concurrency,
          ...(flags.name ? {name: flags.name} : {}),
          workspaces: flags.workspace ?? [],
          schedules: flags.schedule ?? [],
          cwd: process.cwd(),
          signal,
          log: (line) => writeErr(`${line}\n`),
        }),
      'draining: taking no new run, handing back the runs in progress (recorded as interrupted, still queued)',
    )
    process.exitCode = 0
    return summary
  }
}
