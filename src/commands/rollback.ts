import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {PipeCommand} from '../cli/base-command.js'
import {rollbackEditSession, type RollbackResult} from '../app/sessions/rollback.js'
import {assertId} from '../store/file/ids.js'
import {line as t} from '../util/terminal-text.js'

export default class Rollback extends PipeCommand {
  static override summary = 'Undo the files an edit step of a run changed, using the reverse patch in its snapshot.'
  static override description =
    "Every file must still be exactly as the edit left it (its sha256 is checked), else nothing is changed (E_CONFLICT). Files the edit created are deleted. The undo is recorded in the run's timeline."
  static override examples = [
    {description: 'Undo the latest edit of step fix', command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --step fix'},
    {description: "Undo one snapshot's edit", command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --seq 2'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    step: Flags.string({description: 'The edit step whose latest change to undo.', helpValue: 'STEP', exclusive: ['seq']}),
    seq: Flags.integer({description: 'The snapshot whose edit to undo.', min: 1, exclusive: ['step']}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RollbackResult> {
    const {args, flags} = await this.parse(Rollback)
    assertId('run', args.run)
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
