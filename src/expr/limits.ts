/** Bounds on expressions; the same for checking and evaluating, so what validates also runs. */
import type {Limits} from '@marcbachmann/cel-js'

export interface ExprLimits {
  /** Longest expression source, in characters (the text between `${{` and `}}`). */
  readonly maxExpressionLength: number
  /** Largest result, in bytes of its compact JSON form (for a string: its UTF-8 length, plus quotes). */
  readonly maxResultBytes: number
  /** Steps one evaluation may take (see meter.ts): ~0.6 s of the fastest steps; a nested map over 650 items needs 500 million. */
  readonly maxEvaluationSteps: number
  /** Time one evaluation may take, in milliseconds: a bound for single operations over large values. */
  readonly maxEvaluationMs: number
}

export const DEFAULT_LIMITS: ExprLimits = {maxExpressionLength: 4096, maxResultBytes: 1024 * 1024, maxEvaluationSteps: 10_000_000, maxEvaluationMs: 2000}

/** cel-js parse-time limits: far above any hand-written expression, far below what hurts. */
export const CEL_LIMITS: Partial<Limits> = {maxAstNodes: 2000, maxDepth: 64, maxListElements: 1000, maxMapEntries: 1000, maxCallArguments: 32}
