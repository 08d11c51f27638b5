/**
 * Functions pipe adds to CEL, registered alike in the checker and the evaluator so what validate
 * accepts is what runs. CEL has no fold, so a fan-in that totals its children's outputs
 * (`sum(steps.each.outputs.items.map(i, i.outputs.rows))`) needs one.
 */
import {EvaluationError, type Environment} from '@marcbachmann/cel-js'
import {charge} from './meter.js'

/** The sum of a list of numbers: an int when every element is one (CEL ints are BigInt), else a double; 0 for an empty list. */
function sum(list: readonly unknown[]): bigint | number {
  charge(list.length >>> 4)
  // A list of parsed JSON is list<dyn>: a string, a boolean or a null in it is an error, never a number made up for it (Number('3'), Number(true), Number(null)).
  const bad = list.findIndex((v) => typeof v !== 'bigint' && typeof v !== 'number')
  if (bad >= 0) throw new EvaluationError({code: 'invalid_argument', message: `sum() adds numbers, but element ${bad} is ${describe(list[bad])}`})
  if (list.every((v) => typeof v === 'bigint')) {
    const total = (list as bigint[]).reduce((a, b) => a + b, 0n)
    // As CEL's own + does: an int is 64 bits.
    if (total > INT64_MAX || total < INT64_MIN) throw new EvaluationError({code: 'overflow', message: 'sum() overflows a 64-bit int'})
    return total
  }
  return list.reduce<number>((a, b) => a + Number(b), 0)
}

const INT64_MAX = 2n ** 63n - 1n
const INT64_MIN = -(2n ** 63n)

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`
  return typeof value === 'object' ? 'a map' : `a ${typeof value}`
}

export function registerPipeFunctions(env: Environment): void {
  env.registerFunction('sum(list<int>): int', sum)
  env.registerFunction('sum(list<double>): double', sum)
}
