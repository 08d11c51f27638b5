/**
 * pipe init through the built CLI: the scaffold validates, dry-runs and runs offline as written,
 * runs through the model step against a real HTTP model server, and never overwrites a file
 * unless told to.
 *
 * Each behaviour is seen from a real `pipe` process once (init and its output, the run against the
 * model server, each refusal's first case, the first template through init, validate and pipe
 * test); the commands around it and the other templates run in this process
 * (test/helpers/pipe-here.ts: the CLI's path from argv, its output and exit code).
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir, readFile, writeFile, mkdir} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {ModelServer} from '../helpers/model-server.js'

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer | undefined
beforeEach(async () => ({dir, cleanup} = await tempDir('pipe-init-cli-')))
afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup()
})

const FILES = [
  'pipeline.yaml',
  'README.md',
  'cassettes/classify.jsonl',
  'pipeline.pipe-test.yaml',
  'policy.yaml',
  'prompts/classify.md',
  'schemas/classify.schema.json',
]

describe('pipe init (CLI)', function () {
  this.timeout(120000)

  it('scaffolds a pipeline that validates, dry-runs and runs end to end offline', async () => {
    const env = {PIPE_HOME: path.join(dir, 'home')}
    const init = await pipe(['init', 'triage', '--json'], {cwd: dir, env})
    expect(init.code, init.stderr).to.equal(0)
    const out = json<{dir: string; name: string; files: string[]; overwritten: string[]}>(init)
    expect(out.files).to.deep.equal(FILES)
    expect(out.name).to.equal('triage')
    expect(out.overwritten).to.deep.equal([])
    const project = path.join(dir, 'triage')
    for (const file of FILES) expect(existsSync(path.join(project, file)), file).to.equal(true)
    const text = await readFile(path.join(project, 'pipeline.yaml'), 'utf8')
    const modeline = /^# yaml-language-server: \$schema=(.+)$/m.exec(text)
    expect(modeline, 'modeline').to.not.equal(null)
    expect(path.resolve(project, modeline![1]!)).to.equal(path.join(repoRoot, 'schemas', 'pipeline.schema.json'))
    expect(text).to.include('kind: model').and.include('kind: choice').and.include('kind: end').and.include('inputs:')
    expect(await readFile(path.join(project, 'prompts', 'classify.md'), 'utf8')).to.include('{{title}}')

    // The scaffold is checked in this process; the --template matrix below has its processes.
    const valid = await pipeHere(['validate', 'pipeline.yaml', '--json'], {cwd: project, env})
    expect(valid.code, valid.stderr + valid.stdout).to.equal(0)

    const dry = await pipeHere(['run', 'pipeline.yaml', '--dry-run', '-i', 'title=Login fails', '--json'], {cwd: project, env})
    expect(dry.code, dry.stderr).to.equal(0)
    const plan = json<{steps: Array<{id: string}>; warnings: unknown[]; inputs: Record<string, unknown>}>(dry)
    expect(plan.steps.map((s) => s.id)).to.deep.equal(['classify', 'route', 'offline', 'urgent', 'answered', 'triaged'])
    expect(plan.inputs).to.deep.equal({title: 'Login fails', body: '', severity: 'medium', use_model: false})
    // The model step is skipped with these inputs, so the offline provider is no problem.
    expect(plan.warnings).to.deep.equal([])

    const run = await pipeHere(['run', 'pipeline.yaml', '-i', 'title=Login fails', '--store', '.pipe', '--json'], {cwd: project, env})
    expect(run.code, run.stderr).to.equal(0)
    const result = json<{status: string; run_id: string}>(run)
    expect(result.status).to.equal('succeeded')
    const snaps = json<Array<{step: {name: string}; decisions: Array<{decision: string}>}>>(
      await pipeHere(['snapshot', 'show', result.run_id, '--store', '.pipe', '--json'], {cwd: project, env}),
    )
    expect(snaps.map((s) => [s.step.name, s.decisions[0]?.decision])).to.deep.equal([
      ['classify', 'skipped'],
      ['route', 'offline'],
      ['offline', 'succeeded'],
    ])
  })

  it('runs the model step against an OpenAI-compatible server and routes on its reply', async () => {
    server = await ModelServer.start()
    server.script('classify', {content: JSON.stringify({label: 'bug', summary: 'Login returns 500 for SSO users.', confidence: 0.9})})
    const env = {PIPE_HOME: path.join(dir, 'home'), OPENAI_BASE_URL: server.url}
    expect((await pipeHere(['init', '--name', 'issue-triage'], {cwd: dir, env})).code).to.equal(0)
    // The run that asks the server is a process.
    const run = await pipe(['run', 'pipeline.yaml', '-i', 'title=Login fails', '-i', 'severity=high', '-i', 'use_model=true', '--store', '.pipe', '--json'], {
      cwd: dir,
      env,
    })
    const result = json<{status: string; pipeline: unknown; error?: {message: string}}>(run)
    expect(result.status, run.stderr).to.equal('blocked')
    expect(result.error?.message).to.equal('urgent bug: Login returns 500 for SSO users.')
    expect(server.count('classify')).to.equal(1)
    expect(server.requests[0]!.body.messages[1]!.content).to.include('Title: Login fails').and.include('severity high')
    expect(await readFile(path.join(dir, 'pipeline.yaml'), 'utf8')).to.include('name: issue-triage')
  })

  it('prints its next steps one per line', async () => {
    const init = await pipe(['init', 'triage'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    expect(init.code, init.stderr).to.equal(0)
    expect(init.stdout).to.contain('Next:\n  cd triage\n  pipe validate pipeline.yaml\n  pipe test\n')
    expect(init.stdout).to.not.contain('\\n')
  })

  it('refuses to overwrite existing files, listing them (E_CONFLICT), and overwrites them with --force', async () => {
    await mkdir(path.join(dir, 'prompts'))
    await writeFile(path.join(dir, 'pipeline.yaml'), 'mine\n')
    await writeFile(path.join(dir, 'prompts', 'classify.md'), 'mine too\n')
    const refused = await pipe(['init', dir], {cwd: dir})
    expect(refused.code).to.not.equal(0)
    expect(refused.stderr).to.include('Error [E_CONFLICT]').and.include('pipeline.yaml, prompts/classify.md').and.include('--force')
    expect(await readFile(path.join(dir, 'pipeline.yaml'), 'utf8')).to.equal('mine\n')
    expect(existsSync(path.join(dir, 'README.md')), 'nothing written on refusal').to.equal(false)

    const forced = await pipeHere(['init', dir, '--force', '--json'], {cwd: dir})
    expect(forced.code, forced.stderr).to.equal(0)
    expect(json<{overwritten: string[]}>(forced).overwritten).to.deep.equal(['pipeline.yaml', 'prompts/classify.md'])
    expect(await readFile(path.join(dir, 'pipeline.yaml'), 'utf8')).to.include('kind: model')
  })

  it('a file where a folder must go, or a folder where a file must go, is E_CONFLICT before anything is written, --force or not', async () => {
    await writeFile(path.join(dir, 'taken'), 'a file\n')
    await mkdir(path.join(dir, 'agent'))
    await writeFile(path.join(dir, 'agent', 'prompts'), 'a file\n')
    await mkdir(path.join(dir, 'agent', 'pipeline.pipe-test.yaml'))
    const cases: Array<[string[], string[]]> = [
      [['init', 'taken', '--template', 'agent'], ['taken is a file, where a folder must go']],
      [
        ['init', 'agent', '--template', 'agent', '--force'],
        ['agent/prompts is a file, where a folder must go', 'agent/pipeline.pipe-test.yaml is a folder, where the file pipeline.pipe-test.yaml must go'],
      ],
    ]
    for (const [index, [args, what]] of cases.entries()) {
      // The first from a process, the second in this process.
      const refused = await (index === 0 ? pipe : pipeHere)(args, {cwd: dir})
      expect(refused.code, refused.stderr).to.equal(4)
      expect(refused.stderr).to.include('Error [E_CONFLICT]').and.include('nothing was written')
      for (const w of what) expect(refused.stderr).to.include(w)
    }
    expect((await readdir(path.join(dir, 'agent'))).sort()).to.deep.equal(['pipeline.pipe-test.yaml', 'prompts'])
  })

  for (const template of ['model', 'command', 'foreach', 'agent', 'coding']) {
    it(`--template ${template}: its files validate (policy and test file too, no warning) and its pipe test file passes offline, wherever it is made`, async () => {
      const env = {PIPE_HOME: path.join(dir, 'home'), OPENAI_API_KEY: undefined, OPENAI_BASE_URL: undefined}
      // The first template's commands are processes, the others' run in this process.
      const cli = template === 'model' ? pipe : pipeHere
      const init = await cli(['init', `my-${template}`, '--template', template, '--json'], {cwd: dir, env})
      expect(init.code, init.stderr).to.equal(0)
      const project = path.join(dir, `my-${template}`)
      const files = json<{files: string[]}>(init).files
      expect(files[0]).to.equal('pipeline.yaml')
      expect(files).to.include.members(['policy.yaml', 'pipeline.pipe-test.yaml', 'README.md'])
      for (const file of files) expect(await readFile(path.join(project, file), 'utf8'), file).to.not.contain('{{pipe:')
      const yamls = files.filter((f) => f.endsWith('.yaml'))
      const validate = await cli(['validate', ...yamls], {cwd: project, env})
      expect(validate.code, validate.stdout + validate.stderr).to.equal(0)
      expect(validate.stdout).to.not.contain('warning')
      const tested = await cli(['test', '--json'], {cwd: project, env})
      expect(tested.code, tested.stdout + tested.stderr).to.equal(0)
      const report = json<{passed: number; failed: number}>(tested)
      expect(report.failed).to.equal(0)
      expect(report.passed).to.be.greaterThan(1)
    })
  }

  it('refuses a template there is not, naming those there are, writing nothing', async () => {
    const refused = await pipe(['init', 'sub', '--template', 'nope'], {cwd: dir})
    expect(refused.code).to.equal(2)
    expect(refused.stderr).to.include('nope').and.include('model').and.include('foreach')
    expect(existsSync(path.join(dir, 'sub'))).to.equal(false)
  })

  it('refuses a name the pipeline schema would reject, writing nothing', async () => {
    // A refusal of init's arguments, as a process says it.
    const refused = await pipe(['init', 'sub', '--name', 'my pipeline'], {cwd: dir})
    expect(refused.code).to.equal(2)
    expect(refused.stderr).to.include('Error [E_INVALID_ARGS]').and.include('"my pipeline"')
    expect(existsSync(path.join(dir, 'sub'))).to.equal(false)
  })
})
