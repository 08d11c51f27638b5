/**
 * What one evaluation may cost. cel-js bounds parsing only: `l.map(a, l.map(b, l.map(c, c)))`
 * over a 650-item input ran 53 s and took 2.9 GB, and a synchronous loop lets no signal through,
 * so Ctrl-C and SIGTERM did nothing until it ended. Each evaluation gets a budget of steps and of
 * time, so it ends soon either way and a signal is acted on right after:
 * - a step is one node cel-js evaluates, plus, for an operation that builds a value (a call, a
 *   method, `+`, a list or map literal, a map() or filter()), one per element of the list or map it
 *   built and one per 16 characters of the string; matches() costs one per 16 characters it reads.
 *   The count is the same on every machine, so what passes once passes on replay;
 * - the time is checked every 256 steps, for single operations that take long over large values.
 *
 * The hook: cel-js evaluates every node through its evaluator's run(ast, ctx), and calls function
 * handlers with `this` set to that evaluator. A probe function hands over each Environment's
 * evaluator once; its run is wrapped on that instance only (no other Environment changes).
 */
import type {Environment} from '@marcbachmann/cel-js'

/** An evaluation went over its budget; `message` says which and how far. */
export class BudgetExceeded extends Error {}

export interface Budget {
  readonly maxSteps: number
  readonly maxMs: number
}

interface Meter {
  used: number
  readonly budget: Budget
  readonly deadline: number
  exceeded: BudgetExceeded | undefined
}

let current: Meter | undefined

/** Operations whose result is a value they built: it is charged by its size. */
const BUILDS: ReadonlySet<string> = new Set(['call', 'rcall', '+', 'list', 'map'])

const PROBE = 'pipeMeterProbe'
/** Registered on an Environment before instrument(); expressions that call it fail validation (the checker has no such function). */
export const PROBE_SIGNATURE = `${PROBE}(): bool`

type Run = (this: CelEvaluator, ast: {readonly op: string}, ctx: unknown) => unknown
interface CelEvaluator {
  run: Run
}

const probed: {evaluator?: unknown} = {}

export function probeHandler(this: unknown): boolean {
  probed.evaluator = this
  return true
}

/** Meters every evaluation of `env` (which must have PROBE_SIGNATURE registered). */
export function instrument(env: Environment): void {
  probed.evaluator = undefined
  env.evaluate(`${PROBE}()`)
  const evaluator = probed.evaluator as CelEvaluator | undefined
  if (evaluator === undefined || typeof evaluator.run !== 'function')
    throw new Error('internal: cel-js no longer calls functions with its evaluator as this; update src/expr/meter.ts')
  const run: Run = evaluator.run
  evaluator.run = function metered(this: CelEvaluator, ast, ctx) {
    const meter = current
    if (meter === undefined) return run.call(this, ast, ctx)
    step(meter, 1)
    const value = run.call(this, ast, ctx)
    if (BUILDS.has(ast.op)) step(meter, sizeOf(value))
    return value
  }
}

/** Charges `units` to the evaluation in progress (none: nothing to charge). */
export function charge(units: number): void {
  if (current !== undefined) step(current, units)
}

function step(meter: Meter, units: number): void {
  const before = meter.used
  meter.used += units
  if (meter.used > meter.budget.maxSteps) {
    meter.exceeded ??= new BudgetExceeded(
      `it took more than ${meter.budget.maxSteps} evaluation steps, the limit (a step is one operation, or one element an operation builds; nested map(), filter() or exists() over long lists multiply them)`,
    )
    throw meter.exceeded
  }
  if (before >>> 8 !== meter.used >>> 8 && performance.now() > meter.deadline) {
    meter.exceeded ??= new BudgetExceeded(`it ran longer than ${meter.budget.maxMs} ms, the limit`)
    throw meter.exceeded
  }
}

function sizeOf(value: unknown): number {
  if (Array.isArray(value)) return value.length
  if (typeof value === 'string') return value.length >>> 4
  if (value instanceof Map) return value.size
  return 0
}

/**
 * Runs one evaluation within the budget. An error cel-js swallows (`x || true` takes an error in
 * x as false) still ends it: once over budget every further step throws, and an evaluation that
 * went over returns no value.
 */
export function metered<T>(budget: Budget, evaluate: () => T): T {
  const outer = current
  const meter: Meter = {used: 0, budget, deadline: performance.now() + budget.maxMs, exceeded: undefined}
  current = meter
  try {
    const value = evaluate()
    if (meter.exceeded !== undefined) throw meter.exceeded
    return value
  } finally {
    current = outer
  }
}
