import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {finishRun} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {cancelSession} from '../app/sessions/cancel.js'
import {assertId} from '../store/file/ids.js'

export default class Cancel extends PipeCommand {
  static override summary = 'End a run as cancelled.'
  static override description =
    "A paused, interrupted or blocked run is cancelled at once; a paused run's waiting step is recorded cancelled. A run being driven by a live pipe process is asked to stop through the store (a cancel request, and SIGUSR2 to wake it): that process records the running step cancelled and ends that run alone; a process that merely reuses the recorded pid is never signalled. The reason and the OS user are recorded in its timeline. Exits 0 when it cancelled the run (it did what was asked), 2 when the run had already ended."
  static override examples = [
    {description: 'Cancel a paused run', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --reason "superseded by R-20261121-0007"'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    reason: Flags.string({char: 'r', description: 'Why; recorded in the timeline.', helpValue: 'TEXT'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult> {
    const {args, flags} = await this.parse(Cancel)
    assertId('run', args.run)
    const store = this.storeDir(flags.store)
    const session = {cwd: process.cwd(), store}
    const outcome = await cancelSession({...session, runId: args.run, ...(flags.reason ? {reason: flags.reason} : {})})
    const result = await finishRun(outcome, session, this.jsonEnabled(), flags.store, false)
    // Cancelling was asked for and done: a success (5, CANCELLED, is for a run that ended cancelled while it was meant to go on).
    if (result.status === 'cancelled') process.exitCode = 0
    return result
  }
}
