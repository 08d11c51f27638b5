/**
 * Functions pipe adds to CEL, registered alike in the checker and the evaluator so what validate
 * accepts is what runs. CEL has no fold, so a fan-in that totals its children's outputs
 * (`sum(steps.each.outputs.items.map(i, i.outputs.rows))`) needs one.
 */
import type {Environment} from '@marcbachmann/cel-js'
import {charge} from './meter.js'

/** The sum of a list of numbers: an int when every element is one (CEL ints are BigInt), else a double; 0 for an empty list. */
function sum(list: readonly unknown[]): bigint | number {
  charge(list.length >>> 4)
  if (list.every((v) => typeof v === 'bigint')) return (list as bigint[]).reduce((a, b) => a + b, 0n)
  return list.reduce<number>((a, b) => a + Number(b), 0)
}

export function registerPipeFunctions(env: Environment): void {
  env.registerFunction('sum(list<int>): int', sum)
  env.registerFunction('sum(list<double>): double', sum)
}
