import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {auditArchives, verifyArchiveFile} from '../../app/archive.js'
import {checkDecisionSignatures, type SignedDecisionFinding} from '../../app/attest/decision-trust.js'
import {PipeCommand} from '../../cli/base-command.js'
import {PipeError} from '../../errors.js'
import {deliveredKeys} from '../../steps/registry.js'
import type {AuditReport} from '../../store/file/audit.js'
import type {SignedLine} from '../../store/types.js'
import {openStore} from '../../store/open.js'
import {assertId, compareIds} from '../../store/file/ids.js'
import {jsonText, line as t} from '../../util/terminal-text.js'

export default class AuditVerify extends PipeCommand {
  static override summary = 'Recompute every seal and link of the audit trail and name each record changed, removed, reordered or re-sealed after the fact.'
  static override description = `Checks, for one run or the whole store: each run record's seal and head (the timeline's length and last line, the last snapshot), each timeline line's seal and its link to the line before, each snapshot's seal, its link to the snapshot before and the spec version and evidence files it binds, that seq runs from 1 without gaps, the run index (every run created is still there, as created), feature records, and each ledger entry against the ledger log. Every problem is named with its record, file and field.

Leftovers of crashes (temporary files of a killed process, a run whose creation was interrupted) are tidied first and listed as cleaned, never as damage.

With PIPE_AUDIT_KEY set, pipe seals records with HMAC-SHA256 under that key, and verify checks them with it: a record re-sealed without the key fails. Without the key, keyed seals cannot be checked, and verify says so (exit 2) rather than pass.

A store's runs moved out by pipe store archive are proven too: the run index keeps an anchor for each, and each archive must still exist and be the file that was written (looked for where pipe store archive wrote it, or by name in --archives DIR). With --archive FILE, only that archive is checked, on its own: its digest, every member's sha256, and each record's seal and links as in a store; a changed byte is named with the archive's line, the run or record, and what.

The whole-store check prints the store's head digest (a hash over every run's seal, the run index, the ledger and the features): record it elsewhere to prove later that nothing was rewritten.

A person's decision signed with their key (pipe review, answer, confirm, budget and the view's forms, when PIPE_SIGNING_KEY or the default key of pipe keys generate exists) is checked too: a signature that no longer holds over the decision (it was changed after signing) and one by a key the run's policy marks revoked: true fail; one by a key its attestation.trusted_keys does not name is a note. Each signed decision is listed (stderr; signed_decisions with --json) with who signed it and whether the key is trusted.

Exit code 0 when everything checks out, 4 (CONFLICT) when anything was changed, 2 when keyed seals could not be checked.`
  static override examples = [
    {description: 'The whole store', command: '<%= config.bin %> <%= command.id %>'},
    {description: 'One run, as JSON', command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --json'},
    {description: 'A keyed store', command: 'PIPE_AUDIT_KEY=... <%= config.bin %> <%= command.id %>'},
    {
      description: 'A team database, with the archives copied from the backup volume',
      command: '<%= config.bin %> <%= command.id %> --store postgres://pipe@db:5432/pipe --archives ./pipe-archive',
    },
    {
      description: 'An archive that pipe store archive wrote, on its own',
      command: '<%= config.bin %> <%= command.id %> --archive .pipe/archive/R-20261121-0001.pipe-archive.jsonl',
    },
  ]
  static override args = {run: Args.string({description: 'Only this run, the runs it started, and the records that name them (index lines, ledger entries).'})}
  static override flags = {
    store: PipeCommand.storeFlag,
    archive: Flags.string({
      description: 'Check this archive file (pipe store archive) on its own, instead of a store.',
      helpValue: 'FILE',
      exclusive: ['store'],
    }),
    archives: Flags.string({
      description: "Look for the store's archives in this folder, by file name, instead of where pipe store archive wrote them.",
      helpValue: 'DIR',
      exclusive: ['archive'],
    }),
  }

  async run(): Promise<AuditReport & {signed_decisions?: SignedDecisionFinding[]}> {
    const {args, flags} = await this.parse(AuditVerify)
    if (args.run !== undefined) assertId('run', args.run)
    let report: AuditReport & {signed_decisions?: SignedDecisionFinding[]}
    if (flags.archive !== undefined) {
      if (args.run !== undefined)
        throw new PipeError('E_INVALID_ARGS', 'give a run or --archive, not both', {hint: 'An archive is checked whole: pipe audit verify --archive FILE.'})
      report = await verifyArchiveFile(flags.archive, {deliveredKeys})
    } else {
      const store = await openStore(this.storeDir(flags.store), 'existing')
      // Only that it exists: a damaged run record is for the audit to report, not to stop it.
      if (args.run) await store.assertRunExists(args.run)
      const signedLines: SignedLine[] = []
      report = await store.audit(args.run, {deliveredKeys, signedDecision: (found) => signedLines.push(found)})
      if (!args.run) await auditArchives(store, report, {deliveredKeys}, flags.archives !== undefined ? {archives: flags.archives} : {})
      // Listed newest run first, as runs list has them (the walk goes oldest first); a run's own lines in their order.
      if (!args.run) signedLines.sort((x, y) => compareIds(y.run_id, x.run_id))
      const signed = await checkDecisionSignatures(signedLines, report)
      if (signed.length > 0) report = {...report, signed_decisions: signed}
    }
    if (!this.jsonEnabled()) {
      for (const p of report.problems) process.stdout.write(t`${p.file}  ${p.field}  ${p.record}: ${p.message}\n`)
      for (const s of report.signed_decisions ?? [])
        process.stderr.write(
          t`signed: ${s.run_id} step ${s.step} ${s.decision} by ${s.by.id}${s.by.name !== undefined ? ` as ${s.by.name}` : ''} at ${s.at}, key ${s.key_name ?? s.key_id}: ${s.trust}\n`,
        )
      for (const c of report.cleaned) process.stderr.write(t`cleaned: ${c.file}: ${c.message}\n`)
      for (const n of report.notes) process.stderr.write(t`note: ${n.file}  ${n.record}: ${n.message}\n`)
      const verdict = !report.ok
        ? `${report.problems.length} problem(s)`
        : report.unverifiable > 0
          ? `${report.unverifiable} keyed seal(s) NOT checked (PIPE_AUDIT_KEY is not set)`
          : 'all intact'
      process.stderr.write(
        `checked ${report.runs} run(s), ${report.events} timeline line(s), ${report.snapshots} snapshot(s), ${report.specs} spec version(s), ${report.evidence} evidence record(s), ${report.features} feature(s), ${report.ledger} ledger entr${report.ledger === 1 ? 'y' : 'ies'}${report.keyed ? ' with the audit key' : ''}: ${verdict}\n`,
      )
      if (report.head) process.stdout.write(t`head ${report.head}\n`)
    }
    const fail = (error: PipeError): never => {
      if (this.jsonEnabled()) {
        process.stdout.write(`${jsonText(report)}\n`)
        this.jsonPrinted = true
      }
      throw error
    }
    if (!report.ok) {
      fail(
        new PipeError('E_INTEGRITY', `${report.problems.length} record(s) of the audit trail do not match their seals or links`, {
          hint: 'Each line above names the file and field; restore those files from a backup. Never edit records by hand.',
        }),
      )
    }
    if (report.unverifiable > 0) {
      fail(
        new PipeError('E_INVALID_ARGS', `${report.unverifiable} seal(s) are keyed and cannot be checked without the audit key`, {
          hint: 'Set PIPE_AUDIT_KEY to the key the store was written with, and run pipe audit verify again.',
        }),
      )
    }
    return report
  }
}
