import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {progressPrinter} from '../cli/progress.js'
import {asFlag} from '../cli/decision.js'
import {finishQueued, finishRun, type QueuedResult} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {withSignals} from '../cli/signals.js'
import {confirmSession} from '../app/sessions/confirm.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'

export default class Confirm extends PipeCommand {
  static override summary = 'Confirm or refuse the tool call or the step a run waits at, and continue the run.'
  static override description = `A run pauses (status awaiting_input, exit code 10) before an agent's tool call whose level the policy's confirm: names (run_command is dangerous by default), and before any step that says confirm: true, that the policy's confirm.kinds or confirm.commands select, or that would run a destructive command (rm, git push, curl, ...: docs/policy.md) tools_preapproved does not name; the run's output shows the exact call or step and the argument vectors it would run. --yes runs it. --no does not: the model is told that a person refused its call (with the note), and a step ends with the outcome denied (on: {denied: STEP} routes it; unrouted, the run fails). --for says what the answer covers: call (this call or this run of the step, the default), step (every later confirmation of the same step in this run: retries, loops) or run (every later confirmation in this run); a resume honours it. The answer, its scope, the OS user who gave it, the time and the note go into the run's timeline and the step's snapshot. A policy's confirm.timeout_s bounds how long a person has: after it the run stays paused and says so, and pipe confirm still answers it, unless confirm.on_timeout says deny or cancel: then the policy decided, and a later answer is refused (E_STATE). Under an approvals rule of the policy for the gate (docs/policy.md), the person (PIPE_USER, else the repository's git user.email, else the OS user) must be one the rule names, votes once, and, under self_approval: false, may not approve a run they started (E_POLICY_DENIED, naming the rule); each vote is recorded, and the run goes on only once the rule's required approvals are in. With a signing key (PIPE_SIGNING_KEY, else the default key of pipe keys generate) the decision is signed (docs/policy.md); --as NAME decides under the name of a key the run's policy trusts, only when one's signing key is that key.`
  static override examples = [
    {
      description: 'Confirm as the on-call engineer whose key the policy trusts',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --yes --as on-call',
    },
    {description: 'Let it run', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --yes'},
    {
      description: 'The replayed cassette was changed on purpose since the run paused: go on with it (recorded)',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --yes --accept-cassette',
    },
    {
      description: 'Refuse, with the reason the model will read',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --no --note "do not touch the database"',
    },
    {
      description: 'Let this step run, and every later confirmation of it in this run (its retries, its next loops)',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --yes --for step',
    },
    {
      description: 'Confirm everything else this run asks for',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --yes --for run --note "release day"',
    },
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    yes: Flags.boolean({description: 'Run the call.', exclusive: ['no']}),
    no: Flags.boolean({description: 'Refuse the call; the model is told.', exclusive: ['yes']}),
    note: Flags.string({char: 'n', description: 'Why; recorded, and given to the model with a refusal.', helpValue: 'TEXT'}),
    for: Flags.string({
      description:
        'What the answer covers: call (this call or this run of the step), step (every confirmation of this step in this run) or run (every confirmation in this run).',
      options: ['call', 'step', 'run'],
      default: 'call',
    }),
    'accept-cassette': Flags.boolean({
      description: 'The run replays a cassette that changed since it started: go on with it as it is now (recorded on the timeline).',
    }),
    as: asFlag,
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult | QueuedResult> {
    const {args, flags} = await this.parse(Confirm)
    assertId('run', args.run)
    if (!flags.yes && !flags.no) throw new PipeError('E_INVALID_ARGS', 'say --yes or --no', {hint: `pipe confirm ${args.run} --yes   (or --no --note TEXT)`})
    const store = this.storeDir(flags.store)
    const session = {cwd: process.cwd(), store, onProgress: progressPrinter()}
    const outcome = await withSignals((signal) =>
      confirmSession({
        ...session,
        signal,
        runId: args.run,
        decision: flags.yes ? 'yes' : 'no',
        ...(flags.note ? {note: flags.note} : {}),
        ...(flags.for !== 'call' ? {scope: flags.for as 'step' | 'run'} : {}),
        ...(flags['accept-cassette'] ? {acceptCassette: true} : {}),
        ...(flags.as !== undefined ? {as: flags.as} : {}),
      }),
    )
    return finishQueued(outcome, session, this.jsonEnabled()) ?? finishRun(outcome, session, this.jsonEnabled(), flags.store)
  }
}
