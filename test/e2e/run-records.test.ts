/**
 * What a run records beyond its snapshots, on the built CLI: an agent's tool calls on the timeline
 * as they happen, a failing step's error as evidence, and the tool versions measured at the start.
 *
 * The run each behaviour is about is a `pipe` process (an agent's, a failing step's, a timed-out
 * step's, a warned and a refused run), as are the first audit verify, snapshot show and runs list;
 * the further runs and read-backs run in this process (test/helpers/pipe-here.ts: the same command
 * from argv, its output and exit code).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Evidence} from '../../src/types/evidence.js'
import type {RunEvent, RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {ModelServer} from '../helpers/model-server.js'

let dir: string
let repo: string
let cleanup: (() => Promise<void>) | undefined
let server: ModelServer | undefined

const BUGGY = 'export function add(a, b) {\n  return a - b\n}\n'
const TEST = "import {add} from './calc.js'\nif (add(2, 3) !== 5) {\n  console.error('add(2, 3) is', add(2, 3))\n  process.exit(1)\n}\nconsole.log('ok')\n"
const FIX = 'calc.js\n<<<<<<< SEARCH\n  return a - b\n=======\n  return a + b\n>>>>>>> REPLACE\n'

async function setup(policyExtra: string, pipeline: string): Promise<string> {
  ;({dir, cleanup} = await tempDir('pipe-records-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
  await writeFile(path.join(repo, 'calc.js'), BUGGY)
  await writeFile(path.join(repo, 'test.js'), TEST)
  execFileSync('git', ['init', '-q'], {cwd: repo})
  execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'add', '-A'], {cwd: repo})
  execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'start'], {cwd: repo})
  const p = path.join(dir, 'p')
  await mkdir(p)
  await writeFile(path.join(p, 'task.md'), 'Fix the bug: add() subtracts\n')
  await writeFile(
    path.join(p, 'policy.yaml'),
    `version: 1
allowed_commands:
  - [node, test.js]
forbidden_paths: [".git/**", ".env"]
max_patch_lines: 200
max_retries_default: 0
resource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576}
sandbox: auto
${policyExtra}`,
  )
  await writeFile(path.join(p, 'run.yaml'), `version: 1\nname: records\nsteps:\n${pipeline}`)
  return path.join(p, 'run.yaml')
}

afterEach(async () => {
  await server?.close()
  server = undefined
  await cleanup?.()
  cleanup = undefined
})

const env = (): Record<string, string> => ({...(server ? {OPENAI_BASE_URL: server.url} : {}), PIPE_HOME: path.join(dir, 'home')})
const run = (file: string, json = true): Promise<CliResult> =>
  pipe(['run', file, ...(json ? ['--json'] : []), '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: env(), timeoutMs: 120000})
/** `run`'s command in this process. */
const runHere = (file: string): Promise<CliResult> => pipeHere(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: env()})
const runDir = (runId: string): string => path.join(repo, '.pipe', 'runs', runId)

async function timeline(runId: string): Promise<RunEvent[]> {
  return (await readFile(path.join(runDir(runId), 'events.jsonl'), 'utf8'))
    .trimEnd()
    .split('\n')
    .map((l) => JSON.parse(l) as RunEvent)
}

/** `pipe audit verify RUN` passes: in this process, or (the first test's) a process. */
async function audit(runId: string, asProcess = false): Promise<void> {
  const verified = await (asProcess ? pipe : pipeHere)(['audit', 'verify', runId], {cwd: repo, env: env()})
  expect(verified.code, verified.stdout + verified.stderr).to.equal(0)
}

const AGENT = `  - id: fix
    kind: agent
    prompt: task.md
    tools: [read_file, apply_edit_blocks, run_command, list_directory]
`

describe('what a run records (the built CLI, real repositories and processes)', function () {
  this.timeout(180000)

  it('puts every tool call of an agent step on the timeline as a request and a result, in order, that audit verify accepts and no model request sees', async () => {
    const file = await setup('tools_preapproved: [[node, test.js]]\n', AGENT)
    server = await ModelServer.start()
    server.script(
      'fix',
      {tool_calls: [{id: 'c1', name: 'read_file', arguments: {path: 'calc.js'}}]},
      {
        tool_calls: [
          {id: 'c2', name: 'apply_edit_blocks', arguments: {blocks: FIX}},
          {id: 'c3', name: 'no_such_tool', arguments: {}},
        ],
      },
      {tool_calls: [{id: 'c4', name: 'run_command', arguments: {command: 'node test.js'}}]},
      {content: 'fixed'},
    )
    const result = await run(file)
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    const runId = json<{run_id: string}>(result).run_id
    const calls = (await timeline(runId)).filter((e) => e.event.startsWith('tool_call_'))
    expect(calls.map((e) => [e.event, e.call_id, e.tool, e.step, e.seq])).to.deep.equal([
      ['tool_call_request', 'c1', 'read_file', 'fix', 1],
      ['tool_call_result', 'c1', 'read_file', 'fix', 1],
      ['tool_call_request', 'c2', 'apply_edit_blocks', 'fix', 1],
      ['tool_call_result', 'c2', 'apply_edit_blocks', 'fix', 1],
      ['tool_call_request', 'c3', 'no_such_tool', 'fix', 1],
      ['tool_call_result', 'c3', 'no_such_tool', 'fix', 1],
      ['tool_call_request', 'c4', 'run_command', 'fix', 1],
      ['tool_call_result', 'c4', 'run_command', 'fix', 1],
    ])
    const results = calls.filter((e) => e.event === 'tool_call_result')
    expect(results.map((e) => [e.level ?? null, e.decision, e.ok])).to.deep.equal([
      ['safe', 'auto', true],
      ['moderate', 'auto', true],
      [null, 'invalid', false],
      ['dangerous', 'preapproved', true],
    ])
    for (const r of results) {
      expect(r.started_at, JSON.stringify(r)).to.be.a('string')
      expect(r.duration_ms).to.be.a('number')
      expect(Date.parse(r.at) >= Date.parse(r.started_at!)).to.equal(true)
      expect(r.summary).to.be.a('string')
    }
    // A summary, never the file content the call read.
    expect(JSON.stringify(calls)).not.to.contain('return a - b')
    // The timeline is sealed and chained as before, and the model never saw a line of it.
    await audit(runId, true)
    for (const request of server.requests) expect(JSON.stringify(request.body)).not.to.contain('tool_call_request').and.not.to.contain('tool_call_result')
    // A progress line per call on stderr; stdout stays the one JSON document.
    expect(result.stderr).to.match(/→ #1 fix read_file \(safe\) c1/)
    expect(result.stderr).to.match(/← #1 fix run_command \(dangerous\) preapproved \d+ ms {2}node test\.js exited 0/)
    expect(result.stdout).not.to.contain('read_file')
  })

  it('keeps the error a failing command step stopped the run with as evidence (code, message, stderr excerpt), linked from its snapshot', async () => {
    const file = await setup('', '  - id: check\n    kind: command\n    run: [node, test.js]\n')
    const result = await run(file)
    expect(result.code, result.stderr + result.stdout).not.to.equal(0)
    const body = json<{run_id: string; status: string; error?: {code: string}}>(result)
    expect(body.status).to.equal('failed')
    expect(body.error?.code).to.equal('E_BUILD_FAIL')
    // As a process: the file's first snapshot show.
    const [snap] = json<Snapshot[]>(await pipe(['snapshot', 'show', body.run_id, '--json'], {cwd: repo, env: env()}))
    expect(snap!.evidence_links.map((l) => l.type)).to.deep.equal(['log'])
    const evidence = JSON.parse(await readFile(path.join(repo, '.pipe', 'evidence', `${snap!.evidence_links[0]!.evidence_id}.json`), 'utf8')) as Evidence
    expect(evidence.type).to.equal('log')
    expect(evidence.content.excerpt).to.contain('add(2, 3) is -1')
    expect(evidence.content.note).to.match(/^E_BUILD_FAIL at step check: /)
    expect(evidence.linked_to).to.deep.equal([{run_id: body.run_id, step: 'check'}])
    await audit(body.run_id)
  })

  it('keeps a command killed at its timeout (E_TOOL_TIMEOUT) as evidence with what it printed, and keeps none for a run that succeeded', async () => {
    // 8 s, not less: what it printed is expected in the evidence, and a node that starts slowly on a
    // loaded machine printed nothing before a 2 s timeout. It waits idle, so the bound costs no CPU.
    const file = await setup('', '  - id: check\n    kind: command\n    run: [node, test.js]\n    command_timeout_ms: 8000\n')
    // It never ends by itself, so only the timeout stops it.
    await writeFile(path.join(repo, 'test.js'), "process.stderr.write('looping forever\\n')\nsetInterval(() => undefined, 1 << 30)\n")
    const result = await run(file)
    const body = json<{run_id: string; status: string; error?: {code: string}}>(result)
    expect(body.error?.code, result.stderr).to.equal('E_TOOL_TIMEOUT')
    const [snap] = json<Snapshot[]>(await pipeHere(['snapshot', 'show', body.run_id, '--json'], {cwd: repo, env: env()}))
    expect(snap!.evidence_links.map((l) => l.type)).to.deep.equal(['log'])
    const evidence = JSON.parse(await readFile(path.join(repo, '.pipe', 'evidence', `${snap!.evidence_links[0]!.evidence_id}.json`), 'utf8')) as Evidence
    expect(evidence.content.excerpt).to.contain('looping forever')
    expect(evidence.content.note).to.match(/^E_TOOL_TIMEOUT at step check: /)
    await audit(body.run_id)

    await writeFile(path.join(repo, 'test.js'), "console.log('ok')\n")
    // The policy's timeout: a step timeout that a slow start could reach would make this half race it.
    const okFile = path.join(path.dirname(file), 'ok.yaml')
    await writeFile(okFile, 'version: 1\nname: records\nsteps:\n  - id: check\n    kind: command\n    run: [node, test.js]\n')
    const ok = await runHere(okFile)
    expect(ok.code, ok.stderr).to.equal(0)
    const [good] = json<Snapshot[]>(await pipeHere(['snapshot', 'show', json<{run_id: string}>(ok).run_id, '--json'], {cwd: repo, env: env()}))
    expect(good!.evidence_links).to.deep.equal([])
  })

  it('measures the declared tool versions once per run: node "18" while node 20 runs warns and records both, refuses with tool_versions_mismatch: refuse', async () => {
    const running = execFileSync('node', ['--version'], {encoding: 'utf8'}).trim()
    const major = running.slice(1).split('.')[0]!
    expect(major, 'this test needs a node other than 18').not.to.equal('18')
    const step = '  - id: check\n    kind: command\n    run: [node, test.js]\n'
    const file = await setup(
      `tool_versions: {node: "18", git: "${execFileSync('git', ['--version'], {encoding: 'utf8'}).match(/\d+/)![0]}", no-such-tool-for-pipe: "1"}\n`,
      step,
    )
    await writeFile(path.join(repo, 'calc.js'), BUGGY.replace('a - b', 'a + b'))
    const warned = await run(file)
    expect(warned.code, warned.stderr).to.equal(0)
    expect(warned.stderr).to.contain(`node: declared 18, running ${running}`).and.contain('no-such-tool-for-pipe: declared 1, not installed')
    expect(warned.stderr).not.to.contain('git: declared')
    // stdout stays the one JSON document.
    const runId = json<{run_id: string}>(warned).run_id
    const record = JSON.parse(await readFile(path.join(runDir(runId), 'run.json'), 'utf8')) as RunRecord
    expect(record.tool_versions?.['node']).to.deep.equal({declared: '18', actual: running, status: 'mismatch'})
    expect(record.tool_versions?.['git']).to.include({status: 'match'})
    expect(record.tool_versions?.['no-such-tool-for-pipe']).to.include({declared: '1', actual: null, status: 'missing'})
    await audit(runId)

    // A declared version that is a prefix of the running one by parts matches: no warning.
    await writeFile(
      path.join(dir, 'p', 'policy.yaml'),
      (await readFile(path.join(dir, 'p', 'policy.yaml'), 'utf8')).replace(/tool_versions: .*\n/, `tool_versions: {node: "${major}"}\n`),
    )
    const quiet = await runHere(file)
    expect(quiet.code, quiet.stderr).to.equal(0)
    expect(quiet.stderr).not.to.contain('tool_versions')
    const matched = JSON.parse(await readFile(path.join(runDir(json<{run_id: string}>(quiet).run_id), 'run.json'), 'utf8')) as RunRecord
    expect(matched.tool_versions).to.deep.equal({node: {declared: major, actual: running, status: 'match'}})

    // refuse: E_POLICY_DENIED before any run exists or any step runs.
    await writeFile(
      path.join(dir, 'p', 'policy.yaml'),
      (await readFile(path.join(dir, 'p', 'policy.yaml'), 'utf8')).replace(
        /tool_versions: .*\n/,
        'tool_versions: {node: "18"}\ntool_versions_mismatch: refuse\n',
      ),
    )
    // As a process: the file's first runs list.
    const before = json<{runs: unknown[]}>(await pipe(['runs', 'list', '--json'], {cwd: repo, env: env()})).runs
    expect(before).to.have.length(2)
    const refused = await run(file, false)
    expect(refused.code).not.to.equal(0)
    expect(refused.stderr).to.contain('E_POLICY_DENIED').and.contain(`node: declared 18, running ${running}`)
    const after = json<{runs: unknown[]}>(await pipeHere(['runs', 'list', '--json'], {cwd: repo, env: env()})).runs
    expect(after.length).to.equal(before.length)
  })
})
