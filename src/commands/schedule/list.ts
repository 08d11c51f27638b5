import * as Args from '../../cli/args.js'
import {PipeCommand} from '../../cli/base-command.js'
import {lastFirings} from '../../app/schedules/fire.js'
import {loadScheduled, nextSlot} from '../../app/schedules/schedules.js'
import {pipeNow} from '../../util/clock.js'
import {line as t} from '../../util/terminal-text.js'

export interface ScheduleRow {
  pipeline: string
  schedule: string
  cron: string
  timezone: string
  queue: string
  catch_up: string
  next: string | null
  last: string | null
}

export default class ScheduleList extends PipeCommand {
  static override summary = 'Show each schedule of the pipelines: its next firing, and its last one from the store.'
  static override description = `A pipeline's schedules: key declares when its runs start by themselves (docs/team.md, Schedules). For each schedule this prints the pipeline, the schedule's name (its place in the list unless named), the cron expression and timezone, the next slot after now (PIPE_NOW when set) and the latest slot fired, as the store recorded it (none: never fired there).

Without PIPELINE, the pipelines under ./pipelines that declare schedules.`
  static override examples = [
    {description: 'The schedules of one pipeline', command: '<%= config.bin %> <%= command.id %> pipelines/nightly.yaml'},
    {
      description: 'Of every pipeline under ./pipelines, against the team database, as JSON',
      command: '<%= config.bin %> <%= command.id %> --store postgres://pipe@db.example:5432/pipe --json',
    },
  ]
  static override strict = false
  static override args = {pipeline: Args.string({description: 'Pipeline files (default: those under ./pipelines that declare schedules).'})}
  static override flags = {store: PipeCommand.storeFlag}

  async run(): Promise<{schedules: ScheduleRow[]}> {
    const {argv, flags} = await this.parse(ScheduleList)
    const now = pipeNow()
    const scheduled = await loadScheduled(argv as string[], process.cwd())
    const last = await lastFirings(scheduled, this.storeDir(flags.store), process.cwd())
    const rows = scheduled.flatMap((s) =>
      s.entries.map((e) => ({
        pipeline: e.pipeline,
        schedule: e.name,
        cron: e.cron,
        timezone: e.timezone,
        queue: e.queue,
        catch_up: e.catch_up,
        next: nextSlot(e, now)?.toISOString() ?? null,
        last: last.get(e.key)?.toISOString() ?? null,
      })),
    )
    if (!this.jsonEnabled())
      for (const r of rows)
        process.stdout.write(
          t`${r.pipeline}  ${r.schedule}  "${r.cron}" ${r.timezone}  next ${r.next ?? 'never'}  last ${r.last ?? 'never'}  queue ${r.queue}  catch_up ${r.catch_up}\n`,
        )
    return {schedules: rows}
  }
}
