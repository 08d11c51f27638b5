import {expect} from 'chai'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

// One `pipe` process per behaviour: validate's report and its refusal with the error channel, a flag
// the command lacks, graph and its refusal, an unknown command, --help. Their variants (--json, other
// files and formats) run in this process (test/helpers/pipe-here.ts: the same command from argv, its
// output and exit code).

let dir: string
let cleanup: () => Promise<void>
before(async () => ({dir, cleanup} = await tempDir('pipe-cli-')))
after(async () => cleanup())

describe('pipe validate (CLI)', () => {
  it('exits 0 on the shipped pipeline, policy and example answers', async () => {
    const result = await pipe(['validate', 'pipelines/default.yaml', 'policy.yaml', 'examples/one-sentence.answers.yaml'])
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stdout).to.equal('')
    expect(result.stderr).to.contain('ok  pipelines/default.yaml (pipeline)').and.contain('ok  policy.yaml (policy)').and.contain('(answers)')
  })

  it('accepts every YAML file the project ships', async () => {
    const files = [
      'pipelines/default.yaml',
      'policy.yaml',
      'examples/one-sentence.answers.yaml',
      'examples/coding/pipeline.yaml',
      'examples/coding/policy.yaml',
      'examples/triage/pipeline.yaml',
      'examples/release-notes/pipeline.yaml',
      'examples/release-notes/item.yaml',
      'examples/release-notes/publish.yaml',
      'examples/release-notes/policy.yaml',
    ]
    const result = await pipeHere(['validate', ...files, '--json'])
    expect(result.code, result.stdout).to.equal(0)
    expect(json<{files: Array<{kind: string}>}>(result).files.map((f) => f.kind)).to.deep.equal([
      'pipeline',
      'policy',
      'answers',
      'pipeline',
      'policy',
      'pipeline',
      'pipeline',
      'pipeline',
      'pipeline',
      'policy',
    ])
  })

  it('reports a misspelt transition target at its line with a suggestion, and exits 2', async () => {
    const file = path.join(dir, 'typo.yaml')
    await writeFile(file, 'version: 1\nname: typo\nsteps:\n  - id: ingest\n    kind: noop\n    next: compil\n  - id: compile\n    kind: noop\n')
    const result = await pipe(['validate', file])
    expect(result.code).to.equal(2)
    expect(result.stdout).to.contain(`${file}:6:11  steps[0].next  unknown step "compil" in transition — did you mean "compile"?`)
    expect(result.stderr).to.match(/^Error \[E_CONFIG\]: 1 error\(s\) in 1 file\(s\)$/m)
    expect(result.stderr).to.match(/^Try this: /m)
    expect(result.stderr).to.match(/^Log: .*orchestrator-\d{8}\.log$/m)
  })

  it('gives errors as data with --json and keeps stdout to one document', async () => {
    const bad = path.join(dir, 'bad.yaml')
    await writeFile(bad, 'version: 1\nname: x\nsteps:\n  - id: a\n    kind: noop\n    colour: red\n')
    const result = await pipeHere(['validate', defaultPipeline, bad, '--json'])
    expect(result.code).to.equal(2)
    const body = json<{
      valid: boolean
      error_count: number
      files: Array<{file: string; valid: boolean; diagnostics: Array<{line: number; col: number; path: string; message: string}>}>
    }>(result)
    expect(body.valid).to.equal(false)
    expect(body.error_count).to.equal(1)
    expect(body.files[0]!.valid).to.equal(true)
    expect(body.files[1]!.diagnostics).to.deep.equal([
      {file: bad, line: 6, col: 5, path: 'steps[0].colour', message: 'unknown key "colour" in steps[0]', rule: 'schema'},
    ])
  })

  it('exits 0 with --json on valid files and prints the report', async () => {
    const result = await pipeHere(['validate', defaultPipeline, '--json'])
    expect(result.code).to.equal(0)
    expect(json<{valid: boolean}>(result).valid).to.equal(true)
  })

  it('tells a missing file apart from an invalid one', async () => {
    const result = await pipeHere(['validate', path.join(dir, 'nope.yaml')])
    expect(result.code).to.equal(2)
    expect(result.stdout).to.contain('nope.yaml:1:1  (root)  file not found')
  })

  it('checks a policy file against the policy schema', async () => {
    const file = path.join(dir, 'policy.yaml')
    await writeFile(
      file,
      'version: 1\nallowed_commands: [[npm, test]]\nforbidden_paths: [../outside]\nmax_patch_lines: 10\nmax_retries_default: 3\nresource_limits: {command_timout_ms: 5}\n',
    )
    const result = await pipeHere(['validate', file])
    expect(result.code).to.equal(2)
    expect(result.stdout).to.contain(
      `${file}:6:19  resource_limits.command_timout_ms  unknown key "command_timout_ms" in resource_limits — did you mean "command_timeout_ms"?`,
    )
  })

  it('rejects an unknown flag with a usage error', async () => {
    const result = await pipe(['validate', defaultPipeline, '--strictest'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.match(/^Error \[E_INVALID_ARGS\]: /m)
  })
})

describe('pipe graph (CLI)', () => {
  it('draws the default pipeline as a Mermaid flowchart with all nine steps and the loop', async () => {
    const result = await pipe(['graph', 'pipelines/default.yaml', '--format', 'mermaid'])
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stdout).to.match(/^flowchart TD\n/)
    for (const step of ['ingest', 'compile', 'validate_gates', 'clarify_questions', 'apply_answers', 'plan_tasks', 'generate_vv', 'manual_review', 'publish']) {
      expect(result.stdout).to.match(new RegExp(`^  ${step}[[{/]`, 'm'))
    }
    expect(result.stdout).to.contain('validate_gates -->|"fail"| clarify_questions')
    expect(result.stdout).to.contain('validate_gates -->|"pass"| plan_tasks')
    expect(result.stdout).to.contain('apply_answers --> compile')
    expect(result.stdout).to.contain('max 3 iterations')
  })

  it('draws Graphviz dot with labelled edges', async () => {
    const result = await pipeHere(['graph', 'pipelines/default.yaml', '--format', 'dot'])
    expect(result.code).to.equal(0)
    expect(result.stdout).to.match(/^digraph "default" \{/)
    expect(result.stdout).to.contain('"validate_gates" -> "clarify_questions" [label="fail"];')
    expect(result.stdout).to.contain('"manual_review" -> "publish" [label="go"];')
    expect(result.stdout.trimEnd().endsWith('}')).to.equal(true)
  })

  it('returns the graph as data with --json', async () => {
    const result = await pipeHere(['graph', 'pipelines/default.yaml', '--json'])
    const body = json<{steps: unknown[]; edges: Array<{from: string; to: string; label: string}>}>(result)
    expect(body.steps).to.have.length(9)
    expect(body.edges).to.deep.include({from: 'validate_gates', to: 'clarify_questions', label: 'fail'})
  })

  it('refuses an invalid pipeline with its errors on stderr', async () => {
    const file = path.join(dir, 'graph-bad.yaml')
    await writeFile(file, 'version: 1\nname: g\nsteps:\n  - {id: a, kind: noop, next: nowhere}\n')
    const result = await pipe(['graph', file])
    expect(result.code).to.equal(2)
    expect(result.stdout).to.equal('')
    expect(result.stderr).to.contain(':4:31  steps[0].next  unknown step "nowhere"')
  })

  it('rejects an unknown format', async () => {
    const result = await pipeHere(['graph', 'pipelines/default.yaml', '--format', 'png'])
    expect(result.code).to.equal(2)
  })
})

describe('pipe usage errors', () => {
  it('suggests the closest command for a misspelt one, in the error format, exit 2', async () => {
    const result = await pipe(['valdate', 'x.yaml'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.match(/^Error \[E_INVALID_ARGS\]: unknown command "valdate" — did you mean "validate"\?$/m)
    const topic = await pipeHere(['snapshot', 'shwo', 'R-20260101-0001'])
    expect(topic.stderr).to.contain('unknown command "snapshot shwo" — did you mean "snapshot show"?')
  })

  it('names a missing argument', async () => {
    const result = await pipeHere(['run'])
    expect(result.code).to.equal(2)
    expect(result.stderr).to.match(/^Error \[E_INVALID_ARGS\]: Missing 1 required arg: pipeline/m)
  })
})

describe('pipe --help', () => {
  it('lists the commands and the exit codes', async () => {
    const result = await pipe(['--help'], {cwd: repoRoot})
    expect(result.code).to.equal(0)
    expect(result.stdout).to.contain('EXIT CODES').and.contain('PAUSED').and.contain('validate')
  })
})
