import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {rollbackEditSession, rollbackToCheckpointSession, type CheckpointRollbackResult, type RollbackResult} from '../app/sessions/rollback.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'
import {line as t} from '../util/terminal-text.js'

export default class Rollback extends PipeCommand {
  static override summary = "Undo the files an edit step of a run changed, or return a blocked run's workspace to its git checkpoint."
  static override description = `With --step or --seq: every file must still be exactly as the edit left it (its sha256 is checked), else nothing is changed (E_CONFLICT). Files the edit created are deleted. The undo is recorded in the run's timeline.

With --checkpoint: the run must be blocked (a task an agent could not finish, say); its workspace goes back to the commit its latest git checkpoint step made (git reset --hard and clean: an agent's edits, new files and all; what the working tree held is first saved in a git stash, named in the output and the record, so nothing a person added meanwhile is lost), the run stays blocked, idle, and its record and timeline say who did it, why (--note, required) and from which commit to which. The command that continues is printed: for a foreach's task, pipe resume PARENT --skip KEY --note TEXT.`
  static override examples = [
    {description: 'Undo the latest edit of step fix', command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --step fix'},
    {description: "Undo one snapshot's edit", command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --seq 2'},
    {
      description: "Return a blocked task's workspace to its checkpoint commit",
      command: '<%= config.bin %> <%= command.id %> R-20261122-0002 --checkpoint --note "the agent went the wrong way"',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    step: Flags.string({description: 'The edit step whose latest change to undo.', helpValue: 'STEP', exclusive: ['seq', 'checkpoint']}),
    seq: Flags.integer({description: 'The snapshot whose edit to undo.', min: 1, exclusive: ['step', 'checkpoint']}),
    checkpoint: Flags.boolean({description: "Return the blocked run's workspace to the commit its latest git checkpoint made.", exclusive: ['step', 'seq']}),
    note: Flags.string({description: 'Why (required with --checkpoint); recorded.', helpValue: 'TEXT', dependsOn: ['checkpoint']}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RollbackResult | CheckpointRollbackResult> {
    const {args, flags} = await this.parse(Rollback)
    assertId('run', args.run)
    if (flags.checkpoint) {
      if (flags.note === undefined)
        throw new PipeError('E_INVALID_ARGS', 'a rollback to a checkpoint needs a reason: --note TEXT is recorded with it', {
          hint: `pipe rollback ${args.run} --checkpoint --note "why"`,
        })
      const back = await rollbackToCheckpointSession({cwd: process.cwd(), store: this.storeDir(flags.store), runId: args.run, note: flags.note})
      if (!this.jsonEnabled()) {
        process.stdout.write(t`rolled ${back.run_id} back to checkpoint ${back.to} (step ${back.step} #${back.seq}) from ${back.from ?? 'no commit'}:\n`)
        for (const f of back.files) process.stdout.write(t`  restored  ${f}\n`)
        if (back.saved)
          process.stdout.write(
            t`What the working tree held was saved first (stash ${back.saved}): git stash show --include-untracked ${back.saved} lists it, git stash apply ${back.saved} brings it back.\n`,
          )
        process.stdout.write(`Continue with:\n${back.next.map((c) => t`  ${c}\n`).join('')}`)
      }
      return back
    }
    if (flags.step !== undefined) assertId('step', flags.step, '--step')
    const result = await rollbackEditSession({
      cwd: process.cwd(),
      store: this.storeDir(flags.store),
      runId: args.run,
      ...(flags.step ? {step: flags.step} : {}),
      ...(flags.seq !== undefined ? {seq: flags.seq} : {}),
    })
    if (!this.jsonEnabled()) {
      process.stdout.write(t`undid the edit of ${result.step} (#${result.seq}) in ${result.run_id}:\n`)
      for (const f of result.files) process.stdout.write(t`  ${f.restored}  ${f.path}\n`)
    }
    return result
  }
}
