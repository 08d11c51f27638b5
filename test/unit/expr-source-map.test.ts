import {expect} from 'chai'
import {isMap, isScalar, LineCounter, parseDocument, type Scalar} from 'yaml'
import {ExprChecker} from '../../src/expr/check.js'
import {decodeScalar, scalarOffsetMapper, type ScalarType} from '../../src/expr/source-map.js'

/** Every scalar value of a top-level mapping, with its source slice, as the loader will see them. */
function scalars(text: string): Array<{key: string; node: Scalar; source: string}> {
  const doc = parseDocument(text)
  if (!isMap(doc.contents)) throw new Error('expected a mapping')
  return doc.contents.items.flatMap((pair) => {
    const node = pair.value
    if (!isScalar(node) || node.range === undefined || node.range === null) return []
    return [{key: String((pair.key as Scalar).value), node, source: text.slice(node.range[0], node.range[1])}]
  })
}

const yamlText = [
  'plain: git log ${{ inputs.since }}..HEAD',
  'double: "say \\"${{ inputs.a }}\\" \\u00e9\\x41\\t${{ inputs.b }}"',
  "single: 'it''s ${{ inputs.c }}'",
  'folded_plain: first line',
  '  second ${{ inputs.d }}',
  '',
  '  after blank ${{ inputs.e }}',
  'double_folded: "one',
  '  two \\',
  '  joined ${{ inputs.f }}"',
  'literal: |',
  '  line one ${{ inputs.g }}',
  '    indented ${{ inputs.h }}',
  '',
  '  last',
  'folded: >-',
  '  fold me',
  '  ${{ inputs.i }}',
  '',
  '  para ${{ inputs.j }}',
  'keep: |+',
  '  kept ${{ inputs.k }}',
  '',
  "single_folded: 'a",
  "  b ${{ inputs.l }}'",
  'empty: ""',
  '',
].join('\n')

describe('expr: YAML scalar offsets', () => {
  it('decodes every scalar form back to the parsed value', () => {
    for (const {key, node, source} of scalars(yamlText)) {
      const map = decodeScalar(source, node.type as ScalarType)
      expect(map?.value, key).to.equal(node.value)
      expect(map?.offsets.length, key).to.equal(String(node.value).length + 1)
    }
  })

  it('maps each ${{ in the value to the ${{ in the file', () => {
    for (const {key, node, source} of scalars(yamlText)) {
      const value = String(node.value)
      const toSource = scalarOffsetMapper(source, node.type, value)
      let at = value.indexOf('${{')
      while (at !== -1) {
        const expression = value.slice(at, value.indexOf('}}', at) + 2)
        expect(source.slice(toSource(at), toSource(at) + expression.length), key).to.equal(expression)
        at = value.indexOf('${{', at + 1)
      }
    }
  })

  it('falls back to the scalar start when the decoding does not reproduce the value', () => {
    const toSource = scalarOffsetMapper('"abc"', 'QUOTE_DOUBLE', 'something else')
    expect(toSource(2)).to.equal(0)
    expect(decodeScalar('|2\n   x\n', 'BLOCK_LITERAL')).to.equal(undefined)
    expect(decodeScalar('"bad \\q"', 'QUOTE_DOUBLE')).to.equal(undefined)
  })

  it('puts a checker diagnostic at the file line and column of the misspelt name', () => {
    const text = 'steps:\n  - id: log\n    run: [git, log, "--since=\\"${{ inputs.sinse }}\\""]\n'
    const lineCounter = new LineCounter()
    const doc = parseDocument(text, {lineCounter})
    const node = doc.getIn(['steps', 0, 'run', 2], true) as Scalar
    const checker = new ExprChecker({inputs: {since: {type: 'string'}}})
    const [diagnostic] = checker.checkTemplate(String(node.value)).diagnostics
    const toSource = scalarOffsetMapper(text.slice(node.range![0], node.range![1]), node.type, String(node.value))
    const position = lineCounter.linePos(node.range![0] + toSource(diagnostic!.offset))
    expect(position).to.deep.equal({line: 3, col: text.split('\n')[2]!.indexOf('sinse') + 1})
    expect(diagnostic!.suggestion).to.equal('since')
  })
})
