import {test} from 'node:test'
import assert from 'node:assert/strict'
import {add, mul} from './calc.js'

test('add adds', () => {
  assert.equal(add(2, 3), 5)
})

test('mul multiplies', () => {
  assert.equal(mul(2, 3), 6)
})
