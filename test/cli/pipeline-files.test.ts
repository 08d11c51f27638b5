/**
 * Files a pipeline names stay inside its tree: pipe validate refuses the rest at file:line:col, and steps refuse them again.
 *
 * The first `validate` and the `run` are `pipe` processes; the further validates run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {mkdir, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {loadPipeline} from '../../src/config/pipeline.js'
import {PipeError} from '../../src/errors.js'
import {edit} from '../../src/steps/edit.js'
import {promptOf} from '../../src/steps/model-support.js'
import {kindCatalog} from '../../src/steps/registry.js'
import type {StepContext} from '../../src/steps/types.js'
import {pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let cleanup: () => Promise<void>
let tree: string
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-files-'))
  tree = path.join(dir, 'team', 'pipelines')
  await mkdir(path.join(tree, 'prompts'), {recursive: true})
  await writeFile(path.join(tree, 'prompts', 'compile.md'), 'Compile this: {{input}}\n')
  await writeFile(path.join(dir, 'secret.md'), 'the secret {{input}}\n')
  await writeFile(path.join(dir, 'secret.blocks'), 'a.txt\n<<<<<<< SEARCH\n=======\npwned\n>>>>>>> REPLACE\n')
})
afterEach(async () => cleanup())

/** A pipeline whose compile step names `prompt` on line 6, column 13. */
async function pipelineNaming(prompt: string): Promise<string> {
  const file = path.join(tree, 'p.yaml')
  await writeFile(file, `version: 1\nname: p\nsteps:\n  - id: compile\n    kind: compile\n    prompt: ${JSON.stringify(prompt)}\n`)
  return file
}

describe('pipe validate: files a pipeline names stay inside its directory', function () {
  this.timeout(60000)

  const cases: Array<[string, () => string, RegExp]> = [
    ['a path that climbs out', () => '../../../etc/passwd', /leaves the pipeline's directory/],
    ['an absolute path', () => '/etc/passwd', /is an absolute path/],
    ['an absolute path inside the tree', () => path.join(tree, 'prompts', 'compile.md'), /is an absolute path/],
    ['a climb that stays out of sight', () => 'prompts/../../../secret.md', /leaves the pipeline's directory/],
  ]
  for (const [index, [what, prompt, message]] of cases.entries()) {
    it(`refuses ${what} at file:line:col`, async () => {
      const file = await pipelineNaming(prompt())
      // The first case from a process, the others in this process.
      const result = await (index === 0 ? pipe : pipeHere)(['validate', file])
      expect(result.code, result.stderr).to.equal(2)
      expect(result.stdout).to.contain(`${file}:6:13`)
      expect(result.stdout).to.match(message)
      expect(result.stdout).to.not.contain('root:')
    })
  }

  it('refuses a prompt that is a symlink pointing outside, and one reached through a symlinked directory', async () => {
    await symlink(path.join(dir, 'secret.md'), path.join(tree, 'prompts', 'link.md'))
    await symlink(dir, path.join(tree, 'up'))
    for (const prompt of ['prompts/link.md', 'up/secret.md']) {
      const file = await pipelineNaming(prompt)
      const result = await pipeHere(['validate', file, '--json'])
      expect(result.code, result.stderr).to.equal(2)
      const body = JSON.parse(result.stdout) as {files: Array<{diagnostics: Array<{line: number; col: number; message: string; rule: string}>}>}
      const found = body.files[0]!.diagnostics.find((d) => d.rule === 'file-outside-pipeline')
      expect(found, prompt).to.include({line: 6, col: 13})
      expect(found!.message).to.contain('resolves through a symlink to').and.contain(path.join(dir, 'secret.md'))
    }
  })

  it('accepts a symlink that stays inside the tree', async () => {
    await symlink(path.join(tree, 'prompts', 'compile.md'), path.join(tree, 'prompts', 'alias.md'))
    const result = await pipeHere(['validate', await pipelineNaming('prompts/alias.md')])
    expect(result.code, result.stdout + result.stderr).to.equal(0)
  })

  it('refuses an edit step whose blocks_file leaves the tree', async () => {
    const file = path.join(tree, 'e.yaml')
    await writeFile(file, 'version: 1\nname: e\nsteps:\n  - id: e\n    kind: edit\n    blocks_file: ../../secret.blocks\n')
    const result = await pipeHere(['validate', file])
    expect(result.code).to.equal(2)
    expect(result.stdout).to.contain(`${file}:6:18`).and.contain('blocks_file "../../secret.blocks" leaves the pipeline\'s directory')
  })

  it('refuses to run such a pipeline at all', async () => {
    const file = await pipelineNaming('../../secret.md')
    const result = await pipe(['run', file, '--text', 'Users must be able to export invoices.', '--store', path.join(dir, 'store')], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('E_CONFIG').and.contain("leaves the pipeline's directory")
  })
})

describe('steps refuse files outside the pipeline too (a symlink made after validation)', () => {
  it('promptOf and the edit step refuse a path out of the tree', async () => {
    const file = await pipelineNaming('prompts/compile.md')
    const loaded = await loadPipeline(file, kindCatalog)
    expect(loaded.ok).to.equal(true)
    if (!loaded.ok) return
    await symlink(path.join(dir, 'secret.md'), path.join(tree, 'prompts', 'late.md'))
    const context = {step: {id: 'compile', kind: 'compile', prompt: 'prompts/late.md'}, pipeline: loaded.loaded} as unknown as StepContext
    const error = await promptOf(context).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).to.be.instanceOf(PipeError)
    expect((error as PipeError).message).to.contain('resolves through a symlink')
    const editContext = {step: {id: 'e', kind: 'edit', blocks_file: '../../secret.blocks'}, pipeline: loaded.loaded, cwd: dir} as unknown as Parameters<
      typeof edit.run
    >[0]
    const editError = await edit.run(editContext).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(editError).to.be.instanceOf(PipeError)
    expect((editError as PipeError).message).to.contain("leaves the pipeline's directory")
  })
})
