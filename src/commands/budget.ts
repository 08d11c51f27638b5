import * as Args from '../cli/args.js'
import * as Flags from '../cli/flags.js'
import {PipeCommand} from '../cli/base-command.js'
import {progressPrinter} from '../cli/progress.js'
import {finishQueued, finishRun, type QueuedResult} from '../cli/run-flow.js'
import type {RunResult} from '../cli/run-result.js'
import {withSignals} from '../cli/signals.js'
import {budgetSession} from '../app/sessions/budget.js'
import {PipeError} from '../errors.js'
import {assertId} from '../store/file/ids.js'

export default class Budget extends PipeCommand {
  static override summary = 'Raise the budget a run paused at, and continue the run.'
  static override description = `A run whose pipeline or step has a budget (budget: {tokens, cost_usd, on_exceed: pause}) pauses (status awaiting_input, exit code 10) before a model request that would pass it, and says what was spent. This raises the budget it paused at by --add-tokens N or --add-usd X and continues the run as pipe resume does; the step that paused runs again. The grant, who gave it, when and the note go into the run record and its timeline, and count in every later check, on every resume. A run not paused at a budget is refused (E_STATE) and nothing is recorded. Under the policy's approvals.budget rule a grant is a vote: only a person the rule names may give it, once, not the run's starter under self_approval: false (E_POLICY_DENIED), and the budget is raised only when the rule's required approvals of the same amount are in; until then the run stays paused (exit code 10). With a signing key (PIPE_SIGNING_KEY, else the default key of pipe keys generate) the grant is signed, as pipe review signs a decision. See docs/budgets.md.`
  static override examples = [
    {
      description: 'Allow 50,000 more tokens',
      command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --add-tokens 50000 --note "the refactor is bigger than planned"',
    },
    {description: 'Allow $1.50 more', command: '<%= config.bin %> <%= command.id %> R-20261121-0002 --add-usd 1.50 --note "approved by finance"'},
  ]
  static override args = {run: Args.string({description: 'Run id (R-YYYYMMDD-NNNN).', required: true})}
  static override flags = {
    'add-tokens': Flags.integer({description: 'Tokens to add to the budget the run paused at.', helpValue: 'N'}),
    'add-usd': Flags.string({description: 'US dollars to add to the budget the run paused at.', helpValue: 'X'}),
    note: Flags.string({char: 'n', description: 'Why; recorded with the grant.', helpValue: 'TEXT'}),
    store: PipeCommand.storeFlag,
  }

  async run(): Promise<RunResult | QueuedResult> {
    const {args, flags} = await this.parse(Budget)
    assertId('run', args.run)
    const usd = flags['add-usd']
    if (usd !== undefined && !/^\d+(\.\d+)?$/.test(usd))
      throw new PipeError('E_INVALID_ARGS', `--add-usd ${usd} is not an amount of US dollars`, {hint: `pipe budget ${args.run} --add-usd 1.50`})
    const store = this.storeDir(flags.store)
    const session = {cwd: process.cwd(), store, onProgress: progressPrinter()}
    const outcome = await withSignals((signal) =>
      budgetSession({
        ...session,
        signal,
        runId: args.run,
        ...(flags['add-tokens'] !== undefined ? {addTokens: flags['add-tokens']} : {}),
        ...(usd !== undefined ? {addUsd: Number(usd)} : {}),
        ...(flags.note ? {note: flags.note} : {}),
      }),
    )
    return finishQueued(outcome, session, this.jsonEnabled()) ?? finishRun(outcome, session, this.jsonEnabled(), flags.store)
  }
}
