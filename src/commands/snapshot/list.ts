import * as Args from '../../cli/args.js'
import {PipeCommand} from '../../cli/base-command.js'
import {renderSnapshotList} from '../../cli/views.js'
import {openStore} from '../../store/open.js'
import type {Snapshot} from '../../types/snapshot.js'
import {assertId} from '../../store/file/ids.js'

export default class SnapshotList extends PipeCommand {
  static override summary = "List a run's snapshots: one per executed step, in order."
  static override examples = [{description: 'Every step of a run', command: '<%= config.bin %> <%= command.id %> R-20261121-0001'}]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {store: PipeCommand.storeFlag}

  async run(): Promise<{run_id: string; snapshots: Array<Pick<Snapshot, 'step' | 'spec_version_in' | 'spec_version_out' | 'decisions'> & {errors: number}>}> {
    const {args, flags} = await this.parse(SnapshotList)
    assertId('run', args.run)
    const store = await openStore(this.storeDir(flags.store), 'existing')
    await store.readRun(args.run)
    const snapshots = await store.readSnapshots(args.run)
    if (!this.jsonEnabled()) process.stdout.write(renderSnapshotList(snapshots))
    return {
      run_id: args.run,
      snapshots: snapshots.map((s) => ({
        step: s.step,
        spec_version_in: s.spec_version_in,
        spec_version_out: s.spec_version_out,
        decisions: s.decisions,
        errors: s.errors.length,
      })),
    }
  }
}
