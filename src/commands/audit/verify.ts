import {Args} from '@oclif/core'
import {PipeCommand} from '../../cli/base-command.js'
import {PipeError} from '../../errors.js'
import {auditStore, type AuditReport} from '../../store/audit.js'
import {Store} from '../../store/store.js'
import {assertId} from '../../store/ids.js'

export default class AuditVerify extends PipeCommand {
  static override summary = 'Recompute every hash and link of the audit trail and name each record changed after the fact.'
  static override description = `Checks, for one run or the whole store: each snapshot's field hashes and record hash, the hash chain from each snapshot to the one before it, that seq runs from 1 without gaps, each spec version's content hash, each evidence record's hash, and that every record still matches its schema. Every problem is named with its record, file and field.

Exit code 0 when everything checks out, 4 (CONFLICT) when anything was changed.`
  static override examples = [
    {description: 'The whole store', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'One run, as JSON', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --json'},
  ]
  static override args = {run: Args.string({description: 'Only this run (and the records it refers to).'})}
  static override flags = {store: PipeCommand.storeFlag}

  async run(): Promise<AuditReport> {
    const {args, flags} = await this.parse(AuditVerify)
    if (args.run !== undefined) assertId('run', args.run)
    const store = await Store.existing(this.storeDir(flags.store))
    if (args.run) await store.readRun(args.run)
    const report = await auditStore(store, args.run)
    if (!this.jsonEnabled()) {
      for (const p of report.problems) process.stdout.write(`${p.file}  ${p.field}  ${p.record}: ${p.message}\n`)
      for (const n of report.notes) process.stderr.write(`note: ${n.file}  ${n.record}: ${n.message}\n`)
      process.stderr.write(`checked ${report.runs} run(s), ${report.snapshots} snapshot(s), ${report.specs} spec version(s), ${report.evidence} evidence record(s): ${report.ok ? 'all intact' : `${report.problems.length} problem(s)`}\n`)
    }
    if (!report.ok) {
      if (this.jsonEnabled()) {
        process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
        this.jsonPrinted = true
      }
      throw new PipeError('E_INTEGRITY', `${report.problems.length} record(s) of the audit trail do not match their hashes or links`, {
        hint: 'Each line above names the file and field; restore those files from a backup. Never edit records by hand.',
      })
    }
    return report
  }
}
