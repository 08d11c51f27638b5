import type {Step} from '../types/pipeline.js'
import type {StepHandler, StepKind} from '../steps/types.js'

/** Backoff between attempts (seed 000): 200 ms, 500 ms, 1 s, then 1 s, each plus up to 20% jitter. */
export const BACKOFF_MS = [200, 500, 1000] as const

/** `jitter` in [0, 1): spreads out the retries of runs that failed together. */
export function backoffFor(retry: number, jitter = 0): number {
  const base = BACKOFF_MS[Math.min(retry, BACKOFF_MS.length - 1)]!
  return Math.round(base * (1 + 0.2 * Math.min(Math.max(jitter, 0), 0.999)))
}

/** Whether a step may run twice without harm: its pipeline's word (retry.safe), else its kind's. Retries and the durability of its start line follow it. */
export function safeToRetry(step: Pick<Step, 'retry'>, handler: Pick<StepHandler<StepKind>, 'safeToRetry'>): boolean {
  return step.retry?.safe ?? handler.safeToRetry
}
