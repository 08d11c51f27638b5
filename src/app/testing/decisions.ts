/**
 * What a test's person decides while its run waits (pipe test): each confirmation to the next
 * confirmation the run asks for, as `pipe confirm RUN --yes|--no` would, and each budget grant to
 * the next budget pause, as `pipe budget RUN --add-tokens N | --add-usd X` would (the same use
 * cases, the run continued each time). Giving more than the run asked for fails the test: the path
 * it meant to test was not taken.
 */
import type {TestCase} from '../../config/test-file.js'
import type {RunOutcome} from '../../engine/engine.js'
import type {TestFailure} from './run.js'

export interface DecisionSession {
  cwd: string
  store: string
  user: string
  now: () => Date
  env: NodeJS.ProcessEnv
  signal: AbortSignal | undefined
}

export async function givePersonDecisions(test: TestCase, first: RunOutcome, session: DecisionSession): Promise<{outcome: RunOutcome; failure?: TestFailure}> {
  const confirms = test.confirm ?? []
  const grants = test.budget ?? []
  let outcome = first
  let confirmed = 0
  let granted = 0
  const {signal, ...rest} = session
  const base = {...rest, ...(signal ? {signal} : {})}
  for (;;) {
    const pending = outcome.status === 'awaiting_input' ? outcome.pending?.kind : undefined
    if (pending === 'confirm' && confirmed < confirms.length) {
      const {confirmSession} = await import('../sessions/confirm.js')
      outcome = await confirmSession({...base, runId: outcome.run_id, decision: confirms[confirmed++]!})
    } else if (pending === 'budget' && granted < grants.length) {
      const {budgetSession} = await import('../sessions/budget.js')
      const grant = grants[granted++]!
      outcome = await budgetSession({
        ...base,
        runId: outcome.run_id,
        ...(grant.add_tokens !== undefined ? {addTokens: grant.add_tokens} : {}),
        ...(grant.add_usd !== undefined ? {addUsd: grant.add_usd} : {}),
        ...(grant.note !== undefined ? {note: grant.note} : {}),
      })
    } else break
  }
  if (confirmed < confirms.length)
    return {
      outcome,
      failure: {
        kind: 'confirm',
        message: `the test gives ${confirms.length} confirmation(s), but the run asked for ${confirmed} before it stopped ${outcome.status}`,
        expected: confirms.length,
        actual: confirmed,
      },
    }
  if (granted < grants.length)
    return {
      outcome,
      failure: {
        kind: 'budget',
        message: `the test gives ${grants.length} budget grant(s), but the run paused at a budget ${granted} time(s) before it stopped ${outcome.status}`,
        expected: grants.length,
        actual: granted,
      },
    }
  return {outcome}
}
