import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {withSignals} from '../cli/signals.js'
import {publishSession} from '../app/sessions/publish.js'
import type {PublishOutcome} from '../publish/deliver.js'
import {assertId} from '../store/file/ids.js'
import {line as t} from '../util/terminal-text.js'

export default class Publish extends PipeCommand {
  static override summary = "Publish a run's reviewed spec version to its pipeline's targets again, by hand."
  static override description = `Idempotent: each feature + target + spec version is delivered once; publishing a delivered key sends nothing and prints the recorded external id. Only a version whose review said go is published. While another process drives the run (its own publish step), pipe publish waits up to 60 s for it to let the run go. Retryable failures (429, 5xx, a connection refused) are retried with backoff; every attempt is in the ledger (pipe ledger list).

A request that went out without an answer (a crash, a timeout) has an unknown outcome and is not retried: a target set to uncertain: resend sends it once more per publish or resume; uncertain: hold stops: check the channel, then --resend or --mark-delivered.`
  static override examples = [
    {description: 'Publish to every target again (delivered ones are skipped)', command: '<%= config.bin %> <%= command.id %> R-20261122-0001'},
    {description: 'One target', command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --target team-chat'},
    {
      description: 'After checking the channel, settle an uncertain delivery',
      command: '<%= config.bin %> <%= command.id %> R-20261122-0001 --target team-chat --mark-delivered',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    target: Flags.string({char: 't', description: 'Only this target.', helpValue: 'NAME'}),
    resend: Flags.boolean({description: 'Send an uncertain delivery again (with the same Idempotency-Key).', exclusive: ['mark-delivered']}),
    'mark-delivered': Flags.boolean({description: 'Record an uncertain delivery as delivered, sending nothing.', exclusive: ['resend']}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<{run_id: string; spec_version: string; results: PublishOutcome[]}> {
    const {args, flags} = await this.parse(Publish)
    assertId('run', args.run)
    if (flags.target !== undefined) assertId('target', flags.target, '--target')
    const result = await withSignals((signal) =>
      publishSession({
        cwd: process.cwd(),
        store: this.storeDir(flags.store),
        runId: args.run,
        signal,
        onWait: (busy) => process.stderr.write(t`${busy}; waiting for it to let the run go\n`),
        ...(flags.target ? {target: flags.target} : {}),
        ...(flags.resend ? {resend: true} : {}),
        ...(flags['mark-delivered'] ? {markDelivered: true} : {}),
      }),
    )
    if (!this.jsonEnabled()) {
      for (const r of result.results)
        process.stdout.write(
          t`${r.status === 'published' ? 'published' : 'already delivered'}  ${r.target}  ${r.key}  ${r.external_id}  (${r.attempts} attempt(s) in all)\n`,
        )
    }
    return result
  }
}
