import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {ExprChecker, type ExprDiagnostic} from '../../src/expr/check.js'
import {ExprEvaluator, ExpressionError, type ExprContext} from '../../src/expr/evaluate.js'
import {loadRegexEngine} from '../../src/expr/regex.js'
import {elementSchema, schemaRef} from '../../src/expr/schema.js'
import type {ExprDeclarations} from '../../src/expr/scope.js'
import {hasTemplate, parseTemplate, type ExprPart} from '../../src/expr/template.js'
import {fromCel, stringify} from '../../src/expr/values.js'

// $ref pointers resolve against the document they are in: here, the draft step's outputs schema.
const draftOutputs = {
  type: 'object',
  properties: {value: {$ref: '#/definitions/notes'}},
  definitions: {
    notes: {type: 'object', properties: {items: {type: 'array', items: {$ref: '#/definitions/item'}}, total: {type: 'number'}}},
    item: {type: 'object', properties: {title: {type: 'string'}, weight: {type: 'integer'}, tags: {type: 'array', items: {type: 'string'}}}},
  },
}

const decl: ExprDeclarations = {
  inputs: {
    since: {type: 'string', required: true},
    audience: {type: 'string', enum: ['internal', 'customers'], default: 'internal'},
    max_items: {type: 'integer', default: 20, minimum: 1},
    ratio: {type: 'number'},
    dry: {type: 'boolean'},
  },
  steps: {
    log: {
      outputs: {type: 'object', properties: {lines: {type: 'array', items: {type: 'string'}}, exit_code: {type: 'integer'}, stdout: {type: 'string'}}},
      outcomes: ['ok', 'fail', 'timeout', 'skipped'],
    },
    draft: {outputs: draftOutputs},
    anything: {},
    meta: {
      outputs: {
        type: 'object',
        properties: {
          labels: {type: 'object', additionalProperties: {type: 'integer'}},
          extra: {type: 'object', properties: {a: {type: 'string'}}, additionalProperties: true},
          free: {type: 'object'},
        },
      },
    },
    closed: {outputs: {type: 'object', properties: {}, additionalProperties: false}},
  },
  spec: {
    type: 'object',
    properties: {goal: {type: 'string'}, features: {type: 'array', items: {type: 'object', properties: {id: {type: 'string'}, priority: {type: 'string'}}}}},
  },
  secrets: ['RELEASE_TOKEN'],
}

const context: ExprContext = {
  inputs: {since: 'v1.2', audience: 'customers', max_items: 5, ratio: 2, dry: false},
  steps: {
    log: {outputs: {lines: ['a1 fix', 'b2 feat'], exit_code: 0, stdout: 'a1 fix\nb2 feat\n'}, outcome: 'ok'},
    draft: {
      outputs: {
        value: {
          items: [
            {title: 'Fix', weight: 2, tags: ['x']},
            {title: 'Feat', weight: 3, tags: []},
          ],
          total: 5,
        },
      },
      outcome: 'ok',
    },
    meta: {outputs: {labels: {a: 1}, extra: {a: 'x', b: 2}, free: {deep: {n: 1}}}, outcome: 'ok'},
  },
  spec: {goal: 'Track expenses', features: [{id: 'FR-001', priority: 'P0'}]},
  run: {id: 'R-20260101-0001', feature_id: 'F-1', parent: null},
  secrets: {RELEASE_TOKEN: 's3cret'},
}

describe('expr: templates', () => {
  it('finds expressions with their offsets and keeps the text around them', () => {
    const text = 'git log ${{ inputs.since }}..HEAD'
    const t = parseTemplate(text)
    expect(t.diagnostics).to.deep.equal([])
    expect(t.whole).to.equal(undefined)
    expect(t.parts).to.deep.equal([
      {kind: 'text', text: 'git log ', offset: 0},
      {kind: 'expr', expression: 'inputs.since', offset: 8, end: 27, expressionOffset: 12},
      {kind: 'text', text: '..HEAD', offset: 27},
    ])
    const part = t.parts[1] as ExprPart
    expect(text.slice(part.expressionOffset, part.expressionOffset + part.expression.length)).to.equal('inputs.since')
  })

  it('treats a scalar that is exactly one expression as whole; whitespace around it, written on purpose, makes a string', () => {
    expect(parseTemplate('${{ steps.log.outputs.lines }}').whole?.expression).to.equal('steps.log.outputs.lines')
    expect(parseTemplate('${{x}}').whole?.expression).to.equal('x')
    expect(parseTemplate('  ${{x}}\n').whole).to.equal(undefined)
    expect(parseTemplate('${{ x }}\n').whole).to.equal(undefined)
    expect(parseTemplate('a ${{ x }}').whole).to.equal(undefined)
    expect(parseTemplate('${{ x }}${{ y }}').whole).to.equal(undefined)
    expect(parseTemplate('plain text').parts).to.deep.equal([{kind: 'text', text: 'plain text', offset: 0}])
  })

  it('ends an expression at the first }} outside string literals, comments and map literals', () => {
    expect(parseTemplate("${{ 'a}}b' }}").whole?.expression).to.equal("'a}}b'")
    expect(parseTemplate('${{ "a}}b" + "c\\"}}" }}').whole?.expression).to.equal('"a}}b" + "c\\"}}"')
    expect(parseTemplate("${{ '''x}}'y''' }}").whole?.expression).to.equal("'''x}}'y'''")
    expect(parseTemplate("${{ r'\\' + 'x' }}").whole?.expression).to.equal("r'\\' + 'x'")
    expect(parseTemplate("${{ {'k': {'n': 1}} }}").whole?.expression).to.equal("{'k': {'n': 1}}")
    expect(parseTemplate('${{ 1 // a comment with }}\n + 2 }}').whole?.expression).to.equal('1 // a comment with }}\n + 2')
  })

  it('reports an unterminated expression or string and an empty one, at the ${{', () => {
    expect(parseTemplate('x ${{ inputs.since').diagnostics).to.deep.equal([{message: 'unterminated ${{: no closing }}', offset: 2, length: 16}])
    const t = parseTemplate("ab ${{ 'oops }}")
    expect(t.diagnostics).to.have.length(1)
    expect(t.diagnostics[0]!.message).to.match(/unterminated string literal/)
    expect(t.diagnostics[0]!.offset).to.equal(3)
    expect(parseTemplate('${{   }}').diagnostics[0]!.message).to.match(/^empty expression/)
  })

  it('writes a literal ${{ with $${{ and leaves other dollars and braces alone', () => {
    const t = parseTemplate('echo $${{ not.an.expr }} $HOME {{name}} }}')
    expect(t.parts).to.deep.equal([{kind: 'text', text: 'echo ${{ not.an.expr }} $HOME {{name}} }}', offset: 0}])
    expect(hasTemplate('$${{ x }}')).to.equal(true)
    expect(hasTemplate('{{ x }}')).to.equal(false)
  })
})

describe('expr: values at the boundary', () => {
  it('stringifies for interpolation', () => {
    expect(stringify('a b')).to.equal('a b')
    expect(stringify(5)).to.equal('5')
    expect(stringify(0.5)).to.equal('0.5')
    expect(stringify(true)).to.equal('true')
    expect(stringify(null)).to.equal('')
    expect(stringify(['a', 1, {k: null}])).to.equal('["a",1,{"k":null}]')
    expect(stringify({b: [true]})).to.equal('{"b":[true]}')
  })

  it('turns BigInt into numbers inside the safe range and refuses the rest', () => {
    expect(fromCel(42n, 100)).to.equal(42)
    expect(fromCel([1n, {a: -3n}], 100)).to.deep.equal([1, {a: -3}])
    expect(
      fromCel(
        new Map<unknown, unknown>([
          ['k', 1n],
          [2n, true],
        ]),
        100,
      ),
    ).to.deep.equal({k: 1, '2': true})
    expect(fromCel(BigInt(Number.MAX_SAFE_INTEGER), 100)).to.equal(Number.MAX_SAFE_INTEGER)
    expect(() => fromCel(BigInt(Number.MAX_SAFE_INTEGER) + 1n, 100)).to.throw(/outside the safe range/)
    expect(() => fromCel([1n, 2n ** 60n], 100)).to.throw(/at result\[1\]/)
    expect(() => fromCel(Number.NaN, 100)).to.throw(/not a JSON number/)
  })

  it('keeps "__proto__" as an ordinary key', () => {
    const out = fromCel(new Map([['__proto__', 1n]]), 100) as Record<string, unknown>
    expect(Object.keys(out)).to.deep.equal(['__proto__'])
    expect(Object.getPrototypeOf(out)).to.equal(Object.prototype)
  })
})

describe('expr: evaluation', () => {
  const evaluator = new ExprEvaluator(decl)

  it('reads every part of the context with typed results', () => {
    expect(evaluator.evaluate('inputs.since', context)).to.equal('v1.2')
    expect(evaluator.evaluate('policy.max_retries_default + 1', {...context, policy: {max_retries_default: 1, max_patch_lines: 50}})).to.equal(2)
    expect(evaluator.evaluate('inputs.max_items + 1', context)).to.equal(6)
    expect(evaluator.evaluate('inputs.ratio * 1.5', context)).to.equal(3)
    expect(evaluator.evaluate('!inputs.dry', context)).to.equal(true)
    expect(evaluator.evaluate('steps.log.outputs.lines', context)).to.deep.equal(['a1 fix', 'b2 feat'])
    expect(evaluator.evaluate('size(steps.log.outputs.lines)', context)).to.equal(2)
    expect(evaluator.evaluate('steps.log.outcome', context)).to.equal('ok')
    expect(evaluator.evaluate('steps.draft.outputs.value.items.map(i, i.weight * 2)', context)).to.deep.equal([4, 6])
    expect(evaluator.evaluate('steps.draft.outputs.value.total / 2.0', context)).to.equal(2.5)
    expect(evaluator.evaluate('spec.features[0].id', context)).to.equal('FR-001')
    expect(evaluator.evaluate('run.id + "/" + run.feature_id', context)).to.equal('R-20260101-0001/F-1')
    expect(evaluator.evaluate('run.parent', context)).to.equal(null)
    expect(evaluator.evaluate('secrets.RELEASE_TOKEN', context)).to.equal('s3cret')
    expect(evaluator.evaluate("{'n': 1, 'l': [1.5, 'x'], 'b': true}", context)).to.deep.equal({n: 1, l: [1.5, 'x'], b: true})
    expect(evaluator.evaluate('timestamp("2024-01-01T00:00:00Z")', context)).to.equal('2024-01-01T00:00:00.000Z')
  })

  it('reads integral JSON numbers as ints where nothing is declared, and as doubles where the schema says number', () => {
    const free = {steps: {anything: {outputs: {n: 2, x: 2.5}}}, inputs: {ratio: 2}}
    expect(evaluator.evaluate('steps.anything.outputs.n + 1', free)).to.equal(3)
    expect(evaluator.evaluate('steps.anything.outputs.x + 0.5', free)).to.equal(3)
    expect(evaluator.evaluate('inputs.ratio + 0.5', free)).to.equal(2.5)
    expect(() => evaluator.evaluate('inputs.ratio + 1', free)).to.throw(ExpressionError, /no such overload/)
  })

  it('binds a foreach alias for one evaluation', () => {
    const item = {value: {title: 'Fix', weight: 2}, schema: schemaRef(draftOutputs.definitions.item, draftOutputs)}
    expect(evaluator.evaluate('item.title + ":" + string(item.weight + 1)', context, {item})).to.equal('Fix:3')
    expect(() => evaluator.evaluate('item', context, {inputs: {value: 1}})).to.throw(/already a name/)
  })

  it('renders a scalar: whole expressions typed, interpolations stringified, escapes undone', () => {
    const bound = evaluator.bind(context)
    expect(bound.render('${{ steps.log.outputs.lines }}')).to.deep.equal(['a1 fix', 'b2 feat'])
    expect(bound.render('${{ inputs.max_items }}')).to.equal(5)
    // A file's content keeps the newline written after its one expression.
    expect(bound.render('${{ inputs.max_items }}\n')).to.equal('5\n')
    expect(bound.render(' ${{ inputs.max_items }} ')).to.equal(' 5 ')
    expect(bound.render('${{ inputs.since }}..HEAD')).to.equal('v1.2..HEAD')
    expect(bound.render('n=${{ inputs.max_items }} r=${{ 0.5 }} d=${{ inputs.dry }} p=[${{ run.parent }}] l=${{ steps.log.outputs.lines }}')).to.equal(
      'n=5 r=0.5 d=false p=[] l=["a1 fix","b2 feat"]',
    )
    expect(bound.render('cost $${{ not evaluated }}')).to.equal('cost ${{ not evaluated }}')
    expect(bound.render('no expressions')).to.equal('no expressions')
    expect(() => bound.render('x ${{ inputs.since')).to.throw(
      ExpressionError,
      'text "x ${{ inputs.since" is not a valid template: unterminated ${{: no closing }}',
    )
  })

  it('turns evaluation failures into ExpressionError with the expression, reason and offset', () => {
    const fail = (expression: string): ExpressionError => {
      try {
        evaluator.evaluate(expression, context)
      } catch (error) {
        expect(error).to.be.instanceOf(ExpressionError)
        return error as ExpressionError
      }
      throw new Error(`${expression} did not fail`)
    }
    const missing = fail('steps.log.outputs.nope')
    expect(missing.message).to.equal('expression ${{ steps.log.outputs.nope }} failed: No such key: nope (at column 19 of the expression)')
    expect(missing.reason).to.equal('no_such_key')
    expect(missing.expression).to.equal('steps.log.outputs.nope')
    expect(missing.offset).to.equal(18)
    expect(missing.code).to.equal('E_CONFIG')
    expect(fail('1 / (inputs.max_items - 5)').reason).to.equal('division_by_zero')
    expect(fail('inputs.since + 1').reason).to.equal('no_such_overload')
    expect(fail('inputs.since +').message).to.match(/syntax error/)
    expect(fail('9223372036854775807 + 1').reason).to.equal('numeric_overflow')
    expect(fail('9007199254740993').message).to.match(/outside the safe range of JSON numbers/)
    expect(fail('b"raw"').reason).to.equal('not_json')
    expect(fail('duration("1s")').message).to.match(/a duration value is not JSON/)
    expect(fail('steps.log.outputs.constructor').reason).to.equal('no_such_key')
  })

  it('enforces the expression length and result size limits', () => {
    const small = new ExprEvaluator(decl, {maxExpressionLength: 20, maxResultBytes: 16})
    expect(() => small.evaluate('inputs.since + inputs.since', context)).to.throw(ExpressionError, /27 characters long; the limit is 20/)
    expect(small.evaluate("'0123456789abcd'", context)).to.equal('0123456789abcd')
    expect(() => small.evaluate("'0123456789abcdef'", context)).to.throw(ExpressionError, /larger than the limit/)
    expect(() => small.render('${{ inputs.since }} is a long text', context)).to.throw(ExpressionError, /rendered string is larger/)
    // 4^15 elements through shared references: measured while converting, so this ends at once.
    const big = new ExprEvaluator(decl, {maxResultBytes: 10_000})
    const doubling = 'cel.bind(a, [1], ' + 'cel.bind(a, [a, a, a, a], '.repeat(15) + 'a' + ')'.repeat(16)
    expect(() => big.evaluate(doubling, context)).to.throw(ExpressionError, /larger than the limit/)
  })

  it('bounds the steps of one evaluation, even where cel-js would swallow the error', () => {
    const tight = new ExprEvaluator(decl, {maxEvaluationSteps: 10_000})
    const l = "inputs.since.split('')"
    expect(tight.evaluate(`size(${l}.map(a, ${l}))`, context)).to.equal(4)
    const long = {inputs: {since: 'x'.repeat(200)}}
    const nested = `size(${l}.map(a, ${l}.map(b, b)))`
    expect(() => tight.evaluate(nested, long)).to.throw(ExpressionError, /more than 10000 evaluation steps, the limit/)
    // `error || true` is true in CEL: an evaluation that went over still gives no value.
    expect(() => tight.evaluate(`${nested} > 0 || true`, long)).to.throw(ExpressionError, /more than 10000 evaluation steps/)
    expect(() => tight.evaluate(`${l}.exists(a, ${l}.exists(b, b == 'y'))`, long)).to.throw(ExpressionError, /more than 10000 evaluation steps/)
    // Building large values costs their size: doubling a list runs out of steps long before memory.
    const doubling = 'cel.bind(a, [1], ' + 'cel.bind(a, a + a, '.repeat(20) + 'size(a)' + ')'.repeat(21)
    expect(() => tight.evaluate(doubling, context)).to.throw(ExpressionError, /evaluation steps/)
    const slow = new ExprEvaluator(decl, {maxEvaluationMs: 1, maxEvaluationSteps: Number.MAX_SAFE_INTEGER})
    expect(() => slow.evaluate(`size(${l}.map(a, ${l}.map(b, ${l}.map(c, c))))`, long)).to.throw(ExpressionError, /ran longer than 1 ms, the limit/)
  })

  it('matches with RE2: any part of the text, linear time, a pattern RE2 refuses an error', async () => {
    await loadRegexEngine()
    const re = new ExprEvaluator(decl)
    expect(re.evaluate("inputs.since.matches('1\\\\.2')", context)).to.equal(true)
    expect(re.evaluate("inputs.since.matches('^1')", context)).to.equal(false)
    expect(re.evaluate("inputs.since.matches('^(a+)+$')", {inputs: {since: `${'a'.repeat(5000)}b`}})).to.equal(false)
    expect(re.evaluate('inputs.since.matches(inputs.audience)', {inputs: {since: 'v1.2', audience: '\\d'}})).to.equal(true)
    let error: ExpressionError | undefined
    try {
      re.evaluate('inputs.since.matches(inputs.audience)', {inputs: {since: 'aa', audience: '(a)\\1'}})
    } catch (caught) {
      error = caught as ExpressionError
    }
    expect(error?.reason).to.equal('invalid_regular_expression')
    expect(error?.message).to.contain('matches(): the pattern "(a)\\\\1" is not an RE2 regular expression (invalid escape sequence: `\\1`)')
    expect(error?.message).to.contain('(at column 1 of the expression)')
  })

  it('parses each distinct expression once', () => {
    const fresh = new ExprEvaluator(decl)
    for (let i = 0; i < 3; i++) fresh.evaluate('inputs.max_items * 2', {inputs: {max_items: i}})
    expect(fresh.parseCount).to.equal(1)
    fresh.render('a ${{ inputs.max_items * 2 }} b ${{ inputs.since }}', context)
    expect(fresh.parseCount).to.equal(2)
    fresh.evaluate('item', context, {item: {value: 1}})
    fresh.evaluate('item', context, {item: {value: 2}})
    expect(fresh.parseCount).to.equal(3)
  })

  it('has no eval or Function constructor anywhere in the module', async () => {
    const dir = path.resolve('src/expr')
    for (const file of await readdir(dir)) {
      const source = await readFile(path.join(dir, file), 'utf8')
      expect(source, file).not.to.match(/\beval\s*\(|new\s+Function\s*\(|\bFunction\s*\(/)
    }
  })
})

describe('expr: static checks', () => {
  const checker = new ExprChecker(decl)
  const diags = (expression: string, options = {}): ExprDiagnostic[] => [...checker.check(expression, options).diagnostics]
  const one = (expression: string, options = {}): ExprDiagnostic => {
    const list = diags(expression, options)
    expect(list, expression).to.have.length(1)
    return list[0]!
  }

  it('accepts good references and reports their result types', () => {
    const good: Array<[string, string]> = [
      ['inputs.since', 'string'],
      ['inputs.max_items + 1', 'int'],
      ['inputs.ratio * 2.0', 'double'],
      ["inputs.audience == 'customers'", 'bool'],
      ['steps.log.outputs.lines', 'list<string>'],
      ['size(steps.log.outputs.lines) == 0', 'bool'],
      ['steps.log.outcome', 'string'],
      ['policy.max_retries_default + 1', 'int'],
      ['steps.draft.outputs.value.items.map(i, i.title)', 'list<string>'],
      ['steps.draft.outputs.value.items.exists(i, "x" in i.tags)', 'bool'],
      ['steps.draft.outputs.value.items[0].weight', 'int'],
      ['steps.log.outputs["exit_code"]', 'int'],
      ['steps.anything.outputs.whatever.deep[3]', 'dyn'],
      ["steps.meta.outputs.labels['x'] + 1", 'int'],
      ['steps.meta.outputs.extra.not_declared_but_open', 'dyn'],
      ['steps.meta.outputs.free.deep.n', 'dyn'],
      ['spec.features.map(f, f.priority)', 'list<string>'],
      ['run.id', 'string'],
      ['secrets.RELEASE_TOKEN', 'string'],
      ['cel.bind(l, steps.log.outputs.lines, size(l))', 'int'],
      ['type(inputs.since) == string', 'bool'],
      ["{'a': 1, 'b': 'x'}", 'map<string, dyn>'],
    ]
    for (const [expression, type] of good) {
      const result = checker.check(expression)
      expect(result.diagnostics, expression).to.deep.equal([])
      expect(result.type, expression).to.equal(type)
    }
  })

  it('reports syntax errors at their column in the expression', () => {
    expect(one('inputs.since +')).to.deep.equal({message: 'syntax error: Unexpected token: EOF', offset: 14, length: 0})
    const d = one('steps.log.outputs.lines[0')
    expect(d.message).to.match(/^syntax error/)
    expect(d.offset).to.equal(25)
  })

  it('reports unknown names, inputs, steps, step parts, secrets and run fields with did-you-mean', () => {
    expect(one('foo + 1')).to.deep.equal({
      message: 'unknown name "foo"; an expression reads inputs, steps, spec, run, secrets, policy or a foreach alias',
      offset: 0,
      length: 3,
    })
    expect(one('input.since')).to.include({offset: 0, length: 5, suggestion: 'inputs'})
    expect(one('inputs.sinse')).to.deep.equal({
      message: 'unknown input "sinse" (declared: since, audience, max_items, ratio, dry) — did you mean "since"?',
      offset: 7,
      length: 5,
      suggestion: 'since',
    })
    expect(one('size(steps.lgo.outputs.lines) > 0')).to.deep.equal({
      message: 'unknown step "lgo" — did you mean "log"?',
      offset: 11,
      length: 3,
      suggestion: 'log',
    })
    expect(one('steps.log.output.lines')).to.include({offset: 10, length: 6, suggestion: 'outputs'})
    expect(one('secrets.RELEASE_TOKN').message).to.equal(
      'secret "RELEASE_TOKN" is not listed under secrets: (declared: RELEASE_TOKEN) — did you mean "RELEASE_TOKEN"?',
    )
    expect(one('run.feature').suggestion).to.equal('feature_id')
    expect(one('policy.max_retries_defalt').message).to.equal(
      'policy has no "max_retries_defalt"; it has max_retries_default and max_patch_lines — did you mean "max_retries_default"?',
    )
    expect(one("steps['lgo']")).to.include({offset: 6, length: 5, suggestion: 'log'})
  })

  it('reports fields the declared outputs do not have, through $ref, items and maps', () => {
    expect(one('steps.log.outputs.linez')).to.deep.equal({
      message: 'steps.log.outputs has no field "linez" (it has lines, exit_code, stdout) — did you mean "lines"?',
      offset: 18,
      length: 5,
      suggestion: 'lines',
    })
    expect(one('steps.draft.outputs.value.items[0].titel')).to.include({offset: 35, suggestion: 'title'})
    expect(one('steps.draft.outputs.value.items.map(i, i.titel)').message).to.equal(
      'steps.draft.outputs.value.items[] has no field "titel" (it has title, weight, tags) — did you mean "title"?',
    )
    expect(one('steps.draft.outputs.value.items.all(n, it, it.wieght > 0)').suggestion).to.equal('weight')
    expect(one('cel.bind(x, steps.log.outputs, x.stdot)').suggestion).to.equal('stdout')
    expect(one('steps.closed.outputs.x').message).to.equal('steps.closed.outputs has no field "x" (it declares no fields)')
    expect(one('spec.feature').suggestion).to.equal('features')
    expect(one('has(steps.log.outputs.stdot)').suggestion).to.equal('stdout')
  })

  it('checks string literals compared with a declared enum (inputs, step outcomes)', () => {
    expect(diags("inputs.audience == 'customers' && steps.log.outcome != 'fail' && steps.draft.outcome == 'anything'")).to.deep.equal([])
    expect(one("inputs.audience == 'customer'")).to.deep.equal({
      message: 'inputs.audience is never "customer"; it is one of "internal", "customers" — did you mean "customers"?',
      offset: 19,
      length: 10,
      suggestion: 'customers',
    })
    expect(one("'sucess' != steps.log.outcome").message).to.equal('steps.log.outcome is never "sucess"; it is one of "ok", "fail", "timeout", "skipped"')
    expect(one("steps.log.outcome in ['ok', 'timout']")).to.include({offset: 28, suggestion: 'timeout'})
  })

  it('reports every bad reference of an expression, not only the first', () => {
    const list = diags('inputs.sinse + steps.lgo.outputs.x + foo')
    expect(list.map((d) => d.offset)).to.deep.equal([7, 21, 37])
  })

  it('type-checks with types from the schemas', () => {
    expect(one("size(steps.log.outputs.lines) == 'x'")).to.deep.equal({message: 'type error: no such overload: int == string', offset: 0, length: 36})
    expect(one('steps.log.outputs.stdout + 1').message).to.equal('type error: no such overload: string + int')
    expect(one('steps.draft.outputs.value.total + 1').message).to.match(/^type error: no such overload: double \+ int \(CEL does not mix int and double/)
    expect(one('inputs.dry ? 1 : "x"').message).to.match(/^type error: Ternary branches/)
    expect(one('steps.log.outputs.lines.map(l, l + 1)').message).to.equal('type error: no such overload: string + int')
    expect(one('inputs.max_items.foo').message).to.match(/^type error/)
  })

  it('checks the result type when asked (when: must be a bool)', () => {
    expect(diags("inputs.audience == 'customers'", {expect: 'bool'})).to.deep.equal([])
    expect(diags('steps.anything.outputs.flag', {expect: 'bool'})).to.deep.equal([])
    expect(one('steps.log.outputs.exit_code', {expect: 'bool'}).message).to.equal('expected a bool, but this expression gives int')
    expect(diags('steps.log.outputs.lines', {expect: 'list'})).to.deep.equal([])
  })

  it('types aliases from a schema and lists what an expression reads', () => {
    const items = checker.check('steps.draft.outputs.value.items')
    expect(items.references).to.deep.equal(['steps.draft.outputs.value.items'])
    const aliases = {item: elementSchema(items.schema)}
    expect(diags('item.title + "!"', {aliases})).to.deep.equal([])
    expect(one('item.weight + "x"', {aliases}).message).to.match(/^type error/)
    expect(one('item.titel', {aliases})).to.include({suggestion: 'title', offset: 5})
    expect(diags('item.anything', {aliases: {item: undefined}})).to.deep.equal([])
    expect(one('item', {aliases: {steps: undefined}}).message).to.match(/^alias "steps" is already a name/)
    expect(checker.check('steps.log.outputs.lines.size() > inputs.max_items && run.id != ""').references).to.deep.equal([
      'inputs.max_items',
      'run.id',
      'steps.log.outputs.lines',
    ])
  })

  it('parses each distinct expression once per alias set', () => {
    const fresh = new ExprChecker(decl)
    fresh.check('inputs.since')
    fresh.check('inputs.since')
    fresh.checkTemplate('${{ inputs.since }} and ${{ inputs.since }}')
    expect(fresh.parseCount).to.equal(1)
    fresh.check('inputs.since', {aliases: {item: undefined}})
    expect(fresh.parseCount).to.equal(2)
  })

  it('enforces the length limit before parsing', () => {
    const small = new ExprChecker(decl, {maxExpressionLength: 10})
    expect(small.check('inputs.since').diagnostics[0]!.message).to.equal('expression is 12 characters long; the limit is 10')
  })

  it('checks every expression of a scalar with offsets in the scalar', () => {
    const text = "git log ${{ inputs.sinse }}..${{ 'a}}b' + steps.lgo.outcome }}"
    const result = checker.checkTemplate(text)
    expect(result.diagnostics.map((d) => [text.slice(d.offset, d.offset + d.length), d.suggestion])).to.deep.equal([
      ['sinse', 'since'],
      ['lgo', 'log'],
    ])
    const broken = checker.checkTemplate('x ${{ inputs.since')
    expect(broken.diagnostics.map((d) => d.offset)).to.deep.equal([2])
    expect(checker.checkTemplate('${{ inputs.dry }}', {expect: 'bool'}).diagnostics).to.deep.equal([])
    expect(checker.checkTemplate('is ${{ inputs.dry }}', {expect: 'bool'}).diagnostics[0]!.message).to.match(/^expected a bool: write the value as one/)
  })
})
