import {expect} from 'chai'
import {completenessScore, evaluateGate, evaluateGates} from '../../src/gates/evaluate.js'
import {resolvePath} from '../../src/gates/path.js'
import type {Gate} from '../../src/types/pipeline.js'

const spec = {
  goal: 'Let teams track shared expenses',
  features: [
    {id: 'FR-001', title: 'Add expense', priority: 'P0'},
    {id: 'FR-002', title: 'Export CSV', priority: 'P3'},
  ],
  acceptance_criteria: [],
  non_functional: [{id: 'NFR-001', text: 'fast'}],
  constraints: [],
}

describe('gates', () => {
  it('resolves dotted paths with indexes and wildcards', () => {
    expect(resolvePath(spec, 'features[*].priority').map((m) => [m.path, m.value])).to.deep.equal([
      ['features[0].priority', 'P0'],
      ['features[1].priority', 'P3'],
    ])
    expect(resolvePath(spec, 'features[1].title')[0]!.value).to.equal('Export CSV')
    expect(resolvePath(spec, 'nothing.here')[0]!.value).to.equal(undefined)
    expect(resolvePath(spec, 'acceptance_criteria[*].text')).to.deep.equal([])
  })

  it('checks required, min_items, max_items, min_length, pattern and enum, with the failing path', () => {
    const gate: Gate = {
      rules: [
        {id: 'goal', path: 'goal', required: true, min_length: 10},
        {id: 'ac', path: 'acceptance_criteria', min_items: 1, message: 'no acceptance criteria'},
        {id: 'few', path: 'features', max_items: 1},
        {id: 'prio', path: 'features[*].priority', enum: ['P0', 'P1', 'P2']},
        {id: 'ids', path: 'features[*].id', pattern: '^FR-\\d{3}$'},
        {id: 'missing', path: 'owner', required: true},
      ],
    }
    const result = evaluateGate(spec, gate)
    expect(result.pass).to.equal(false)
    expect(result.failed_rules.map((f) => f.rule)).to.deep.equal(['ac', 'few', 'prio', 'missing'])
    expect(result.missing_fields).to.deep.equal(['acceptance_criteria', 'features', 'features[*].priority', 'owner'])
    expect(result.failed_rules[0]!.message).to.equal('no acceptance criteria')
    expect(result.failed_rules[2]!.message).to.equal('features[*].priority value "P3" is not one of P0, P1, P2')
  })

  it('treats empty strings, lists and mappings as missing', () => {
    const gate: Gate = {rules: [{path: 'goal', required: true}]}
    expect(evaluateGate({goal: '   '}, gate).pass).to.equal(false)
    expect(evaluateGate({goal: []}, gate).pass).to.equal(false)
    expect(evaluateGate({goal: {}}, gate).pass).to.equal(false)
    expect(evaluateGate({goal: 0}, gate).pass).to.equal(true)
  })

  it('computes a weighted completeness score and fails below the threshold', () => {
    const weights = {goal: 2, features: 3, acceptance_criteria: 3, non_functional: 1, constraints: 1}
    expect(completenessScore(spec, {threshold: 0.8, weights})).to.deep.equal({score: 0.6, missing: ['acceptance_criteria', 'constraints']})
    const result = evaluateGates(spec, {g: {rules: [{path: 'goal', required: true}]}}, ['g'], {threshold: 0.8, weights})
    expect(result.pass).to.equal(false)
    expect(result.completeness_score).to.equal(0.6)
    expect(result.missing_fields).to.deep.equal(['acceptance_criteria', 'constraints'])
  })

  it('gives the same result byte for byte for the same spec and configuration', () => {
    const gates: Record<string, Gate> = {a: {rules: [{path: 'features', min_items: 3}]}, b: {rules: [{path: 'goal', required: true}]}}
    const one = JSON.stringify(evaluateGates(structuredClone(spec), gates, ['a', 'b'], {threshold: 0.5, weights: {goal: 1, constraints: 1}}))
    const two = JSON.stringify(evaluateGates(structuredClone(spec), gates, ['a', 'b'], {threshold: 0.5, weights: {constraints: 1, goal: 1}}))
    expect(one).to.equal(two)
  })

  it('refuses to evaluate a gate that is not defined', () => {
    expect(() => evaluateGates(spec, {}, ['nope'])).to.throw('gate "nope" is not defined')
  })
})
