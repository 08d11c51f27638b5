/**
 * Reproducible anywhere, on any day: what pipe sends to a model, what a cassette is keyed by and
 * what a golden compares depend on the pipeline, its inputs and the repository's content, never on
 * the folder, the clock, the run counter or how fast a command ran. Each test records or runs in one
 * place and replays or compares in another: another folder (with a space in its name), another
 * store (whose counter is elsewhere) and, through Debian's faketime, another year.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {cp, mkdir, readFile, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, json, node, pipe, repoRoot, tempDir, type CliOptions, type CliResult} from '../helpers/cli.js'
import {ModelServer} from '../helpers/model-server.js'
import {snapshotsIn} from '../helpers/stores.js'
import {clockAt, needs} from '../helpers/tools.js'

const ANOTHER_YEAR = '@2031-07-09 04:05:06'

/** The CLI (`entry`: this checkout's bin/run.js unless given) with its clock in 2031. */
function pipeIn2031(args: string[], options: CliOptions, entry = bin): Promise<CliResult> {
  return node([entry, ...args], {...options, env: {...clockAt(ANOTHER_YEAR), ...options.env}})
}

const PY_TEST = `import unittest
from calc import add


class AddTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)


if __name__ == "__main__":
    unittest.main()
`

const POLICY = `version: 1
allowed_commands:
  - [python3, -m, unittest]
forbidden_paths: [".git/**"]
max_patch_lines: 200
max_retries_default: 0
resource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 1, max_input_bytes: 1048576}
sandbox: auto
confirm: []
`

/** QA runs Python's unittest (it prints `Ran 1 test in 0.000s` and a traceback with the file's absolute path); the agent gets the verdict and the run id, is refused a path outside the repository, and runs the tests itself. */
const PIPELINE = `version: 1
name: repro
steps:
  - id: qa
    kind: qa
    stages: {tests: [[python3, -m, unittest]]}
    on: {fail: fix, pass: fix}
  - id: fix
    kind: agent
    prompt: fix.md
    vars:
      run: "\${{ run.id }}"
      verdict: "\${{ steps.qa.outputs.verdict }}"
    tools: [read_file, run_command]
`

async function makeRepo(at: string): Promise<void> {
  await mkdir(at, {recursive: true})
  await writeFile(path.join(at, 'calc.py'), 'def add(a, b):\n    return a - b\n')
  await writeFile(path.join(at, 'test_calc.py'), PY_TEST)
  await writeFile(path.join(at, 'policy.yaml'), POLICY)
  await writeFile(path.join(at, 'repro.yaml'), PIPELINE)
  await writeFile(path.join(at, 'fix.md'), 'Run {{run}}. The tests fail; fix calc.py.\n\nVerdict:\n{{verdict}}\n')
  execFileSync('git', ['init', '-q'], {cwd: at})
}

describe('reproducible anywhere: another folder, another store, another year', function () {
  this.timeout(240000)
  let dir: string
  let cleanup: () => Promise<void>
  let server: ModelServer | undefined

  before(function () {
    // Skipped without faketime (said once at the start), failed under CI.
    needs(this, 'faketime')
  })
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-repro-'))
  })
  afterEach(async () => {
    await server?.close()
    server = undefined
    await cleanup()
  })

  it('a run with QA, a denied path and a command recorded in one folder replays in another folder and store, in 2031', async () => {
    const first = path.join(dir, 'first')
    await makeRepo(first)
    server = await ModelServer.start()
    server.script(
      'fix',
      {tool_calls: [{id: 'c1', name: 'read_file', arguments: {path: '../../etc/passwd'}}]},
      {tool_calls: [{id: 'c2', name: 'run_command', arguments: {command: 'python3 -m unittest'}}]},
      {content: 'calc.add subtracts; it should add.'},
    )
    const cassette = path.join(dir, 'repro.jsonl')
    const home = path.join(dir, 'home')
    const recorded = await pipe(['run', 'repro.yaml', '--policy', 'policy.yaml', '--record', cassette, '--json'], {
      cwd: first,
      env: {OPENAI_BASE_URL: server.url, PIPE_HOME: home},
      timeoutMs: 120000,
    })
    // QA's failure is routed to the agent; how the run ends is not the point here, only that the replay ends alike.
    const before = json<{run_id: string; status: string; error?: {code: string}}>(recorded)
    expect(before.error?.code, recorded.stderr).to.not.equal('E_MODEL')
    expect(server.requests).to.have.length(3)
    // What reached the endpoint names no folder of this machine and no timing.
    const sent = JSON.stringify(server.requests.map((r) => r.body))
    expect(sent).to.not.contain(dir)
    expect(sent).to.not.contain(first)
    expect(sent).to.contain('leaves the repository root')
    expect(sent).to.match(/Ran 1 test in …\\/)
    expect(sent).to.not.match(/Ran 1 test in \d/)
    expect(sent).to.contain('test_calc.py')

    // Another folder (a space in its name), a store whose counter is elsewhere, another year; no endpoint.
    const second = path.join(dir, 'second place', 'repo')
    await makeRepo(second)
    const other = await pipeIn2031(['run', path.join(repoRoot, 'pipelines', 'default.yaml'), '--text', 'A tool that counts words.', '--json'], {
      cwd: second,
      env: {PIPE_HOME: home},
    })
    expect(other.code, other.stderr).to.equal(10)
    const replayed = await pipeIn2031(['run', 'repro.yaml', '--policy', 'policy.yaml', '--replay', cassette, '--json'], {
      cwd: second,
      env: {PIPE_HOME: home},
      timeoutMs: 120000,
    })
    const after = json<{run_id: string; status: string; error?: {code: string}}>(replayed)
    expect(after.error?.code, replayed.stderr).to.not.equal('E_MODEL')
    expect([replayed.code, after.status, after.error?.code]).to.deep.equal([recorded.code, before.status, before.error?.code])
    expect(after.run_id).to.equal('R-20310709-0002')
  })

  it('the denied path, the QA timing and the traceback keep their raw text in the records', async () => {
    const repo = path.join(dir, 'repo')
    await makeRepo(repo)
    server = await ModelServer.start()
    server.script('fix', {content: 'nothing to do'})
    const result = await pipe(['run', 'repro.yaml', '--policy', 'policy.yaml', '--json'], {
      cwd: repo,
      env: {OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home')},
      timeoutMs: 120000,
    })
    expect(json<{error?: {code: string}}>(result).error?.code, result.stderr).to.not.equal('E_MODEL')
    // What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts).
    const snapshots = (await snapshotsIn(repo, json<{run_id: string}>(result).run_id)) as unknown as Array<{
      step: {name: string}
      outputs: {verdict?: {log_lines: string[]}; stages?: Array<{commands: Array<{stderr: {head: string}}>}>}
    }>
    const qa = snapshots.find((s) => s.step.name === 'qa')!
    // The verdict a model reads is stable; the command's own output, kept with the step, is as the program wrote it.
    expect(qa.outputs.verdict!.log_lines.join('\n')).to.match(/Ran 1 test in …$/m)
    expect(qa.outputs.stages![0]!.commands[0]!.stderr.head).to.match(/Ran 1 test in \d+\.\d+s/)
    expect(qa.outputs.stages![0]!.commands[0]!.stderr.head).to.contain(path.join(repo, 'test_calc.py'))
  })

  it('a golden of a pipeline with a command step matches whatever the command took', async () => {
    const suite = path.join(dir, 'suite')
    await mkdir(path.join(suite, 'ws'), {recursive: true})
    // Busy for as many milliseconds as delay.txt says: the two runs below take different times.
    await writeFile(
      path.join(suite, 'ws', 'wait.js'),
      "const until = Date.now() + Number(require('fs').readFileSync('delay.txt', 'utf8'))\nwhile (Date.now() < until);\nconsole.log('done')\n",
    )
    await writeFile(path.join(suite, 'ws', 'delay.txt'), '0')
    await writeFile(path.join(suite, 'policy.yaml'), POLICY.replace('[python3, -m, unittest]', '[node, wait.js]'))
    await writeFile(path.join(suite, 'wait.yaml'), 'version: 1\nname: wait\nsteps:\n  - {id: wait, kind: command, run: [node, wait.js]}\n')
    await writeFile(
      path.join(suite, 'wait.pipe-test.yaml'),
      'version: 1\npipeline: wait.yaml\npolicy: policy.yaml\nworkspace: ws\ntests:\n  - name: waits\n    expect: {status: succeeded, golden: wait.golden.json}\n',
    )
    const env = {PIPE_HOME: path.join(dir, 'home')}
    const write = await pipe(['test', 'wait.pipe-test.yaml', '--update'], {cwd: suite, env})
    expect(write.code, write.stdout + write.stderr).to.equal(0)
    expect(await readFile(path.join(suite, 'wait.golden.json'), 'utf8')).to.contain('"reason": "node wait.js exited 0"')
    await writeFile(path.join(suite, 'ws', 'delay.txt'), '400')
    const again = await pipeIn2031(['test', 'wait.pipe-test.yaml'], {cwd: suite, env})
    expect(again.code, again.stdout + again.stderr).to.equal(0)
    expect(again.stdout + again.stderr).to.contain('1 passed')
  })

  // The one run of every shipped test (test/cli/test-command.test.ts runs one from the root).
  it('the shipped pipe test suite passes from a copy of the checkout in another folder, in 2031: a line per test, a summary, nothing left in the copy; no request in a cassette names where the checkout is', async () => {
    const copy = path.join(dir, 'a copy of pipe')
    const files = execFileSync('git', ['ls-files', '-z'], {cwd: repoRoot, encoding: 'utf8'})
      .split('\0')
      .filter((f) => f !== '' && existsSync(path.join(repoRoot, f)))
    for (const file of files) {
      await mkdir(path.dirname(path.join(copy, file)), {recursive: true})
      await cp(path.join(repoRoot, file), path.join(copy, file))
    }
    await cp(path.join(repoRoot, 'dist'), path.join(copy, 'dist'), {recursive: true})
    await symlink(path.join(repoRoot, 'node_modules'), path.join(copy, 'node_modules'))
    const result = await pipeIn2031(['test'], {cwd: copy, env: {PIPE_HOME: path.join(dir, 'home')}, timeoutMs: 200000}, path.join(copy, 'bin', 'run.js'))
    expect(result.code, result.stdout + result.stderr).to.equal(0)
    const out = result.stdout
    expect(out).to.match(/^✓ pipelines\/default\.pipe-test\.yaml › a full PRD passes its gates, is approved and published \(\d+\.\ds\)$/m)
    expect(out).to.match(/^✓ pipelines\/default\.pipe-test\.yaml › one sentence without answers stops, waiting for them/m)
    // The model-driven ones replay their shipped cassettes: no endpoint is set, none is needed.
    expect(out).to.match(/^✓ pipelines\/default-openai\.pipe-test\.yaml › a full PRD compiled by the model/m)
    expect(out).to.match(/^✓ examples\/release-notes\/release-notes\.pipe-test\.yaml › notes for customers are published into the repository/m)
    expect(out).to.match(/^✓ examples\/triage\/triage\.pipe-test\.yaml › the full PRD is triaged before the review/m)
    expect(out).to.match(/^✓ examples\/coding\/coding\.pipe-test\.yaml › the fix applies/m)
    expect(out).to.match(/^✓ examples\/coding-agent\/coding-agent\.pipe-test\.yaml › /m)
    expect(out).to.match(/^Tests: 13 passed, 13 total \(\d+\.\ds\)$/m)
    expect(out).not.to.contain('✗')
    // Nothing of the runs is left in the checkout: each test had its own store and workspace.
    expect(existsSync(path.join(copy, 'published'))).to.equal(false)
    expect(existsSync(path.join(copy, '.pipe'))).to.equal(false)
    for (const cassette of [
      'pipelines/cassettes/default-openai.jsonl',
      'examples/triage/cassettes/triage.jsonl',
      'examples/release-notes/cassettes/release-notes.jsonl',
      'examples/coding-agent/cassettes/coding-agent.jsonl',
    ])
      expect(await readFile(path.join(repoRoot, cassette), 'utf8')).not.to.contain(repoRoot)
  })
})
