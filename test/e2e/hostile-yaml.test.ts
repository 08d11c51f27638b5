/**
 * YAML with very many keys is answered in seconds: parsing stays linear (the yaml package's
 * duplicate-key check compared each key with every earlier one), a document of more nodes than
 * any hand-written file holds is refused, and duplicate keys are still reported at line:col.
 * The test timeout is a backstop against a quadratic parse; nothing here measures time.
 */
import {expect} from 'chai'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-hostile-yaml-')))
afterEach(async () => cleanup())

/** `count` lines of `line(i)`, written once as one string (a 200k-key file is ~2.5 MB). */
function many(count: number, line: (i: number) => string): string {
  const parts: string[] = []
  for (let i = 0; i < count; i++) parts.push(line(i))
  return parts.join('')
}

async function storeState(): Promise<Record<string, string>> {
  const root = path.join(dir, '.pipe')
  const out: Record<string, string> = {}
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, {withFileTypes: true})) {
      const full = path.join(at, entry.name)
      if (entry.isDirectory()) await walk(full)
      else out[path.relative(root, full)] = await readFile(full, 'utf8')
    }
  }
  await walk(root)
  return out
}

describe('YAML with very many keys', function () {
  // A backstop, not a measure: a parse that compared each key with every earlier one would take
  // hours over 200,000 or 64,000 keys; a linear one took over a minute on a loaded CI machine.
  this.timeout(600000)

  it('refuses an answers file of 200,000 keys with a clear error and leaves the paused run as it was', async () => {
    const paused = json<{run_id: string; status: string}>(
      await pipe(['run', defaultPipeline, '--input', path.join(examples, 'one-sentence.txt'), '--json'], {cwd: dir}),
    )
    expect(paused.status).to.equal('awaiting_input')
    const before = await storeState()
    const file = path.join(dir, 'answers.yaml')
    await writeFile(file, `answers:\n${many(200_000, (i) => `  k${i}: v\n`)}`)

    const result = await pipe(['answer', paused.run_id, '--file', file], {cwd: dir, env: {PIPE_INTERACTIVE: '0'}})
    expect(result.signal, result.stderr).to.equal(null)
    expect(result.code, result.stderr).to.equal(2)
    expect(result.stderr).to.contain('answers.yaml:50001:11  (root)  refused: the document holds more than 100000 YAML nodes')
    expect(await storeState()).to.deep.equal(before)
  })

  it('refuses a pipeline of 64,000 input keys at the node past the bound', async () => {
    const file = path.join(dir, 'big.yaml')
    await writeFile(
      file,
      `version: 1\nname: big\ninputs:\n${many(64_000, (i) => `  i${i}: {type: string}\n`)}steps:\n  - {id: e, kind: end, status: succeeded, reason: ok}\n`,
    )

    const result = await pipe(['validate', file, '--json'], {cwd: dir})
    expect(result.signal, result.stderr).to.equal(null)
    expect(result.code, result.stderr).to.equal(2)
    const report = json<{files: Array<{diagnostics: Array<{line: number; col: number; rule: string; message: string}>}>}>(result)
    expect(report.files[0]!.diagnostics.map((e) => `${e.line}:${e.col} ${e.rule}`)).to.deep.equal(['25002:18 yaml-size'])
  })

  it('validates a 20,000-key mapping under the bound, and reports a key repeated at its end at line:col', async () => {
    const inputs = many(20_000, (i) => `  i${i}: {type: string}\n`)
    const steps = 'steps:\n  - {id: e, kind: end, status: succeeded, reason: ok}\n'
    const good = path.join(dir, 'good.yaml')
    await writeFile(good, `version: 1\nname: big\ninputs:\n${inputs}${steps}`)
    const ok = await pipe(['validate', good], {cwd: dir})
    expect(ok.code, ok.stderr).to.equal(0)

    const dup = path.join(dir, 'dup.yaml')
    await writeFile(dup, `version: 1\nname: big\ninputs:\n${inputs}  i7: {type: string}\n  i19999: {type: integer}\n${steps}`)
    const bad = await pipe(['validate', dup], {cwd: dir})
    expect(bad.code, bad.stderr).to.equal(2)
    expect(bad.stdout).to.contain('dup.yaml:20004:3  (root)  duplicate key "i7" (keys of a mapping must be unique)')
    expect(bad.stdout).to.contain('dup.yaml:20005:3  (root)  duplicate key "i19999" (keys of a mapping must be unique)')
  })
})
