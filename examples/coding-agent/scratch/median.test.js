import {test} from 'node:test'
import assert from 'node:assert/strict'
import {median} from './median.js'

test('an odd count has one middle value', () => {
  assert.equal(median([3, 1, 2]), 2)
})

test('an even count takes the mean of the two middle values', () => {
  assert.equal(median([4, 1, 3, 2]), 2.5)
})

test('numbers sort as numbers, not as text', () => {
  assert.equal(median([10, 9, 2]), 9)
})

test('an empty list is an error', () => {
  assert.throws(() => median([]), RangeError)
})
