import * as Args from '../../cli/args.js'
import * as Flags from '../../cli/flags.js'
import {trustedKeys, verifyAttestation, type VerifyReport} from '../../app/attest/verify.js'
import {PipeCommand} from '../../cli/base-command.js'
import {openStore} from '../../store/open.js'
import {line as t} from '../../util/terminal-text.js'

export default class AttestVerify extends PipeCommand {
  static override summary =
    'Check an attestation offline, without a store: its signatures against the keys you trust, and each named file against its subjects.'
  static override description = `Each envelope of the bundle must be a DSSE envelope of an in-toto Statement v1, signed over DSSE's PAE by a key of --key or of --policy's attestation.trusted_keys that is not revoked; each --subject file must hash (sha256) to a subject's digest. Prints what the run was: its pipeline, input, status, models, people's decisions and chain head. A decision the person signed is checked against its own signature (an altered one is refused, whoever signed the bundle) and its key against the trusted keys (a revoked one refused; one not named is printed as such).

With --store DIR|URL, the run's records in that store are checked as well: they must pass the audit (as pipe audit verify RUN) and give the very statements that were signed; a store altered after the attestation fails, naming where the statements part.

Exit code 0 when everything checks out, 4 (CONFLICT) when anything does not (a damaged or re-encoded envelope, an untrusted or revoked key, a changed payload, a subject file that differs), with what failed. Nothing is written.`
  static override examples = [
    {
      description: "Against the team's trusted keys, with the files you were given",
      command: '<%= config.bin %> <%= command.id %> R-20261121-0001.intoto.jsonl --policy policy.yaml --subject published/F-2026-001/S-20261121-0003.json',
    },
    {
      description: "Also against the store's records of the run",
      command: '<%= config.bin %> <%= command.id %> R-20261121-0001.intoto.jsonl --policy policy.yaml --store .pipe',
    },
    {description: 'Against one public key, as JSON', command: '<%= config.bin %> <%= command.id %> R-20261121-0001.intoto.jsonl --key ci.pub --json'},
  ]
  static override args = {file: Args.string({description: 'The bundle pipe attest wrote (.intoto.jsonl).', required: true})}
  static override flags = {
    subject: Flags.string({description: 'A file to check against the subjects (repeatable).', multiple: true, helpValue: 'PATH'}),
    key: Flags.string({description: 'Trust this Ed25519 public key (a .pub file of pipe keys generate).', helpValue: 'PUBKEY', exclusive: ['policy']}),
    policy: Flags.string({
      description: 'Trust the keys of this policy file (attestation.trusted_keys; revoked ones refused).',
      helpValue: 'FILE',
      exclusive: ['key'],
    }),
    store: Flags.string({
      description:
        'Also check the run against this store: its records pass the audit and give the very statements signed (a store altered after the attestation fails).',
      helpValue: 'DIR|URL',
    }),
  }

  async run(): Promise<VerifyReport> {
    const {args, flags} = await this.parse(AttestVerify)
    const trusted = await trustedKeys({...(flags.key !== undefined ? {key: flags.key} : {}), ...(flags.policy !== undefined ? {policy: flags.policy} : {})})
    const report = await verifyAttestation(args.file, {
      subjects: flags.subject ?? [],
      trusted,
      ...(flags.store !== undefined ? {store: {store: await openStore(this.storeDir(flags.store), 'existing'), pipeVersion: this.config.version}} : {}),
    })
    if (!this.jsonEnabled()) {
      const r = report.run
      const pipeline = r.pipeline as {name?: string; digest?: {sha256?: string}} | null
      const input = r.input as {kind?: string; digest?: {sha256?: string}} | null
      process.stdout.write(t`run ${r.run_id}  ${r.status ?? ''}  ${r.started ?? ''} .. ${r.finished ?? ''}\n`)
      process.stdout.write(t`  pipeline ${pipeline?.name ?? '?'}  sha256:${pipeline?.digest?.sha256 ?? '?'}\n`)
      if (input) process.stdout.write(t`  input ${input.kind ?? ''}  sha256:${input.digest?.sha256 ?? '?'}\n`)
      process.stdout.write(t`  builder ${r.builder ?? '?'}\n  models ${report.models.join(', ') || '(none)'}\n`)
      for (const d of report.decisions as Array<{kind?: string; step?: string; decision?: string; by?: string; at?: string}>)
        process.stdout.write(t`  decision ${d.step ?? ''} ${d.decision ?? d.kind ?? ''} by ${d.by ?? '?'} at ${d.at ?? '?'}\n`)
      if (r.chain_head)
        process.stdout.write(
          t`  chain head ${Object.entries(r.chain_head as Record<string, string>)
            .map(([a, d]) => `${a}:${d}`)
            .join(' ')}\n`,
        )
      for (const s of report.subjects)
        process.stdout.write(
          t`  subject ${s.name}  ${Object.entries(s.digest)
            .map(([a, d]) => `${a}:${d}`)
            .join(' ')}\n`,
        )
      for (const s of report.signed_decisions)
        process.stdout.write(
          t`  signed ${s.step} ${s.decision} by ${s.by.id}${s.by.name !== undefined ? ` as ${s.by.name}` : ''} at ${s.at} with key ${s.key_name ?? s.key_id}${s.trust === 'trusted' ? '' : ' (NOT a key you trust)'}\n`,
        )
      for (const c of report.checked_subjects) process.stdout.write(t`  checked ${c.file} = ${c.name}\n`)
      if (report.store) process.stdout.write(t`  store: the run's records pass the audit and give these statements\n`)
      process.stderr.write(
        t`signature: ${report.signed_by.map((s) => `${s.name} (${s.id})`).join(', ')}; ${String(report.checked_subjects.length)} file(s) match their subjects: verified\n`,
      )
    }
    return report
  }
}
