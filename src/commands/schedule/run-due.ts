import * as Args from '../../cli/args.js'
import {PipeCommand} from '../../cli/base-command.js'
import {withSignals} from '../../cli/signals.js'
import {writeErr} from '../../cli/std-streams.js'
import {fireDue, type Fired} from '../../app/schedules/fire.js'
import {loadScheduled} from '../../app/schedules/schedules.js'
import {pipeNow} from '../../util/clock.js'
import {line as t} from '../../util/terminal-text.js'

export default class ScheduleRunDue extends PipeCommand {
  static override summary = 'Fire the slots of the pipelines’ schedules that are due now, each once: for a system cron line.'
  static override description = `Each schedule's slots due now (PIPE_NOW when set) fire once, however many times this runs and from where: on a folder store a file per slot (STORE/schedules/) is made only if it does not exist, and the run then runs in this process, to its end or until it waits for a person; on a PostgreSQL store the run is queued for pipe worker, in the transaction that records the slot. Slots missed while nothing ran are handled as each schedule's catch_up says (none, latest, all). Run it each minute from cron (docs/team.md, Schedules).

Without PIPELINE, the pipelines under ./pipelines that declare schedules. Exit code 0 when every run fired succeeded, was queued or was fired already; 1 when one failed.`
  static override examples = [
    {
      description: 'Fire what is due (a crontab line: * * * * * cd /srv/app && pipe schedule run-due)',
      command: '<%= config.bin %> <%= command.id %> pipelines/nightly.yaml',
    },
    {description: 'What fired, as JSON', command: '<%= config.bin %> <%= command.id %> --json'},
  ]
  static override strict = false
  static override args = {pipeline: Args.string({description: 'Pipeline files (default: those under ./pipelines that declare schedules).'})}
  static override flags = {store: PipeCommand.storeFlag}

  async run(): Promise<{fired: Fired[]}> {
    const {argv, flags} = await this.parse(ScheduleRunDue)
    const now = pipeNow()
    const scheduled = await loadScheduled(argv as string[], process.cwd())
    const store = this.storeDir(flags.store)
    const fired = await withSignals(
      (signal) => fireDue(scheduled, {store, cwd: process.cwd(), now, signal, log: (l) => writeErr(`${l}\n`)}),
      'stopping: the run in progress is recorded as interrupted',
    )
    if (!this.jsonEnabled()) {
      for (const f of fired) process.stdout.write(t`${f.pipeline}  ${f.schedule}  ${f.slot}  ${f.run_id ?? '-'}  ${f.status}\n`)
      if (fired.length === 0) this.progress('nothing due')
    }
    process.exitCode = fired.some((f) => f.status === 'failed' || f.status === 'not-fired') ? 1 : 0
    return {fired}
  }
}
