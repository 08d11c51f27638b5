/**
 * Orders that end up in records must not change between versions of pipe: a gate result recorded
 * by an earlier pipe is reproduced exactly by `pipe replay --check` (its missing fields in the same
 * order), whatever the locale, and without loading ICU's collation data.
 */
import {expect} from 'chai'
import {completenessScore} from '../../src/gates/evaluate.js'
import {compareNames} from '../../src/util/order.js'

/** The order earlier versions sorted weight names in: localeCompare, the same under en, zh_CN and C for these names. */
const recorded = new Intl.Collator('en').compare

describe('order of names that records keep', () => {
  it('lists missing completeness weights in the order a run recorded them before (replay --check reproduces it)', () => {
    const weights = {Zeta: 1, alpha: 1, goal_extra: 1, 'goal.nope': 1, nfr2: 1, nfr_a: 1, Goal: 1, goal: 1}
    const {missing} = completenessScore({}, {threshold: 1, weights})
    expect(missing).to.deep.equal(['alpha', 'goal', 'Goal', 'goal_extra', 'goal.nope', 'nfr_a', 'nfr2', 'Zeta'])
    expect(missing).to.deep.equal(Object.keys(weights).sort(recorded))
  })

  it('orders every weight name (the schema allows letters, digits, _ and .) as localeCompare did', () => {
    const alphabet = ['_', '.', '0', '1', '9', 'a', 'A', 'b', 'B', 'z', 'Z']
    const names: string[] = []
    // Every name of up to three of these characters, and longer ones built from them: a deterministic spread.
    const grow = (prefix: string, depth: number): void => {
      if (prefix) names.push(prefix)
      if (depth === 0) return
      for (const c of alphabet) grow(prefix + c, depth - 1)
    }
    grow('', 3)
    for (const name of names.slice(0, 400)) names.push(`${name}.x_y`, `X${name}`)
    const sign = (n: number): number => Math.sign(n)
    for (let i = 0; i < names.length; i += 7) {
      for (let j = 0; j < names.length; j += 13) {
        const a = names[i]!
        const b = names[j]!
        expect(sign(compareNames(a, b)), `${a} vs ${b}`).to.equal(sign(recorded(a, b)))
      }
    }
  })
})
