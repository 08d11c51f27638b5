/**
 * A command's output longer than max_output_bytes is kept as its head and its tail. A secret the cut
 * falls inside must not leave its first or last part in the sealed snapshot: each half is redacted
 * with the bytes beyond its cut in view.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pipe, tempDir} from '../helpers/cli.js'

const CANARY = 'f3a9c1e7b5d2048a6c9e1f3b7d5a2c4e'
const LIMIT = 1000

// 484 bytes, then the secret across the head's end (500); 3000 bytes, then the secret across the tail's start (500 bytes before the end).
const PRINT = "const s = process.argv[1]; process.stdout.write('x'.repeat(484) + s + 'y'.repeat(3000) + s + 'z'.repeat(484))"

const PIPELINE = `version: 1
name: cut
secrets: [CUT_SECRET]
steps:
  - id: print
    kind: command
    run: [node, -e, "${PRINT}", "\${{ secrets.CUT_SECRET }}"]
`

describe('a secret across the cut of a long output is redacted whole', function () {
  this.timeout(60000)
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-output-cut-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
  })
  afterEach(async () => cleanup())

  it('leaves no 8 characters of it in the store', async () => {
    await writeFile(path.join(dir, 'p.yaml'), PIPELINE)
    await writeFile(path.join(dir, 'policy.yaml'), `version: 1\nallowed_commands:\n  - [node, -e, "..."]\nresource_limits: {max_output_bytes: ${LIMIT}}\n`)
    const run = await pipe(['run', 'p.yaml', '--text', 'x'], {cwd: dir, env: {CUT_SECRET: CANARY, PIPE_HOME: path.join(dir, 'home')}})
    expect(run.code, run.stderr).to.equal(0)
    const files = (await readdir(path.join(dir, '.pipe'), {recursive: true, withFileTypes: true})).filter((e) => e.isFile())
    const store = (await Promise.all(files.map((e) => readFile(path.join(e.parentPath, e.name), 'utf8')))).join('\n')
    expect(store, 'the output was cut').to.contain('xxxxxxxx').and.contain('zzzzzzzz').and.contain('omitted_bytes')
    const pieces = Array.from({length: CANARY.length - 7}, (_, i) => CANARY.slice(i, i + 8))
    expect(pieces.filter((piece) => store.includes(piece))).to.deep.equal([])
  })
})
