/**
 * Typed outputs between steps. A kind declares the type of its outputs record and exports readers
 * for the fields other steps (or commands) use; a consumer imports the producer's reader instead of
 * repeating a string key, so renaming a field or changing its type fails to compile everywhere.
 */
import type {Snapshot} from '../types/snapshot.js'
import type {RunHistory} from './types.js'

/** One field of a kind's outputs, read from a run's history or from its snapshots. */
export interface OutputField<T> {
  readonly key: string
  /** The value this snapshot recorded, if it recorded the field. */
  of(snapshot: Pick<Snapshot, 'outputs'>): T | undefined
  /** The newest value any step of the run recorded. */
  latest(from: RunHistory | readonly Pick<Snapshot, 'outputs'>[]): T | undefined
}

/** Readers over the fields of the outputs type `O`: `outputsOf<GateOutputs>()('gate_result')`. */
export function outputsOf<O extends object>(): <K extends keyof O & string>(key: K) => OutputField<O[K]> {
  return <K extends keyof O & string>(key: K): OutputField<O[K]> => {
    const of = (snapshot: Pick<Snapshot, 'outputs'>): O[K] | undefined => {
      const outputs = snapshot.outputs as Record<string, unknown> | undefined
      return outputs !== undefined && outputs !== null && Object.hasOwn(outputs, key) ? (outputs[key] as O[K]) : undefined
    }
    return {
      key,
      of,
      latest(from) {
        if ('latestOutput' in from) return from.latestOutput<O[K]>(key)
        for (let i = from.length - 1; i >= 0; i--) {
          const snapshot = from[i]!
          if (Object.hasOwn(snapshot.outputs ?? {}, key)) return of(snapshot)
        }
        return undefined
      },
    }
  }
}
