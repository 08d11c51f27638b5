/**
 * The node bound of a YAML text (config/yaml-source.ts, MAX_YAML_NODES) counted two ways: a long
 * text is counted from the tokenizer before it is parsed, a short one while walking the parsed
 * document. Both count the same nodes in the same order, so the refusal points at the same line and
 * column whichever way the text went, and a text of exactly the bound passes either way.
 */
import {expect} from 'chai'
import {MAX_YAML_DEPTH, MAX_YAML_NODES, parseYamlText} from '../../src/config/yaml-source.js'

/** 20 nodes of every kind the bound counts (an empty value is none), then a flow list of `items` ones. */
function text(items: number): string {
  return [
    'version: 1',
    'a: &x anchored',
    'b: *x',
    'c: "quoted"',
    'd: |',
    '  text: with a colon, one node',
    '  more',
    'e: {k: v, l: [1]}',
    'f:',
    `big: [${Array.from({length: items}, () => '1').join(',')}]`,
    '',
  ].join('\n')
}

/** The same text after a comment long enough to send it through the tokenizer's count. */
const padded = (body: string): string => `# ${'x'.repeat(300 * 1024)}\n${body}`

function refusal(body: string): string | undefined {
  const result = parseYamlText('t.yaml', body)
  if (result.ok) return undefined
  const [d] = result.diagnostics
  return `${d!.line}:${d!.col} ${d!.rule}`
}

describe('YAML: the node bound, counted from tokens or from the document', function () {
  this.timeout(60000)

  it('refuses the node past the bound at the same place either way (one line down for the comment)', () => {
    const over = text(MAX_YAML_NODES - 20 + 5)
    // The premise: short enough to be parsed, and padded long enough to be counted first.
    expect(over.length).to.be.below(256 * 1024)
    expect(padded(over).length).to.be.above(256 * 1024)
    // The 100,001st node: the item at index MAX_YAML_NODES - 20 of the list, each item two characters on from the last.
    const col = 'big: ['.length + 2 * (MAX_YAML_NODES - 20) + 1
    expect(refusal(over)).to.equal(`10:${col} yaml-size`)
    expect(refusal(padded(over))).to.equal(`11:${col} yaml-size`)
  })

  it('takes a text of exactly the bound either way', () => {
    const exact = text(MAX_YAML_NODES - 20)
    expect(refusal(exact)).to.equal(undefined)
    expect(refusal(padded(exact))).to.equal(undefined)
  })
})

describe('YAML: values nested past MAX_YAML_DEPTH', () => {
  const flow = (levels: number): string => `version: 1\nx: ${'['.repeat(levels)}${']'.repeat(levels)}\n`
  const block = (levels: number): string => `version: 1\nx:\n${Array.from({length: levels}, (_, i) => `${'  '.repeat(i + 1)}k:\n`).join('')}`

  it('refuses a list nested past the bound at its first level too deep, and takes one at the bound', () => {
    expect(MAX_YAML_DEPTH).to.equal(200)
    // The root mapping is level 1, x's list level 2: 199 brackets reach the bound, the 200th passes it.
    expect(refusal(flow(199))).to.equal(undefined)
    expect(refusal(flow(200))).to.equal(`2:${'x: '.length + 200} yaml-depth`)
  })

  it("says so where the yaml package's parser ran out of stack (~800 levels, a 2 KB file), and for mappings nested by indentation", () => {
    const deep = parseYamlText('t.yaml', flow(5000))
    expect(deep.ok).to.equal(false)
    expect(JSON.stringify(deep)).to.not.contain('Maximum call stack')
    expect(refusal(flow(5000))).to.match(/ yaml-depth$/)
    expect(refusal(block(1000))).to.equal(`202:${2 * 200 + 1} yaml-depth`)
  })
})
