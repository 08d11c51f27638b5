/**
 * Seed 004: max_patch_lines bounds a task's patch, not one call. An agent's edits are counted over
 * its attempt and over its task (every attempt of the step in the run); an edit that would take the
 * count past the limit is refused as a tool result, applies nothing, and says the counts; an applied
 * edit's call records them.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {openStore} from '../../src/store/open.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {ModelServer, type Scripted} from '../helpers/model-server.js'

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

/** big.js: 40 numbered lines. */
const ORIGINAL = Array.from({length: 40}, (_, i) => `export const v${i + 1} = ${i + 1}`).join('\n') + '\n'

/** SEARCH/REPLACE of 15 lines starting at line `from` (1-based): 15 removed + 15 added = 30 changed lines. */
function rewrite(from: number, mark: string): string {
  const lines = ORIGINAL.split('\n').slice(from - 1, from + 14)
  return `big.js\n<<<<<<< SEARCH\n${lines.join('\n')}\n=======\n${lines.map((l) => `${l} // ${mark}`).join('\n')}\n>>>>>>> REPLACE\n`
}
const edit = (id: string, from: number, mark: string): Scripted => ({tool_calls: [{id, name: 'apply_edit_blocks', arguments: {blocks: rewrite(from, mark)}}]})

async function setup(pipeline: string): Promise<string> {
  ;({dir, cleanup} = await tempDir('pipe-patch-budget-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  await writeFile(path.join(repo, 'big.js'), ORIGINAL)
  execFileSync('git', ['init', '-q'], {cwd: repo})
  execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'add', '-A'], {cwd: repo})
  execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'start'], {cwd: repo})
  const p = path.join(dir, 'p')
  await mkdir(p)
  await writeFile(path.join(p, 'task.md'), 'Mark the lines.\n')
  await writeFile(
    path.join(p, 'policy.yaml'),
    'version: 1\nallowed_commands: []\nforbidden_paths: [".git/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nsandbox: auto\nconfirm: []\n',
  )
  await writeFile(path.join(p, 'agent.yaml'), pipeline)
  server = await ModelServer.start()
  return path.join(p, 'agent.yaml')
}

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

async function run(file: string): Promise<{run_id: string; status: string}> {
  const result = await pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {
    cwd: repo,
    env: {OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home')},
    timeoutMs: 120000,
  })
  expect(result.code, result.stderr + result.stdout).to.equal(0)
  return json(result)
}

async function agentSnapshots(runId: string): Promise<Snapshot[]> {
  const store = await openStore(path.join(repo, '.pipe'), 'existing')
  return (await store.readSnapshots(runId)).filter((s) => s.step.name === 'fix')
}

const STEP = `  - id: fix
    kind: agent
    prompt: task.md
    tools: [apply_edit_blocks]
`

describe('max_patch_lines bounds the task, not the call (seed 004)', function () {
  this.timeout(120000)

  it('refuses a second 30-line edit in one attempt under a limit of 50: nothing of it is applied, and the refusal says the counts', async () => {
    const file = await setup(`version: 1\nname: budget\nsteps:\n${STEP}`)
    server.script('fix', edit('e1', 1, 'one'), edit('e2', 21, 'two'), {content: 'done what I could'})
    const body = await run(file)
    expect(body.status).to.equal('succeeded')
    const text = await readFile(path.join(repo, 'big.js'), 'utf8')
    expect(text).to.contain('v1 = 1 // one').and.not.contain('// two')
    const [fix] = await agentSnapshots(body.run_id)
    const calls = fix!.tool_calls!
    expect(calls.map((c) => [c.call_id, c.ok, c.decision])).to.deep.equal([
      ['e1', true, 'auto'],
      ['e2', false, 'denied'],
    ])
    expect(calls[0]!.summary).to.equal('edited big.js (30 line(s); 30 in this attempt, 30 in this task)')
    expect(calls[1]!.summary).to.contain(
      'the edit changes 30 lines; with the 30 already changed in this task (attempts of step fix in this run; 30 in this attempt) that is 60; the policy allows 50 (max_patch_lines)',
    )
  })

  it('counts the edits of an attempt that ended in an error: the next attempt is refused past the limit', async () => {
    const file = await setup(
      `version: 1\nname: budget\nsteps:\n${STEP}    max_iterations: 2\n    on_exhausted: end\n    on: {error: again}\n    next: end\n  - id: again\n    kind: noop\n    next: fix\n  - id: end\n    kind: noop\n`,
    )
    server.script('fix', edit('b1', 1, 'first'), {status: 400, body: {error: {message: 'bad request'}}}, edit('b2', 21, 'second'), {content: 'attempt 2'})
    const body = await run(file)
    expect(body.status).to.equal('succeeded')
    expect(await readFile(path.join(repo, 'big.js'), 'utf8'))
      .to.contain('// first')
      .and.not.contain('// second')
    const [, second] = await agentSnapshots(body.run_id)
    expect(second!.tool_calls![0]!.ok).to.equal(false)
    expect(second!.tool_calls![0]!.summary).to.contain('with the 30 already changed in this task')
  })

  it("counts the task's earlier attempts: a 30-line edit in the second attempt is refused after 30 lines in the first", async () => {
    const file = await setup(
      `version: 1\nname: budget\nsteps:\n${STEP}    max_iterations: 2\n    on_exhausted: end\n    next: again\n  - id: again\n    kind: noop\n    next: fix\n  - id: end\n    kind: noop\n`,
    )
    server.script('fix', edit('a1', 1, 'first'), {content: 'attempt 1'}, edit('a2', 21, 'second'), {content: 'attempt 2'})
    const body = await run(file)
    expect(body.status).to.equal('succeeded')
    const text = await readFile(path.join(repo, 'big.js'), 'utf8')
    expect(text).to.contain('// first').and.not.contain('// second')
    const [first, second] = await agentSnapshots(body.run_id)
    expect(first!.tool_calls![0]!.summary).to.equal('edited big.js (30 line(s); 30 in this attempt, 30 in this task)')
    expect(second!.tool_calls![0]!.ok).to.equal(false)
    expect(second!.tool_calls![0]!.summary).to.contain(
      'with the 30 already changed in this task (attempts of step fix in this run; 0 in this attempt) that is 60',
    )
  })
})
