/**
 * The words a person may give for a review decision (seed 001's confirmation takes "Go/Yes/OK"):
 * `--decision` and the terminal prompt take them in any case, and the record keeps the canonical
 * value. `no`/`n` mean drop, which ends the run as cancelled, as a "no" to "go ahead?" does.
 */
import * as Flags from './flags.js'
import type {Decision} from '../app/sessions/shared.js'
import {PipeError} from '../errors.js'

const WORDS: Readonly<Record<string, Decision>> = {go: 'go', yes: 'go', y: 'go', ok: 'go', hold: 'hold', drop: 'drop', no: 'drop', n: 'drop'}

/** What `--decision` says in its help. */
export const DECISION_HELP = 'go (also yes, y, ok), hold, or drop (also no, n); any case'

/** The canonical decision a word means, or null. */
export function decisionWord(word: string): Decision | null {
  const key = word.trim().toLowerCase()
  return Object.hasOwn(WORDS, key) ? WORDS[key]! : null
}

/** The canonical decision a flag's value means; a word that means none is an E_INVALID_ARGS naming the flag. */
export function decisionFlag(value: string | undefined, flag = '--decision'): Decision | undefined {
  if (value === undefined) return undefined
  const decision = decisionWord(value)
  if (!decision) throw new PipeError('E_INVALID_ARGS', `${flag} ${JSON.stringify(value)} is not a decision`, {hint: `Give ${flag} ${DECISION_HELP}.`})
  return decision
}

/** --as NAME of pipe review, answer and confirm (docs/policy.md, "Signed decisions"). */
export const asFlag = Flags.string({
  description:
    "Decide under the name of a key the run's policy trusts (attestation.trusted_keys): accepted only when your signing key (PIPE_SIGNING_KEY, else the default key of pipe keys generate) is that key; the name is recorded and signed with the decision.",
  helpValue: 'NAME',
})
