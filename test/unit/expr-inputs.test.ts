import {expect} from 'chai'
import {parse as parseYaml} from 'yaml'
import {ExprChecker} from '../../src/expr/check.js'
import {ExprEvaluator} from '../../src/expr/evaluate.js'
import {checkDeclarations, coerce, parseInputPairs, resolveInputs, type InputDeclaration} from '../../src/expr/inputs.js'

const declarations: Record<string, InputDeclaration> = {
  since: {type: 'string', required: true, description: 'git ref to start from'},
  audience: {type: 'string', enum: ['internal', 'customers'], default: 'internal'},
  max_items: {type: 'integer', default: 20, minimum: 1, maximum: 100},
  ratio: {type: 'number'},
  dry: {type: 'boolean', default: false},
}

const messages = (list: ReadonlyArray<{message: string}>): string[] => list.map((p) => p.message)

describe('expr: typed inputs', () => {
  it('parses key=value pairs: the rest after the first = is the value, key= is empty', () => {
    const {values, problems} = parseInputPairs(['since=v1.2', 'audience=', 'ratio=a=b'], declarations)
    expect(problems).to.deep.equal([])
    expect(values).to.deep.equal({since: 'v1.2', audience: '', ratio: 'a=b'})
  })

  it('refuses pairs without =, unknown keys (with did-you-mean) and repeated keys, all at once', () => {
    const {problems} = parseInputPairs(['since', '=x', 'max_itme=5', 'since=a', 'since=b'], declarations)
    expect(messages(problems)).to.deep.equal([
      '-i since: expected name=value',
      '-i =x: the name before = is missing',
      '-i max_itme: unknown input "max_itme" — did you mean "max_items"? (declared: since, audience, max_items, ratio, dry)',
      '-i since: given more than once; give each input once',
    ])
    expect(messages(parseInputPairs(['a=1'], {}).problems)).to.deep.equal(['-i a: unknown input "a"; the pipeline declares no inputs'])
  })

  it('coerces strictly', () => {
    expect(coerce('5', 'integer')).to.deep.equal({value: 5})
    expect(coerce('-3', 'integer')).to.deep.equal({value: -3})
    expect(coerce('5.5', 'integer')).to.deep.equal({problem: 'expected an integer (no fraction or exponent)'})
    expect(coerce('5e2', 'integer').problem).to.equal('expected an integer (no fraction or exponent)')
    expect(coerce('0x10', 'integer').problem).to.equal('expected an integer')
    expect(coerce('', 'integer').problem).to.equal('expected an integer')
    expect(coerce('99999999999999999999', 'integer').problem).to.match(/out of range/)
    expect(coerce('5.5', 'number')).to.deep.equal({value: 5.5})
    expect(coerce('1e3', 'number')).to.deep.equal({value: 1000})
    expect(coerce('Infinity', 'number').problem).to.equal('expected a number')
    expect(coerce('NaN', 'number').problem).to.equal('expected a number')
    expect(coerce(' 5', 'number').problem).to.equal('expected a number')
    expect(coerce('true', 'boolean')).to.deep.equal({value: true})
    expect(coerce('false', 'boolean')).to.deep.equal({value: false})
    for (const text of ['yes', 'no', '1', '0', 'True', 'on']) expect(coerce(text, 'boolean').problem, text).to.equal('expected true or false')
    expect(coerce('', 'string')).to.deep.equal({value: ''})
  })

  it('merges command line over values file over defaults, and says where each value came from', () => {
    const file = {name: 'values.yaml', data: parseYaml('since: v1.0\nmax_items: 7\nratio: 0.5\n') as unknown}
    const result = resolveInputs(declarations, {cli: ['max_items=9', 'dry=true'], file})
    expect(result.problems).to.deep.equal([])
    expect(result.values).to.deep.equal({since: 'v1.0', audience: 'internal', max_items: 9, ratio: 0.5, dry: true})
    expect(result.sources).to.deep.equal({since: 'file', audience: 'default', max_items: 'cli', ratio: 'file', dry: 'cli'})
  })

  it('leaves an optional input without a default absent', () => {
    const result = resolveInputs(declarations, {cli: ['since=x']})
    expect(result.problems).to.deep.equal([])
    expect(Object.keys(result.values)).to.deep.equal(['since', 'audience', 'max_items', 'dry'])
  })

  it('collects every problem: types, enum, range, missing required', () => {
    const decls: Record<string, InputDeclaration> = {...declarations, token: {type: 'string', required: true}}
    const result = resolveInputs(decls, {cli: ['audience=customer', 'max_items=0', 'ratio=x', 'dry=yes']})
    expect(messages(result.problems)).to.deep.equal([
      '-i audience: "customer" is not one of "internal", "customers" — did you mean "customers"?',
      '-i max_items: 0 is less than the minimum 1',
      '-i ratio=x: expected a number',
      '-i dry=yes: expected true or false',
      'missing required inputs: since (string, git ref to start from); token (string). Give -i since=… -i token=…',
    ])
    expect(result.values).to.deep.equal({})
  })

  it('checks a values file: mapping, unknown keys, YAML types (a string input given a number must be quoted)', () => {
    const file = {name: 'v.yaml', data: parseYaml('since: 1.10\nmax_items: 5.0\nratio: 3\nmax_iems: 2\naudience: null\n') as unknown}
    const result = resolveInputs(declarations, {file})
    expect(messages(result.problems)).to.deep.equal([
      'v.yaml: unknown input "max_iems" — did you mean "max_items"? (declared: since, audience, max_items, ratio, dry)',
      'v.yaml: since: 1.1 is not a string (it is a number with a fraction) (quote it in the file)',
      'v.yaml: audience: null is not a string (it is null)',
    ])
    expect(result.values).to.deep.equal({max_items: 5, ratio: 3, dry: false})
    expect(messages(resolveInputs(declarations, {cli: ['since=a'], file: {name: 'l.yaml', data: ['a']}}).problems)).to.deep.equal([
      'l.yaml: expected a mapping of input names to values, got a list',
    ])
    expect(resolveInputs(declarations, {cli: ['since=a'], file: {name: 'empty.yaml', data: null}}).problems).to.deep.equal([])
  })

  it('checks declarations: defaults and enum values against the type, required with default, ranges, names', () => {
    const problems = checkDeclarations({
      good: {type: 'integer', default: 3, minimum: 1},
      bad_default: {type: 'integer', default: 'x'},
      bad_enum: {type: 'string', enum: ['a', 2]},
      both: {type: 'string', required: true, default: 'x'},
      out_of_range: {type: 'number', default: 50, maximum: 10},
      not_in_enum: {type: 'string', enum: ['alpha'], default: 'omega'},
      range_on_string: {type: 'string', minimum: 1},
      inverted: {type: 'integer', minimum: 5, maximum: 1},
      'bad-name': {type: 'string'},
    })
    expect(messages(problems)).to.deep.equal([
      'input "bad_default": default "x" is not an integer (it is a string)',
      'input "bad_enum": enum value 2 is not a string (it is an integer)',
      'input "both": a required input cannot have a default (drop one of them)',
      'input "out_of_range": default 50 is greater than the maximum 10',
      'input "not_in_enum": default "omega" is not one of "alpha"',
      'input "range_on_string": minimum and maximum apply to numbers, not to a string',
      'input "inverted": minimum 5 is greater than maximum 1',
      'input "bad-name": the name must be letters, digits and _, starting with a letter or _, so expressions can read inputs.bad-name',
    ])
  })

  it('keeps "__proto__" an ordinary input name', () => {
    const decls = JSON.parse('{"__proto__": {"type": "string"}}') as Record<string, InputDeclaration>
    const result = resolveInputs(decls, {cli: ['__proto__=x']})
    expect(result.problems).to.deep.equal([])
    expect(Object.keys(result.values)).to.deep.equal(['__proto__'])
    expect(Object.getPrototypeOf(result.values)).to.equal(Object.prototype)
  })
})

describe('expr: inputs flow into expressions', () => {
  it('types declared inputs for the checker and converts resolved values for the evaluator', () => {
    const checker = new ExprChecker({inputs: declarations})
    expect(checker.check('inputs.max_items + 1').type).to.equal('int')
    expect(checker.check('inputs.ratio * 2.0').type).to.equal('double')
    expect(checker.check('inputs.dry || false').type).to.equal('bool')
    expect(checker.check("inputs.audience == 'customer'").diagnostics[0]!.suggestion).to.equal('customers')
    const {values, problems} = resolveInputs(declarations, {cli: ['since=v2', 'ratio=2', 'max_items=3']})
    expect(problems).to.deep.equal([])
    const evaluator = new ExprEvaluator({inputs: declarations})
    expect(evaluator.evaluate('inputs.max_items + 1', {inputs: values})).to.equal(4)
    expect(evaluator.evaluate('inputs.ratio * 2.5', {inputs: values})).to.equal(5)
    expect(evaluator.render('${{ inputs.since }}..HEAD (${{ inputs.audience }})', {inputs: values})).to.equal('v2..HEAD (internal)')
  })
})
