import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {attestRun, type AttestResult} from '../app/attest/attest.js'
import {PipeCommand} from '../cli/base-command.js'
import {openStore} from '../store/open.js'
import {assertId} from '../store/file/ids.js'
import {line as t} from '../util/terminal-text.js'

export default class Attest extends PipeCommand {
  static override summary =
    "Sign what an ended run made: a DSSE envelope of a SLSA provenance statement and one of pipe's run statement, as an in-toto JSON-lines bundle."
  static override description = `The subjects are what the run (and its child runs) made, each by digest as the records hold it: the spec versions it published and their file copies, the files its write steps wrote (sha256), the commits its checkpoints made (gitCommit). The provenance (https://slsa.dev/provenance/v1) names the pipeline, the input and the policy by hash, the run id, its start and end, and its chain head; pipe's run statement (urn:pipe:attestation:run:v1) lists every step, model request, tool call, person's decision, gate result and spec version, each by its record's hash. No content goes in, only hashes. The same run attested twice gives the same statements.

A commit a run's checkpoint made carries a Pipe-Run trailer naming the run; once attested, pipe adds a git note (refs/notes/pipe) to it with the bundle's digest, Pipe-Attestation: sha256:..., so git log --notes=pipe leads from the commit to the statement. A repository that is not on this machine is said and left alone.

Signs with --key FILE, else PIPE_SIGNING_KEY, else the default key of pipe keys generate. Check it anywhere with pipe attest verify.`
  static override examples = [
    {description: 'Attest a run (writes R-20261121-0001.intoto.jsonl)', command: '<%= config.bin %> <%= command.id %> R-20261121-0001'},
    {
      description: 'On a CI machine, with its key, to a chosen file',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0001 --key ci.key --out release/provenance.intoto.jsonl --json',
    },
  ]
  static override args = {run: Args.string({description: 'The run to attest (it must have ended).', required: true})}
  static override flags = {
    out: Flags.string({description: 'The bundle to write (default: RUN.intoto.jsonl in the working directory).', helpValue: 'FILE'}),
    key: Flags.string({
      description: 'The Ed25519 private key to sign with (default: $PIPE_SIGNING_KEY, else the key pipe keys generate made).',
      helpValue: 'KEYFILE',
    }),
    'git-notes': Flags.boolean({
      description: "Note each attested commit with the bundle's digest (refs/notes/pipe: git log --notes=pipe shows it).",
      default: true,
      allowNo: true,
    }),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<AttestResult> {
    const {args, flags} = await this.parse(Attest)
    assertId('run', args.run)
    const store = await openStore(this.storeDir(flags.store), 'existing')
    const result = await attestRun(store, args.run, {
      out: flags.out ?? `${args.run}.intoto.jsonl`,
      ...(flags.key !== undefined ? {key: flags.key} : {}),
      pipeVersion: this.config.version,
      gitNotes: flags['git-notes'],
    })
    if (!this.jsonEnabled()) {
      for (const s of result.subjects)
        process.stdout.write(
          t`  ${s.name}  ${Object.entries(s.digest)
            .map(([a, d]) => `${a}:${d}`)
            .join(' ')}\n`,
        )
      process.stdout.write(
        t`attested ${result.run_id}: ${String(result.subjects.length)} subject(s), signed by ${result.key_id}\nwrote ${result.file} (${result.sha256})\n`,
      )
      const notes = result.git_notes
      if (notes.annotated.length > 0)
        process.stdout.write(t`noted ${String(notes.annotated.length)} commit(s) with it: git log --notes=pipe ${notes.annotated[0]!.slice(0, 12)}\n`)
      if (notes.missing.length > 0)
        process.stderr.write(t`no note on ${String(notes.missing.length)} commit(s)${notes.skipped ? `: ${notes.skipped}` : ': not in the repository'}\n`)
      process.stderr.write(t`Check it with:\n  pipe attest verify ${result.file} --policy policy.yaml\n`)
    }
    return result
  }
}
