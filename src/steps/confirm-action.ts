/**
 * The tool call a confirm pause shows a person, and the hash that binds their answer to it. The
 * hash covers every field shown (call id, tool, level, arguments, argument vectors, folder), so a
 * `pipe confirm` runs exactly what was shown, once: a call whose action no longer hashes the same
 * (the step's saved state was edited, or another call took the same id) is not the one confirmed.
 */
import type {RunRecord} from '../types/run.js'
import {hashJson} from '../util/hash.js'

export type ConfirmAction = NonNullable<NonNullable<RunRecord['pending']>['action']>

export function actionHash(action: ConfirmAction): string {
  const {sha256: _sealed, ...shown} = action
  return hashJson(shown)
}

/** The action with its hash. */
export function sealedAction(action: Omit<ConfirmAction, 'sha256'>): ConfirmAction {
  return {...action, sha256: actionHash(action)}
}

/** A standing answer (pipe confirm --for step|run) that covers a confirmation at `step`, the latest given first; null when none does. */
export function standingAnswer(run: Pick<RunRecord, 'standing_confirmations'>, step: string): NonNullable<RunRecord['standing_confirmations']>[number] | null {
  const given = run.standing_confirmations ?? []
  for (let i = given.length - 1; i >= 0; i--) {
    const s = given[i]!
    if (s.scope === 'run' || s.step === step) return s
  }
  return null
}
