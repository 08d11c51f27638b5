import * as Args from '@oclif/core/args'
import * as Flags from '@oclif/core/flags'
import {PipeCommand} from '../../cli/base-command.js'
import {renderSnapshot} from '../../cli/views.js'
import {PipeError} from '../../errors.js'
import {Store} from '../../store/store.js'
import type {Snapshot} from '../../types/snapshot.js'
import {assertId} from '../../store/ids.js'

export default class SnapshotShow extends PipeCommand {
  static override summary = 'Show what steps of a run took in, gave out and decided, and why.'
  static override description = `Without --step or --seq every snapshot of the run is shown. The human view shows the step, its timings, inputs, outputs, gate results, decisions with their reason and next step, evidence and errors.

With --json the records are printed exactly as stored (valid against schemas/snapshot.schema.json): one object for --seq, else a list.`
  static override examples = [
    {description: 'Why did the gates fail?', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --step validate_gates'},
    {description: 'One snapshot, as stored', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --seq 3 --json'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    step: Flags.string({char: 's', description: 'Only snapshots of this step (every iteration).', exclusive: ['seq'], helpValue: 'NAME'}),
    seq: Flags.integer({description: 'Only the snapshot with this sequence number.', exclusive: ['step'], min: 1}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<Snapshot | Snapshot[]> {
    const {args, flags} = await this.parse(SnapshotShow)
    assertId('run', args.run)
    if (flags.step !== undefined) assertId('step', flags.step, '--step')
    const store = await Store.existing(this.storeDir(flags.store))
    await store.readRun(args.run)
    const all = await store.readSnapshots(args.run)
    let chosen = all
    if (flags.seq !== undefined) chosen = all.filter((s) => s.step.seq === flags.seq)
    if (flags.step !== undefined) chosen = all.filter((s) => s.step.name === flags.step)
    if (chosen.length === 0) {
      const steps = [...new Set(all.map((s) => s.step.name))]
      const what = flags.seq !== undefined ? `seq ${flags.seq}` : flags.step !== undefined ? `step "${flags.step}"` : 'any step'
      throw new PipeError('E_NOT_FOUND', `run ${args.run} has no snapshot for ${what}`, {
        hint: all.length ? `It has seq 1-${all.length}; steps: ${steps.join(', ')}.` : 'The run has not finished a step yet (pipe runs show shows its state).',
      })
    }
    if (!this.jsonEnabled()) process.stdout.write(chosen.map(renderSnapshot).join('\n'))
    return flags.seq !== undefined ? chosen[0]! : chosen
  }
}
