/** What a failing QA tells the agent that fixes it (seed 004 §7.3): the lines that matter, the files to read, stable across machines. */
import {expect} from 'chai'
import {mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {filesNamed, relevantLines, stableOutput} from '../../src/steps/qa.js'
import {coerce, resolveInputs} from '../../src/expr/inputs.js'

describe('qa verdict: log lines, files to read, stable output', () => {
  let root: string
  before(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'pipe-qa-'))
    await mkdir(path.join(root, 'src'))
    await mkdir(path.join(root, 'node_modules', 'x'), {recursive: true})
    await writeFile(path.join(root, 'src', 'median.js'), '')
    await writeFile(path.join(root, 'median.test.js'), '')
    await writeFile(path.join(root, 'node_modules', 'x', 'index.js'), '')
  })
  after(() => rm(root, {recursive: true, force: true}))

  it('keeps flagged lines with their context, at most 50, and fills up to 20 from the end', () => {
    const noise = Array.from({length: 200}, (_, i) => `line ${i}`)
    const out = relevantLines([...noise.slice(0, 100), 'AssertionError: 2 !== 9', ...noise.slice(100)].join('\n'))
    expect(out).to.include('AssertionError: 2 !== 9')
    expect(out.slice(0, 6)).to.deep.equal(['line 98', 'line 99', 'AssertionError: 2 !== 9', 'line 100', 'line 101', 'line 102'])
    expect(out).to.have.length(20)
    expect(out.at(-1)).to.equal('line 199')
    const failing = relevantLines(Array.from({length: 300}, (_, i) => `not ok ${i}`).join('\n'))
    expect(failing).to.have.length(50)
    expect(relevantLines('a\nb\n')).to.deep.equal(['a', 'b'])
  })

  it('names the repository files the output mentions, in order, relative, existing, outside node_modules', () => {
    const output = [
      `at TestContext.<anonymous> (file://${root}/median.test.js:14:10)`,
      `  location: '${root}/src/median.js:3:1'`,
      'src/median.js:4 again',
      `at ${root}/node_modules/x/index.js:1:1`,
      'missing.js:3:1 and /etc/passwd and ../outside.js',
    ].join('\n')
    expect(filesNamed(output, root)).to.deep.equal(['median.test.js', 'src/median.js'])
  })

  it('drops the workspace path, masks timings and leaves out frames inside Node', () => {
    const output = [
      'not ok 3 - numbers sort as numbers',
      '  duration_ms: 1.0523',
      `  location: '${root}/median.test.js:13:1'`,
      `    TestContext.<anonymous> (file://${root}/median.test.js:14:10)`,
      '    Test.runInAsyncScope (node:async_hooks:206:9)',
      '    at Test.run (node:internal/test_runner/test:631:25)',
      '✖ odd count (0.8123ms)',
      '# duration_ms 52.91',
    ].join('\n')
    expect(stableOutput(output, root).split('\n')).to.deep.equal([
      'not ok 3 - numbers sort as numbers',
      '  duration_ms: …',
      "  location: 'median.test.js:13:1'",
      '    TestContext.<anonymous> (median.test.js:14:10)',
      '✖ odd count (… ms)',
      '# duration_ms …',
    ])
  })
})

describe('inputs of type object and array (a child pipeline receives a task)', () => {
  it('converts JSON from the command line and checks typed values', () => {
    expect(coerce('{"id": "T1"}', 'object')).to.deep.equal({value: {id: 'T1'}})
    expect(coerce('[["node", "--test"]]', 'array')).to.deep.equal({value: [['node', '--test']]})
    expect(coerce('[1]', 'object').problem).to.equal('is not a mapping (it is a list)')
    expect(coerce('{', 'array').problem).to.equal('expected a JSON list')
    const resolved = resolveInputs(
      {task: {type: 'object', required: true}, cmds: {type: 'array', default: []}},
      {file: {name: 'with:', data: {task: {id: 'T1', acceptance_tests: {}}}}},
    )
    expect(resolved.problems).to.deep.equal([])
    expect(resolved.values).to.deep.equal({task: {id: 'T1', acceptance_tests: {}}, cmds: []})
    const wrong = resolveInputs({task: {type: 'object', required: true}}, {file: {name: 'with:', data: {task: 'T1'}}})
    expect(wrong.problems.map((p) => p.message)).to.deep.equal(['with:: task: "T1" is not a mapping (it is a string)'])
  })
})
