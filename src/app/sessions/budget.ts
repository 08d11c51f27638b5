/**
 * pipe budget: a person raises the budget a run paused at (engine/budget.ts) and the run goes on,
 * exactly as pipe resume would continue it. The grant (who, when, how much, the note) is recorded
 * under the run's lock with its timeline line. Under the policy's approvals.budget rule a grant is
 * a vote (castVote): only the people the rule names may give it, each once, and the budget is
 * raised and the run continued only when `required` of them approved the same amount.
 */
import {PipeError} from '../../errors.js'
import {tokensText, usdText} from '../../util/prices.js'
import type {RunOutcome} from '../../engine/engine.js'
import {openStore, storeLocation} from '../../store/open.js'
import {resumeSession} from './resume.js'
import {waitingFor, type ReplyOptions, type SessionOptions} from './shared.js'
import {castVote} from './vote.js'
import {childrenAtBudget, grantParentBudget} from './budget-children.js'

export interface BudgetSession extends SessionOptions, ReplyOptions {
  runId: string
  addTokens?: number
  addUsd?: number
  note?: string
}

export async function budgetSession(options: BudgetSession): Promise<RunOutcome> {
  const {addTokens, addUsd, note, ...rest} = options
  if (addTokens === undefined && addUsd === undefined)
    throw new PipeError('E_INVALID_ARGS', 'say how much to add: --add-tokens N or --add-usd X', {
      hint: `pipe budget ${options.runId} --add-tokens 50000 --note TEXT`,
    })
  if (addTokens !== undefined && (!Number.isSafeInteger(addTokens) || addTokens <= 0))
    throw new PipeError('E_INVALID_ARGS', `--add-tokens ${addTokens} is not a positive whole number of tokens`, {
      hint: `pipe budget ${options.runId} --add-tokens 50000`,
    })
  if (addUsd !== undefined && (!Number.isFinite(addUsd) || addUsd <= 0))
    throw new PipeError('E_INVALID_ARGS', `--add-usd ${addUsd} is not a positive amount of US dollars`, {hint: `pipe budget ${options.runId} --add-usd 1.50`})
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const record = await store.readRun(options.runId)
  // A parent stopped while its children wait at its budget: the grant is the parent's, the votes are cast at the first child's gate.
  const children = record.status === 'awaiting_input' ? [] : await childrenAtBudget(store, options.runId)
  // Refused before anything is recorded: a run not paused at a budget has nothing to raise (checked again under the lock).
  const pending = children[0]?.record.pending ?? waitingFor(record, 'budget')
  const paused = pending.budget
  if (paused?.run_id !== undefined && paused.run_id !== options.runId)
    throw new PipeError(
      'E_STATE',
      `run ${options.runId} paused at the budget of its parent run ${paused.run_id}, which pays for its requests; nothing was granted`,
      {hint: `pipe budget ${paused.run_id} --add-tokens N --note TEXT (or --add-usd X) raises it and continues the parent with its children.`},
    )
  const wrongUnit =
    paused && addTokens === undefined && paused.limit_usd === undefined
      ? '--add-usd raises a cost budget, but the budget it paused at counts tokens only'
      : paused && addUsd === undefined && paused.limit_tokens === undefined
        ? '--add-tokens raises a token budget, but the budget it paused at counts dollars only'
        : undefined
  if (wrongUnit)
    throw new PipeError('E_INVALID_ARGS', `${wrongUnit}; nothing was granted`, {
      hint: `pipe runs show ${options.runId} shows the budget it paused at; raise that one (--add-tokens N or --add-usd X).`,
    })
  // A limit past 2^53 is no longer a whole number JSON and the ledger can say exactly.
  if (addTokens !== undefined && paused?.limit_tokens !== undefined && !Number.isSafeInteger(paused.limit_tokens + addTokens))
    throw new PipeError(
      'E_INVALID_ARGS',
      `--add-tokens ${addTokens} would raise the budget of ${tokensText(paused.limit_tokens)} past ${Number.MAX_SAFE_INTEGER} tokens; nothing was granted`,
      {
        hint: `pipe budget ${options.runId} --add-tokens 50000`,
      },
    )
  const amount = [addTokens !== undefined ? `+${tokensText(addTokens)}` : '', addUsd !== undefined ? `+${usdText(addUsd)}` : ''].filter(Boolean).join(' ')
  // Signed as every decision is (castVote); under no approvals.budget rule it goes on at once.
  const ballot = {kind: 'budget' as const, decision: `grant ${amount}`, approve: true, ...(note ? {note} : {})}
  const given = {...(addTokens !== undefined ? {tokens: addTokens} : {}), ...(addUsd !== undefined ? {usd: addUsd} : {}), ...(note ? {note} : {})}
  const command = `pipe budget ${options.runId}${addTokens !== undefined ? ` --add-tokens ${addTokens}` : ''}${addUsd !== undefined ? ` --add-usd ${addUsd}` : ''}`
  const by = (user: string | undefined) => (user !== undefined ? {user} : {})
  if (children.length > 0)
    return castVote({...options, runId: children[0]!.record.run_id, opened: store}, ballot, async (user, signed) => {
      await grantParentBudget(store, options.runId, children, given, user ?? options.user, (options.now?.() ?? new Date()).toISOString())
      return resumeSession({...rest, ...by(user), ...(signed ? {signed} : {}), command})
    })
  return castVote({...options, opened: store}, ballot, (user, signed) =>
    resumeSession({...rest, ...by(user), ...(signed ? {signed} : {}), command, budgetGrant: given}),
  )
}
