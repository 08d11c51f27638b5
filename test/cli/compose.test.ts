import {expect} from 'chai'
import {appendFile, cp, mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {defaultPipeline, examples, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-compose-cli-')))
afterEach(async () => cleanup())

interface ResolveJson {
  pipeline: {name: string; steps: Array<{id: string; next?: string}>}
  sources: Record<string, {file: string; line: number}>
  files: string[]
}

describe('pipe pipeline resolve (CLI)', () => {
  it("prints the composed triage example with each step's file:line", async () => {
    const result = await pipe(['pipeline', 'resolve', 'examples/triage/pipeline.yaml'])
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stdout).to.contain('# composed from examples/triage/pipeline.yaml <- pipelines/default.yaml')
    expect(result.stdout).to.contain('  # pipelines/default.yaml:40\n  - id: ingest\n')
    expect(result.stdout).to.match(/ {2}# examples\/triage\/pipeline\.yaml:\d+\n {2}- id: check_plan\n/)
    expect(result.stdout).to.contain('    next: check_plan\n')
    expect(result.stdout).to.not.contain('generate_vv')
    expect(result.stdout).to.not.match(/^(extends|overlay):/m)
  })

  it('gives {pipeline, sources, files} with --json', async () => {
    const result = await pipe(['pipeline', 'resolve', 'examples/triage/pipeline.yaml', '--json'])
    expect(result.code, result.stderr).to.equal(0)
    const body = json<ResolveJson>(result)
    expect(body.pipeline.name).to.equal('triage')
    expect(body.pipeline.steps.map((s) => s.id)).to.deep.equal([
      'ingest',
      'compile',
      'validate_gates',
      'clarify_questions',
      'apply_answers',
      'plan_tasks',
      'check_plan',
      'triage',
      'manual_review',
      'publish',
    ])
    expect(body.sources.ingest).to.deep.equal({file: 'pipelines/default.yaml', line: 40})
    expect(body.sources.check_plan?.file).to.equal('examples/triage/pipeline.yaml')
    expect(body.sources.publish?.file).to.equal('examples/triage/pipeline.yaml')
    expect(body.files).to.deep.equal(['examples/triage/pipeline.yaml', 'pipelines/default.yaml'])
  })

  it('refuses an extends cycle, naming the chain, with exit 2', async () => {
    await writeFile(path.join(dir, 'a.yaml'), 'version: 1\nname: a\nextends: b.yaml\n')
    await writeFile(path.join(dir, 'b.yaml'), 'version: 1\nname: b\nextends: a.yaml\n')
    const result = await pipe(['pipeline', 'resolve', 'a.yaml'], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stderr).to.contain('b.yaml:3:10  extends  extends cycle: a.yaml -> b.yaml -> a.yaml')
    expect(result.stderr).to.match(/^Error \[E_CONFIG\]: a\.yaml does not compose into a pipeline/m)
    expect(result.stdout).to.equal('')
  })
})

describe('pipe validate on a pipeline that extends another (CLI)', () => {
  it('accepts the triage example', async () => {
    const result = await pipe(['validate', 'examples/triage/pipeline.yaml'])
    expect(result.code, result.stdout + result.stderr).to.equal(0)
    expect(result.stdout).to.equal('')
  })

  it('reports an error of the base in the base file and one of the overlay in the child', async () => {
    await writeFile(
      path.join(dir, 'base.yaml'),
      'version: 1\nname: base\nsteps:\n  - {id: a, kind: noop, next: b}\n  - {id: b, kind: noop, next: cc}\n  - {id: c, kind: noop}\n',
    )
    await writeFile(
      path.join(dir, 'child.yaml'),
      'version: 1\nname: child\nextends: base.yaml\noverlay:\n  - {insert_after: a, step: {id: n, kind: noop, next: bb}}\n',
    )
    const result = await pipe(['validate', 'child.yaml'], {cwd: dir})
    expect(result.code).to.equal(2)
    expect(result.stdout).to.contain('base.yaml:5:31  steps[1].next  unknown step "cc" in transition — did you mean "c"?')
    expect(result.stdout).to.contain('child.yaml:5:55  overlay[0].step.next  unknown step "bb" in transition — did you mean "b"?')
  })
})

describe('pipe run on a pipeline that extends the default pipeline (offline, built CLI)', () => {
  async function child(base: string): Promise<string> {
    const file = path.join(dir, 'app', 'pipeline.yaml')
    await mkdir(path.dirname(file), {recursive: true})
    const overlay = '  - {remove: generate_vv}\n  - {insert_after: plan_tasks, step: {id: note, kind: noop}}\n'
    await writeFile(file, `version: 1\nname: app\nextends: ${path.relative(path.dirname(file), base)}\noverlay:\n${overlay}`)
    return file
  }

  it("runs the composed steps, the base's prompts read from the base's directory", async () => {
    const file = await child(defaultPipeline)
    const result = await pipe(['run', file, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'], {cwd: dir})
    expect(result.code, result.stderr).to.equal(0)
    const body = json<{run_id: string; status: string}>(result)
    expect(body.status).to.equal('succeeded')
    const shown = await pipe(['snapshot', 'show', body.run_id, '--json'], {cwd: dir})
    expect(shown.code, shown.stderr).to.equal(0)
    expect(json<Snapshot[]>(shown).map((s) => s.step.name)).to.deep.equal([
      'ingest',
      'compile',
      'validate_gates',
      'plan_tasks',
      'note',
      'manual_review',
      'publish',
    ])
  })

  it('refuses to resume a run after its base pipeline changed', async () => {
    const lib = path.join(dir, 'lib')
    await cp(path.join(repoRoot, 'pipelines'), lib, {recursive: true})
    const file = await child(path.join(lib, 'default.yaml'))
    const started = await pipe(['run', file, '--input', path.join(examples, 'full-prd.md'), '--json'], {cwd: dir})
    const body = json<{run_id: string; status: string}>(started)
    expect(body.status, started.stderr).to.equal('awaiting_input')
    await appendFile(path.join(lib, 'default.yaml'), '# changed\n')
    const resumed = await pipe(['resume', body.run_id, '--decision', 'go'], {cwd: dir})
    expect(resumed.code).to.equal(4)
    expect(resumed.stderr).to.contain('Error [E_CONFLICT]').and.contain('changed since run')
  })
})
