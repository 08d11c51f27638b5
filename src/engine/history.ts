/**
 * A run's history as its steps and its routing read it: the snapshots so far, the latest value of
 * an output, and the failure nothing has recovered yet (which a run must not end on as a success).
 */
import {failureOf, registry as defaultRegistry} from '../steps/registry.js'
import type {RunHistory, StepHandler, StepKind, StepRegistry} from '../steps/types.js'
import type {Snapshot} from '../types/snapshot.js'

/** A run's history as steps read it (also used by pipe replay --check to run a step again). */
export class History implements RunHistory {
  constructor(
    readonly snapshots: Snapshot[],
    private readonly registry: StepRegistry = defaultRegistry,
  ) {}

  unrecoveredFailure(): {step: string; seq: number; outcome: string} | null {
    const found = unrecoveredFailure(this.snapshots, this.registry)
    return found ? {step: found.step, seq: found.seq, outcome: found.outcome} : null
  }

  latestOutput<T = unknown>(key: string): T | undefined {
    for (let i = this.snapshots.length - 1; i >= 0; i--) {
      const outputs = this.snapshots[i]!.outputs as Record<string, unknown>
      if (Object.hasOwn(outputs, key)) return outputs[key] as T
    }
    return undefined
  }
}

export interface CarriedFailure {
  step: string
  seq: number
  outcome: string
  reason: string
  code: string
  hint: string
}

/**
 * The latest failure in a run's history that nothing recovered: a step that ended with a failure
 * outcome (or an error routed by on.error) and has not since ended with a non-failure outcome, with
 * no person's decision after it (a review's go accepts what it was shown). `succeeding` names a step
 * that has just ended well, and so recovers its own earlier failures.
 */
export function unrecoveredFailure(snapshots: readonly Snapshot[], registry: StepRegistry, succeeding?: string): CarriedFailure | null {
  const recovered = new Set<string>(succeeding === undefined ? [] : [succeeding])
  for (let i = snapshots.length - 1; i >= 0; i--) {
    const s = snapshots[i]!
    const decision = s.decisions.at(-1)
    if (!decision) continue
    if (decision.by !== undefined) return null
    const name = s.step.name
    const handler = registry[s.step.kind as StepKind] as StepHandler<StepKind> | undefined
    const declared = failureOf(handler, decision.decision)
    const error = decision.decision === 'error' ? s.errors.at(-1) : undefined
    if (!declared && !error) {
      recovered.add(name)
      continue
    }
    if (recovered.has(name)) continue
    const where = {run_id: s.run_id, step: name}
    const code = declared ? declared.code : error!.code
    const hint = declared ? declared.hint(where) : (error!.hint ?? `Read the step's errors with pipe snapshot show ${s.run_id} --step ${name}.`)
    return {step: name, seq: s.step.seq, outcome: decision.decision, reason: decision.reason, code, hint}
  }
  return null
}
