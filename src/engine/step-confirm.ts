/**
 * A step of any kind that a person must confirm before it acts (seed 000 AWAITING_CONFIRMATION,
 * seed 003 DANGEROUS): its own `confirm: true`, or the policy's confirm.kinds / confirm.commands.
 * It pauses exactly like an agent's tool call: the run waits with the action shown (the resolved
 * step and the commands it would run, sealed by a hash), `pipe confirm RUN --yes` runs it, `--no`
 * gives it the outcome `denied` without running it. A standing answer (`--for step|run`) decides
 * later confirmations of the step (or of the run) without asking.
 */
import {stepConfirmRule} from '../policy/confirm.js'
import type {LoadedPolicy} from '../policy/policy.js'
import {DENIED_OUTCOME, sealedAction, standingAnswer, type ConfirmAction} from '../steps/registry.js'
import type {StepAwait, StepDone, StepHandler, StepKind, StepOf} from '../steps/types.js'
import type {Step} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import {redactDeep} from '../util/redact.js'

/** Fields of a step that route it or bound it, not what it does: the action a person is shown leaves them out. */
const ROUTING = new Set(['id', 'kind', 'description', 'when', 'next', 'on', 'max_iterations', 'on_exhausted', 'timeout_ms', 'retry', 'confirm', 'budget'])

/** How a person's confirmation was used, as the step's snapshot records it (inputs.confirmation). */
export interface ConfirmationUsed {
  decision: 'yes' | 'no'
  by: string
  at: string
  note?: string
  scope: 'call' | 'step' | 'run'
  rule: string
}

/** `standing`: the answer was given earlier for the whole step or run (pipe confirm --for), not for this run of the step. */
export type StepGate =
  | {type: 'free'}
  | {type: 'ask'; result: StepAwait}
  | {type: 'go'; used: ConfirmationUsed; standing: boolean}
  | {type: 'denied'; result: StepDone; used: ConfirmationUsed; standing: boolean}

/** The action a person is shown for one run (`seq`) of a resolved step. */
export function stepAction(step: Step, seq: number, rule: string, argv: string[][], cwd: string): ConfirmAction {
  const fields = Object.fromEntries(Object.entries(step).filter(([key]) => !ROUTING.has(key)))
  return sealedAction({
    call_id: `${step.id}#${seq}`,
    tool: step.kind,
    level: 'dangerous',
    arguments: redactDeep(fields),
    ...(argv.length > 0 ? {argv: redactDeep(argv)} : {}),
    cwd,
    rule,
  })
}

/** Whether the resolved step may act now, must wait for a person, or was refused. */
export function stepGate<K extends StepKind>(
  step: StepOf<K>,
  handler: StepHandler<K>,
  seq: number,
  where: {run: RunRecord; policy: LoadedPolicy; cwd: string},
): StepGate {
  const argv = (handler.commands?.(step) ?? []).map((c) => [...c.argv])
  const rule = stepConfirmRule(where.policy, step, argv, {root: where.cwd})
  if (rule === null) return {type: 'free'}
  const action = stepAction(step, seq, rule, argv, where.cwd)
  const given = where.run.confirmation
  // The answer is for exactly this run of the step as it was shown: a changed step is asked about again.
  const direct = given && given.call_id === action.call_id && (given.action_sha256 === undefined || given.action_sha256 === action.sha256)
  const answer = direct
    ? {decision: given.decision, by: given.by, at: given.at, ...(given.note ? {note: given.note} : {}), scope: given.scope ?? 'call'}
    : standingAnswer(where.run, step.id)
  if (!answer) {
    const shown = argv.length > 0 ? `: ${argv.map((a) => a.join(' ')).join(' ; ')}` : ''
    return {
      type: 'ask',
      result: {type: 'await', kind: 'confirm', reason: `step ${step.id} (${step.kind}) waits for a person to confirm it (${rule})${shown}`, action},
    }
  }
  const used: ConfirmationUsed = {
    decision: answer.decision,
    by: answer.by,
    at: answer.at,
    ...(answer.note ? {note: answer.note} : {}),
    scope: answer.scope,
    rule,
  }
  const standing = !direct
  if (answer.decision === 'yes') return {type: 'go', used, standing}
  return {
    type: 'denied',
    used,
    standing,
    result: {
      type: 'done',
      outcome: DENIED_OUTCOME,
      reason: `refused by ${answer.by}${answer.scope === 'call' ? '' : ` (for the whole ${answer.scope})`}${answer.note ? `: ${answer.note}` : ''}; the step did not run`,
      inputs: {confirmation: used},
      outputs: {},
    },
  }
}
