/**
 * Whether pipe resume would redrive a failed run — the engine's own judgement, without throwing —
 * for a reader who is offered the command (the run page of pipe view).
 */
import {redrivePoint} from '../engine/redrive.js'
import {isPipeError} from '../errors.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'

/** null when pipe resume would redrive the run; else why it would refuse, and what to do instead. */
export function redriveRefusal(record: RunRecord, own: readonly Snapshot[]): {message: string; hint?: string} | null {
  try {
    redrivePoint(record, own)
    return null
  } catch (error) {
    if (!isPipeError(error)) throw error
    return {message: error.message, ...(error.hint ? {hint: error.hint} : {})}
  }
}
