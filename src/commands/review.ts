import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {asFlag, DECISION_HELP, decisionFlag} from '../cli/decision.js'
import {askDecision, canPrompt, reviewText} from '../cli/interactive.js'
import {progressPrinter} from '../cli/progress.js'
import {finishQueued, finishRun, type QueuedResult} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {withSignals} from '../cli/signals.js'
import {reviewSession, reviewSummary} from '../app/sessions/review.js'
import type {Decision} from '../app/sessions/shared.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'

export default class Review extends PipeCommand {
  static override summary = 'Decide go, hold or drop for a run waiting for review, and continue it.'
  static override description = `go continues the run (to publish, in the default pipeline); hold records the decision and keeps the run waiting for a later review; drop ends the run as cancelled with the reason. yes, y and ok mean go, no and n mean drop, in any case; the record keeps go or drop. The decision, the OS user who gave it, the time and the note go into the review step's snapshot.

On a terminal without --decision, a summary of the spec and its gate results is shown and the decision asked for. Under an approvals rule of the policy for the gate (docs/policy.md), the person (PIPE_USER, else the repository's git user.email, else the OS user) must be one the rule names, votes once, and, under self_approval: false, may not approve a run they started (E_POLICY_DENIED, naming the rule); each vote is recorded, and the run goes on only once the rule's required approvals are in. With a signing key (PIPE_SIGNING_KEY, else the default key of pipe keys generate) the decision is signed (docs/policy.md); --as NAME decides under the name of a key the run's policy trusts, only when one's signing key is that key.`
  static override examples = [
    {
      description: 'Approve as the release manager whose key the policy trusts',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --decision go --as release-manager',
    },
    {description: 'Approve', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --decision go --note "matches the brief"'},
    {description: 'Not yet', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --decision hold --note "waiting for legal"'},
    {description: 'Decide at the terminal', command: '<%= config.bin %> <%= command.id %> R-20261121-0002'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    decision: Flags.string({char: 'd', description: `The decision: ${DECISION_HELP}.`, helpValue: 'go|hold|drop'}),
    note: Flags.string({char: 'n', description: 'Why; recorded with the decision.', helpValue: 'TEXT'}),
    'accept-cassette': Flags.boolean({
      description: 'The run replays a cassette that changed since it started: go on with it as it is now (recorded on the timeline).',
    }),
    as: asFlag,
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult | QueuedResult> {
    const {args, flags} = await this.parse(Review)
    assertId('run', args.run)
    const store = this.storeDir(flags.store)
    const session = {cwd: process.cwd(), store, onProgress: progressPrinter()}
    let decision: Decision | undefined = decisionFlag(flags.decision)
    let note = flags.note
    if (!decision) {
      if (!canPrompt(this.jsonEnabled()))
        throw new PipeError('E_INVALID_ARGS', 'no decision given', {hint: `pipe review ${args.run} --decision go|hold|drop [--note TEXT]`})
      const summary = await reviewSummary({...session, runId: args.run})
      process.stderr.write(reviewText(summary.spec, summary.gate, summary.reason))
      const choice = await askDecision()
      if (!choice)
        throw new PipeError('E_INPUT', 'input ended before a decision was given; the run is unchanged', {hint: `Decide later with pipe review ${args.run}.`})
      decision = choice.decision
      note = note ?? choice.note
    }
    const outcome = await withSignals((signal) =>
      reviewSession({
        ...session,
        signal,
        runId: args.run,
        decision: decision,
        ...(note ? {note} : {}),
        ...(flags['accept-cassette'] ? {acceptCassette: true} : {}),
        ...(flags.as !== undefined ? {as: flags.as} : {}),
      }),
    )
    return finishQueued(outcome, session, this.jsonEnabled()) ?? finishRun(outcome, session, this.jsonEnabled(), flags.store, decision !== 'hold')
  }
}
