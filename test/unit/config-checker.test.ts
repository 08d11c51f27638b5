/**
 * The expression checker is a value the config functions are given, not module state set by
 * whichever loader ran first: called directly, in a process that never loaded a pipeline, they
 * check as loadPipeline does. (They used to throw "internal: the expression checker was not
 * loaded" unless loadPipeline or loadExpressionChecker had run before in the same process.)
 */
import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pathToFileURL} from 'node:url'
import {promisify} from 'node:util'
import {loadPipeline} from '../../src/config/pipeline.js'
import {kindCatalog} from '../../src/steps/registry.js'
import {tempDir} from '../helpers/cli.js'

const run = promisify(execFile)
const src = (file: string): string => JSON.stringify(pathToFileURL(path.resolve('src', file)).href)

const MAIN = `version: 1
name: t
inputs:
  who: {type: string, default: ada}
  n: {type: integer, default: 3}
steps:
  - {id: a, kind: noop, description: "hello \${{ inputs.whom }}", next: b}
  - {id: b, kind: pipeline, file: ./child.yaml, with: {flag: "\${{ inputs.n }}"}}
`
const CHILD = 'version: 1\nname: c\ninputs:\n  flag: {type: boolean, required: true}\nsteps:\n  - {id: only, kind: noop}\n'

// Run in a process of its own: nothing there has loaded a pipeline or the checker before these calls.
const SCRIPT = `
import {readYamlFile} from ${src('config/yaml-source.ts')}
import {checkExpressions, withTypeProblems} from ${src('config/expressions.ts')}
import {ExprChecker} from ${src('expr/check.ts')}
import {kindCatalog} from ${src('steps/registry.ts')}
const file = process.argv[2]
const read = await readYamlFile(file)
if (!read.ok) throw new Error('unreadable')
const loaded = {file, dir: process.argv[3], pipeline: read.source.data, source: read.source, hash: ''}
const expression = checkExpressions(loaded, kindCatalog, ExprChecker).map((d) => [d.line, d.col, d.message])
const step = loaded.pipeline.steps[1]
const withTypes = withTypeProblems(loaded, kindCatalog, ExprChecker, 1, 'with', step.with, {flag: {type: 'boolean'}})
process.stdout.write(JSON.stringify({expression, withTypes}))
`

describe('config: the expression checker is passed in', () => {
  let dir: string
  let cleanup: () => Promise<void>
  before(async () => ({dir, cleanup} = await tempDir('pipe-checker-')))
  after(async () => cleanup())

  it('checks expressions and with: types called directly in a fresh process, as loadPipeline reports them', async () => {
    const main = path.join(dir, 'main.yaml')
    await writeFile(main, MAIN)
    await writeFile(path.join(dir, 'child.yaml'), CHILD)
    const script = path.join(dir, 'direct.mts')
    await writeFile(script, SCRIPT)

    const {stdout} = await run(process.execPath, ['--import', 'tsx', script, main, dir], {cwd: process.cwd()})
    const direct = JSON.parse(stdout) as {expression: Array<[number, number, string]>; withTypes: Array<{key: string; message: string}>}

    const loaded = await loadPipeline(main, kindCatalog)
    expect(loaded.ok).to.equal(false)
    const diagnostics = loaded.ok ? [] : loaded.diagnostics
    const byRule = (rule: string) => diagnostics.filter((d) => d.rule === rule)
    expect(direct.expression).to.have.length(1)
    expect(direct.expression).to.deep.equal(byRule('expression').map((d) => [d.line, d.col, d.message]))
    expect(direct.expression[0]![2]).to.match(/unknown input "whom"/)
    expect(direct.withTypes).to.deep.equal([{key: 'flag', message: 'is a boolean, but ${{ inputs.n }} gives int'}])
    // The loader checks a child's with: only once the pipeline's own rules hold: the same step in a pipeline without the misspelling.
    const typed = path.join(dir, 'typed.yaml')
    await writeFile(typed, MAIN.replace('inputs.whom', 'inputs.who'))
    const viaLoader = await loadPipeline(typed, kindCatalog)
    expect(viaLoader.ok ? [] : viaLoader.diagnostics.map((d) => [d.rule, d.line, d.message])).to.deep.equal([
      ['child-pipeline', 8, `input "flag" of the pipeline ./child.yaml ${direct.withTypes[0]!.message}`],
    ])
  })
})
