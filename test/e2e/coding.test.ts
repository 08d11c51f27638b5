/**
 * pipelines/coding.yaml on the built CLI, against a scripted chat-completions server on 127.0.0.1
 * that plays the spec steps, the architect, the task planner, an agent's tool-call conversations
 * and the summary, in real git repositories in temp dirs.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir, type CliResult, codingExampleRun} from '../helpers/cli.js'
import {expectAuditPasses, runRecordIn, runsIn, snapshotsIn} from '../helpers/stores.js'
import {statsIn} from '../helpers/stats-in.js'
import {cannedReply, ModelServer, type ModelRequest, type Scripted} from '../helpers/model-server.js'

// The task's tests run as `node calc.test.js`: node:test in one process, where `node --test` starts a
// runner and then a child per file, each QA of each attempt (CI's slowest file).
const BUGGY = 'export function add(a, b) {\n  return a - b\n}\n'
const TEST =
  "import {test} from 'node:test'\nimport assert from 'node:assert/strict'\nimport {add} from './calc.js'\n\ntest('add adds', () => {\n  assert.equal(add(2, 3), 5)\n})\n"
const block = (from: string, to: string): string => `calc.js\n<<<<<<< SEARCH\n  return ${from}\n=======\n  return ${to}\n>>>>>>> REPLACE\n`

const ARCH = {
  tech_stack: {language: 'JavaScript (Node.js 20, ES modules)', test_framework: 'node:test'},
  directory_tree: ['calc.js', 'calc.test.js', 'package.json'],
  api_specs: [{name: 'add', signature: 'add(a: number, b: number): number'}],
  data_models: [],
  build_run_commands: {test: [['node', 'calc.test.js']]},
}
const TASKS = {
  tasks: [
    {
      id: 'T1',
      title: 'add() adds',
      goal: 'add(a, b) returns the sum of a and b',
      type: 'modify_file',
      files_required: ['calc.js', 'calc.test.js'],
      files_touched: ['calc.js'],
      acceptance_tests: {
        static_checks: [['node', '--check', 'calc.js']],
        unit_tests: [['node', 'calc.test.js']],
        smoke_tests: [],
        expected_signals: ['add(2, 3) is 5'],
      },
    },
  ],
}
const SUMMARY = {
  what_changed: ['calc.js: add() adds'],
  why: 'add() subtracted',
  how_verified: ['node --test'],
  risks: [],
  rollback: 'git revert the coding_agent commit',
  blockers: [],
  manual_steps: [],
}

/** The scripted summary of a run whose task blocked (seed 000: the blockers and the manual steps). */
const BLOCKED_SUMMARY = {
  what_changed: [],
  why: 'add() subtracts',
  how_verified: ['node --test still fails'],
  risks: ['add() is still wrong'],
  rollback: 'nothing to roll back: the task was rolled back to its checkpoint',
  blockers: [{task: 'T1', tried: 'three edits of calc.js', failed: 'node --test: add(2, 3) is not 5'}],
  manual_steps: ['fix add() in calc.js so that node --test passes, then pipe resume the run'],
}

/** The agent's n-th attempt at T1: an edit that keeps add() wrong (it builds on attempt n-1's), then its answer. */
const wrongAttempt = (n: number): Scripted[] => [
  {tool_calls: [{id: `w${n}`, name: 'apply_edit_blocks', arguments: {blocks: block(n === 1 ? 'a - b' : `a * b + ${n - 1}`, `a * b + ${n}`)}}]},
  {content: JSON.stringify({summary: `attempt ${n}`, plan: []})},
]

/** What the planner answers in the current test (TASKS unless a test gives other tasks). */
let tasks: unknown = TASKS
/** TASKS with its one task changed. */
const taskWith = (change: Record<string, unknown>): unknown => ({tasks: [{...TASKS.tasks[0]!, ...change}]})

export function codingReply(request: ModelRequest): Scripted {
  const usage = {prompt_tokens: 200, completion_tokens: 60}
  if (request.kind === 'arch') return {content: JSON.stringify(ARCH), usage}
  if (request.kind === 'tasks') return {content: JSON.stringify(tasks), usage}
  if (request.kind === 'summary') {
    const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? ''
    return {content: JSON.stringify(prompt.includes('"status": "blocked"') ? BLOCKED_SUMMARY : SUMMARY), usage}
  }
  if (request.kind === 'implement') return {status: 500, body: {error: {message: 'no scripted agent turn left'}}}
  return cannedReply(request)
}

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

async function setup(planned: unknown = TASKS, files: Record<string, string> = {}): Promise<void> {
  tasks = planned
  ;({dir, cleanup} = await tempDir('pipe-coding-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
  await writeFile(path.join(repo, 'calc.js'), BUGGY)
  await writeFile(path.join(repo, 'calc.test.js'), TEST)
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(repo, name), text)
  git('init', '-q')
  git('add', '-A')
  git('commit', '-qm', 'start')
  await writeFile(
    path.join(dir, 'policy.yaml'),
    `version: 1
allowed_commands:
  - [node, calc.test.js]
  - [node, --check, "{path}"]
forbidden_paths: [".git/**", ".env"]
max_patch_lines: 200
max_retries_default: 2
resource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576}
sandbox: auto
confirm: []
`,
  )
  server = await ModelServer.start(codingReply)
}

function git(...args: string[]): string {
  return execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], {cwd: repo, encoding: 'utf8'}).trim()
}

const env = (): Record<string, string> => ({OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home')})

function run(pipeline = path.join(repoRoot, 'pipelines', 'coding.yaml')): Promise<CliResult> {
  return pipe(
    [
      'run',
      pipeline,
      '--text',
      'add(a, b) in calc.js must return the sum of a and b; today it subtracts.',
      '--decision',
      'go',
      '--json',
      '--policy',
      path.join(dir, 'policy.yaml'),
    ],
    {
      cwd: repo,
      env: env(),
      timeoutMs: 240000,
    },
  )
}

interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string}
}

/** The agent requests that start an attempt (a user message only, no tool results yet). */
function attemptStarts(): ModelRequest[] {
  return server.requests.filter((r) => r.kind === 'implement' && !r.body.messages.some((m) => m.role === 'tool' || m.role === 'assistant'))
}

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

describe('pipelines/coding.yaml (a scripted tool-calling model server on 127.0.0.1, a real git repository)', function () {
  this.timeout(300000)

  it('does a task first time: the agent edits, QA passes, the change is committed as coding_agent: T1', async () => {
    await setup()
    server.script(
      'implement',
      {tool_calls: [{id: 'r1', name: 'read_file', arguments: {path: 'calc.js'}}]},
      {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: block('a - b', 'a + b')}}]},
      {content: JSON.stringify({summary: 'add() adds', plan: ['read calc.js', 'fix the operator']})},
    )
    // The same pipeline with prices: the tasks' child runs price their agent's tokens with them too.
    const priced = path.join(dir, 'priced.yaml')
    await writeFile(
      priced,
      `version: 1\nname: coding-priced\nextends: ${JSON.stringify(path.relative(dir, path.join(repoRoot, 'pipelines', 'coding.yaml')))}\nprovider: {prices: {prompt_per_1k: 0.5, completion_per_1k: 1.5, currency: EUR}}\n`,
    )
    const result = await run(priced)
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('succeeded')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a + b')
    expect(git('log', '--format=%s')).to.match(/^coding_agent: T1\npipe: checkpoint before task T1\nstart$/)
    expect(git('status', '--porcelain')).to.equal('')
    expect(attemptStarts()).to.have.length(1)
    expect(server.count('summary')).to.equal(1)
    const usage = (r: ModelRequest): [number, number] =>
      r.kind === 'implement' ? [100, 50] : ['arch', 'tasks', 'summary'].includes(r.kind) ? [200, 60] : [120, 80]
    const cost = server.requests.reduce((n, r) => n + (usage(r)[0] * 0.5 + usage(r)[1] * 1.5) / 1000, 0)
    // `pipe stats --pipeline coding-priced --json`, read in this process (the command's own output is the next test's).
    const stats = await statsIn(repo, {pipeline: 'coding-priced'})
    expect(stats.totals).to.deep.include({
      runs: 1,
      tasks: 1,
      tasks_passed: 1,
      mean_attempts: 1,
      failure_categories: {},
      currency: 'EUR',
      model_calls: server.count(),
    })
    expect(stats.totals.cost).to.be.closeTo(cost, 1e-6)
  })

  it('fixes a task on the second attempt from the QA verdict: failed stage, log lines and files to read reach the agent', async () => {
    await setup()
    server.script(
      'implement',
      {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: block('a - b', 'a + b + 1')}}]},
      {content: JSON.stringify({summary: 'add() adds, I think', plan: ['fix the operator']})},
      {tool_calls: [{id: 'e2', name: 'apply_edit_blocks', arguments: {blocks: block('a + b + 1', 'a + b')}}]},
      {content: JSON.stringify({summary: 'add() adds without the stray + 1', plan: ['read the verdict', 'drop the + 1']})},
    )
    const result = await run()
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    expect(json<RunJson>(result).status).to.equal('succeeded')
    const starts = attemptStarts()
    expect(starts).to.have.length(2)
    const first = starts[0]!.body.messages.find((m) => m.role === 'user')!.content
    const second = starts[1]!.body.messages.find((m) => m.role === 'user')!.content
    expect(first).to.contain('"status": "none"')
    expect(second).to.contain('"failed_stage": "tests"').and.contain('"error_category": "test_fail"')
    // The log lines of the failing test run: the assertion and its values.
    expect(second).to.match(/"log_lines": \[/)
    expect(second).to.contain('6 !== 5')
    expect(second).to.match(/"files_to_read": \[[^\]]*"calc\.test\.js"/)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a + b\n')
    expect(git('log', '--format=%s')).to.match(/^coding_agent: T1\n/)

    // Seed 004's artifacts, written as the run went, under the store (git-ignored).
    const runId = json<RunJson>(result).run_id
    const root = path.join(repo, '.pipe', 'artifacts')
    for (const file of ['prd.md', 'arch.json', 'tasks.json', `runs/${runId}/state.json`, `runs/${runId}/timeline.md`])
      expect(existsSync(path.join(root, file)), file).to.equal(true)
    expect(JSON.parse(await readFile(path.join(root, 'arch.json'), 'utf8'))).to.deep.equal(ARCH)
    expect(JSON.parse(await readFile(path.join(root, 'tasks.json'), 'utf8'))).to.deep.equal(TASKS.tasks)
    const state = JSON.parse(await readFile(path.join(root, 'runs', runId, 'state.json'), 'utf8')) as {phase: string; child_runs: string[]}
    expect(state.phase).to.equal('succeeded')
    expect(state.child_runs).to.have.length(1)
    const child = state.child_runs[0]!
    const task = path.join(root, 'runs', child, 'task_T1')
    expect(await readdir(task)).to.deep.equal(['attempt_01', 'attempt_02'])
    const childState = JSON.parse(await readFile(path.join(root, 'runs', child, 'state.json'), 'utf8')) as {
      phase: string
      attempts_by_task: Record<string, number>
      last_commit_hash: string
    }
    expect(childState).to.include({phase: 'succeeded', last_commit_hash: git('rev-parse', 'HEAD')})
    expect(childState.attempts_by_task).to.deep.equal({T1: 2})
    for (const [attempt, status] of [
      ['attempt_01', 'fail'],
      ['attempt_02', 'pass'],
    ] as const) {
      const files = await readdir(path.join(task, attempt))
      expect(files, attempt).to.include.members([
        'plan.json',
        'patch.diff',
        'patch_apply.json',
        'verdict.json',
        'qa_step_01_static.log',
        'qa_step_02_tests.log',
      ])
      const verdict = JSON.parse(await readFile(path.join(task, attempt, 'verdict.json'), 'utf8')) as {status: string; full_logs: string[]}
      expect(verdict.status).to.equal(status)
      expect(verdict.full_logs).to.deep.equal([
        `runs/${child}/task_T1/${attempt}/qa_step_01_static.log`,
        `runs/${child}/task_T1/${attempt}/qa_step_02_tests.log`,
      ])
      for (const log of verdict.full_logs) expect(existsSync(path.join(root, log)), log).to.equal(true)
    }
    expect(await readFile(path.join(task, 'attempt_01', 'patch.diff'), 'utf8')).to.contain('+  return a + b + 1')
    expect(await readFile(path.join(task, 'attempt_01', 'qa_step_02_tests.log'), 'utf8')).to.contain('6 !== 5')
    expect(JSON.parse(await readFile(path.join(task, 'attempt_02', 'patch_apply.json'), 'utf8'))).to.include({status: 'applied'})
    expect(JSON.parse(await readFile(path.join(task, 'attempt_02', 'plan.json'), 'utf8')).answer).to.deep.equal({
      summary: 'add() adds without the stray + 1',
      plan: ['read the verdict', 'drop the + 1'],
    })
    const timeline = await readFile(path.join(root, 'runs', child, 'timeline.md'), 'utf8')
    expect(timeline).to.contain('QA fail at tests').and.contain('QA pass')
    // Seed 004's timeline: each attempt's number, what failed QA (its category and first error), the patch's size, the tools by name.
    expect(timeline).to.match(/QA fail at tests \(test_fail\): \S/)
    expect(timeline).to.match(/attempt 1: done; agent: \d+ tool call\(s\) \([a-z_, ]+\), patch 1 file\(s\), \d+ line\(s\): calc\.js/)
    expect(timeline).to.match(/\*\*tool_call_request\*\* `[a-z_]+` in implement/)
    const shown = await pipe(['runs', 'show', child], {cwd: repo, env: env()})
    expect(shown.stdout).to.match(/tool_call_request step implement tool [a-z_]+/)
    // The artifacts are the store's, never part of the repository's commits.
    expect(git('ls-files')).not.to.contain('artifacts')

    // pipe stats over the same run: one task, passed on its 2nd attempt after one test_fail (the report
    // `pipe stats --json` prints, read in this process; the command's text, filters and refusal follow).
    const stats = await statsIn(repo)
    const tokens = server.requests.reduce((n, r) => n + (r.kind === 'implement' ? 150 : ['arch', 'tasks', 'summary'].includes(r.kind) ? 260 : 200), 0)
    const expected = {
      runs: 1,
      tasks: 1,
      tasks_passed: 1,
      task_pass_rate: 1,
      attempts: 2,
      mean_attempts: 2,
      failure_categories: {test_fail: 1},
      patches: 2,
      mean_patch_lines: 2,
      qa_runs: 2,
      model_calls: server.count(),
      total_tokens: tokens,
      cost: null,
    }
    expect(stats.totals).to.deep.include(expected)
    expect(stats.totals['mean_qa_ms']).to.be.a('number').and.be.greaterThan(0)
    expect(stats.pipelines).to.have.length(1)
    expect(stats.pipelines[0]).to.deep.include({pipeline: 'coding', ...expected})
    expect(stats.runs.map((r) => [r['run_id'], r['status']])).to.deep.equal([[runId, 'succeeded']])
    expect(stats.runs[0]).to.deep.include(expected)
    const text = await pipe(['stats', '--pipeline', 'coding'], {cwd: repo, env: env()})
    expect(text.code, text.stderr).to.equal(0)
    expect(text.stdout).to.contain('tasks: 1, passed 1 (100%), mean attempts 2').and.contain('failure categories: test_fail 1').and.contain(runId)
    expect((await pipe(['stats', '--pipeline', 'default'], {cwd: repo, env: env()})).stdout).to.contain('No runs (pipeline default)')
    expect(json<{totals: {runs: number}}>(await pipe(['stats', '--since', '2999-01-01', '--json'], {cwd: repo, env: env()})).totals.runs).to.equal(0)
    const bad = await pipe(['stats', '--since', 'yesterday'], {cwd: repo, env: env()})
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.contain('E_INVALID_ARGS')
  })

  it("blocks a task without max_retries after 1 + the policy's max_retries_default attempts (1: two), rolled back to its checkpoint; a person fixes the code, and pipe resume of the parent runs QA again, commits and succeeds", async () => {
    await setup()
    const policy = path.join(dir, 'policy.yaml')
    await writeFile(policy, (await readFile(policy, 'utf8')).replace('max_retries_default: 2', 'max_retries_default: 1'))
    const before = git('rev-parse', 'HEAD')
    // A third attempt is scripted: the bound is the policy's, not the script's end.
    server.script('implement', ...wrongAttempt(1), ...wrongAttempt(2), ...wrongAttempt(3))
    const result = await run()
    expect(result.code, result.stderr + result.stdout).to.equal(6)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('blocked')
    expect(attemptStarts(), '1 + max_retries_default attempts').to.have.length(2)
    // Rolled back: the file is as it was, HEAD is the checkpoint (on top of the start), nothing is committed as done.
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    expect(git('log', '--format=%s')).to.equal('pipe: checkpoint before task T1\nstart')
    expect(git('rev-parse', 'HEAD~1')).to.equal(before)
    expect(git('status', '--porcelain')).to.equal('')
    expect((await runRecordIn(repo, body.run_id)).status).to.equal('blocked')
    expect(body.reason).to.contain('task T1 was rolled back to its checkpoint after 2 attempt(s): QA still fails at tests (test_fail)')
    // Seed 000: an unrecoverable task still goes to the summary, which is told what was tried and what failed.
    expect(server.count('summary')).to.equal(1)
    const summary = server.requests.find((r) => r.kind === 'summary')!.body.messages.find((m) => m.role === 'user')!.content
    expect(summary)
      .to.contain('"status": "blocked"')
      .and.contain('QA still fails at tests (test_fail)')
      .and.contain('after 2 attempt(s)')
      .and.contain('the agent last said: attempt 2')
    expect(body.reason).to.match(/^step blocked needs a person: 1 of 1 task\(s\) not done: T1 \(blocked\): /)
    expect(body.reason).to.contain(`what was tried, what failed and what a person should do: pipe snapshot show ${body.run_id} --step summary`)
    const shownSummary = json<Array<{outputs: {value: unknown}}>>(
      await pipe(['snapshot', 'show', body.run_id, '--step', 'summary', '--json'], {cwd: repo, env: env()}),
    )
    expect(shownSummary.map((s) => s.outputs.value)).to.deep.equal([BLOCKED_SUMMARY])

    // The child runs \`pipe runs list --all --json\` lists, read in this process.
    const children = async (): Promise<string[]> => (await runsIn(repo)).filter((r) => r.parent).map((r) => r.run_id)
    const childrenBefore = await children()
    expect(childrenBefore).to.have.length(1)

    // A wrong fix: QA runs again and fails, so the task is rolled back (the edit is gone) and blocked again.
    await writeFile(path.join(repo, 'calc.js'), BUGGY.replace('a - b', 'a * b'))
    const wrongFix = await pipe(['resume', body.run_id, '--json'], {cwd: repo, env: env(), timeoutMs: 240000})
    expect(wrongFix.code, wrongFix.stderr + wrongFix.stdout).to.equal(6)
    expect(json<RunJson>(wrongFix).reason).to.contain('QA still fails at tests (test_fail)')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    expect(git('log', '--format=%s')).to.equal('pipe: checkpoint before task T1\nstart')

    // Seed 001: BLOCKED -> a person intervenes -> EXECUTING. The fix is made by hand, uncommitted.
    await writeFile(path.join(repo, 'calc.js'), BUGGY.replace('a - b', 'a + b'))
    const resumed = await pipe(['resume', body.run_id, '--json'], {cwd: repo, env: env(), timeoutMs: 240000})
    expect(resumed.code, resumed.stderr + resumed.stdout).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    expect(attemptStarts(), 'the agent is not asked again').to.have.length(2)
    // The pass is the person's fix, not the agent's: pipe stats (--json, read in this process) counts it apart.
    const fixed = await statsIn(repo)
    expect(fixed.totals).to.deep.include({tasks: 1, tasks_passed: 0, tasks_fixed_by_person: 1})
    // Summarised at each end; the wrong fix's summary asks what the first did, and the reply cache answers it.
    expect(server.count('summary')).to.equal(2)
    expect(git('log', '--format=%s')).to.equal('coding_agent: T1\npipe: checkpoint before task T1\nstart')
    expect(git('show', 'HEAD:calc.js')).to.contain('return a + b')
    expect(git('status', '--porcelain')).to.equal('')
    const child = (await runsIn(repo)).find((r) => r.parent !== undefined)!
    expect(child.status).to.equal('succeeded')
    const steps = await snapshotsIn(repo, child.run_id)
    expect(steps.slice(-10).map((s) => [s.step.name, s.decisions.at(-1)!.decision])).to.deep.equal([
      ['blocked', 'resumed'],
      ['qa', 'fail'],
      ['verdict', 'rollback'],
      ['rollback', 'success'],
      ['blocked', 'blocked'],
      ['blocked', 'resumed'],
      ['qa', 'pass'],
      ['verdict', 'commit'],
      ['commit', 'success'],
      ['done', 'succeeded'],
    ])
    expect(steps.at(-5)!.decisions.at(-1)!.by).to.be.a('string')
    await expectAuditPasses(repo, body.run_id)
    // pipe resume went on with the same child run each time: no task started again.
    expect(await children()).to.deep.equal(childrenBefore)
  })

  it('QA errors when the policy denies a definition-of-done command: the edit is rolled back, the task ends blocked naming the command, and the run ends blocked after a summary', async () => {
    await setup(taskWith({acceptance_tests: {static_checks: [['eslint', '.']], unit_tests: [['node', 'calc.test.js']], smoke_tests: [], expected_signals: []}}))
    server.script(
      'implement',
      {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: block('a - b', 'a + b')}}]},
      {content: JSON.stringify({summary: 'add() adds', plan: ['fix the operator']})},
    )
    const result = await run()
    expect(result.code, result.stderr + result.stdout).to.equal(6)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('blocked')
    // The agent's edit is not left in the working tree, nor committed.
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    expect(git('status', '--porcelain')).to.equal('')
    expect(git('log', '--format=%s')).to.equal('pipe: checkpoint before task T1\nstart')
    expect(attemptStarts()).to.have.length(1)
    expect(body.reason)
      .to.contain('T1 (blocked)')
      .and.contain('task T1 was rolled back to its checkpoint after 1 attempt(s): QA could not run: E_POLICY_DENIED: command ["eslint","."] is not allowed')
    expect(server.count('summary')).to.equal(1)
    expect(server.requests.find((r) => r.kind === 'summary')!.body.messages.find((m) => m.role === 'user')!.content).to.contain(
      'command [\\"eslint\\",\\".\\"] is not allowed',
    )
  })

  it("bounds the agent's edits by the task's files_touched and constraints.forbidden_paths: an edit outside them is refused as a tool result, nothing is committed", async () => {
    await setup(
      taskWith({
        files_touched: ['README.md', 'docs/**'],
        constraints: {forbidden_paths: ['docs/private/**'], forbidden_actions: []},
        rollback_plan: {strategy: 'git_reset'},
        max_retries: 3,
      }),
      {'README.md': '# calc\n'},
    )
    server.script(
      'implement',
      {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: block('a - b', 'a + b')}}]},
      {tool_calls: [{id: 'e2', name: 'apply_edit_blocks', arguments: {blocks: 'docs/private/notes.md\n<<<<<<< SEARCH\n=======\nnotes\n>>>>>>> REPLACE\n'}}]},
      {tool_calls: [{id: 'g1', name: 'give_up', arguments: {reason: 'the task may not change calc.js'}}]},
    )
    const result = await run()
    expect(result.code, result.stderr + result.stdout).to.equal(6)
    expect(json<RunJson>(result).status).to.equal('blocked')
    // The model was told why, as the result of its call.
    const implement = server.requests.filter((r) => r.kind === 'implement')
    const results = implement
      .at(-1)!
      .body.messages.filter((m) => m.role === 'tool')
      .map((m) => m.content)
    expect(results).to.have.length(2)
    expect(results[0]).to.contain('calc.js').and.contain('files_touched').and.contain('README.md').and.contain('nothing was applied')
    expect(results[1]).to.contain('docs/private/notes.md').and.contain('forbidden_paths').and.contain('nothing was applied')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    expect(existsSync(path.join(repo, 'docs'))).to.equal(false)
    expect(git('log', '--format=%s')).not.to.contain('coding_agent')
    expect(git('status', '--porcelain')).to.equal('')
  })

  it("runs a task after the tasks it depends_on, and never runs one whose dependency was blocked (seed 003); a task's max_retries (1) is its attempts, and its constraints reach the agent", async () => {
    // T2 comes first in the list but builds on T1; T1 fails its one attempt (its max_retries) and is rolled back.
    const t1 = {
      ...TASKS.tasks[0]!,
      constraints: {forbidden_paths: [], forbidden_actions: ['add a dependency']},
      rollback_plan: {strategy: 'git_reset'},
      max_retries: 1,
    }
    const t2 = {...TASKS.tasks[0]!, id: 'T2', title: 'use add()', goal: 'a caller of add()', depends_on: ['T1']}
    await setup({tasks: [t2, t1]})
    server.script(
      'implement',
      {tool_calls: [{id: 'w1', name: 'apply_edit_blocks', arguments: {blocks: block('a - b', 'a * b')}}]},
      {content: JSON.stringify({summary: 'attempt 1', plan: []})},
    )
    const result = await run()
    expect(result.code, result.stderr + result.stdout).to.equal(6)
    const body = json<RunJson>(result)
    // One attempt in all, and it was T1's: T2 never reached the agent.
    expect(attemptStarts(), "T1's max_retries: 1").to.have.length(1)
    // The task as planned, constraints and all, reached the agent.
    expect(attemptStarts()[0]!.body.messages.find((m) => m.role === 'user')!.content)
      .to.contain('"id": "T1"')
      .and.contain('"max_retries": 1')
      .and.contain('add a dependency')
    expect(body.reason).to.contain('task T1 was rolled back to its checkpoint after 1 attempt(s): QA still fails at tests (test_fail)')
    const [each] = (await snapshotsIn(repo, body.run_id)).filter((s) => s.step.name === 'each')
    const items = (each!.outputs as {items: Array<{key: string; status: string; run_id: string | null; reason: string}>}).items
    expect(items.map((i) => [i.key, i.status, i.run_id === null])).to.deep.equal([
      ['T2', 'blocked', true],
      ['T1', 'blocked', false],
    ])
    expect(items[0]!.reason).to.match(/^not run: it depends on "T1", which was blocked \(child run blocked: /)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)

    // A person leaves T1 out (seed 001's SKIP): T2 is still not run, the summary is written again,
    // and the run ends, its reason naming what was left out and why, rather than blocked again.
    const skipped = await pipe(['resume', body.run_id, '--skip', 'T1', '--note', 'add() is fixed upstream', '--json'], {cwd: repo, env: env()})
    expect(skipped.code, skipped.stderr + skipped.stdout).to.equal(0)
    const done = json<RunJson>(skipped)
    expect(done.status).to.equal('succeeded')
    expect(done.reason).to.match(
      /^0 of 2 task\(s\) committed; left out by a person: T2 \(blocked\): not run: it depends on "T1", which was skipped \(skipped by a person: add\(\) is fixed upstream\); T1 \(skipped\): skipped by a person: add\(\) is fixed upstream$/,
    )
    expect(attemptStarts(), 'the agent was not asked again').to.have.length(1)
    await expectAuditPasses(repo)
  })

  it('runs examples/coding-agent offline from its cassette (edits, a failing QA, a fix on the 2nd attempt, a commit), through a kill -9 while artifacts are written: resumed, the artifacts are rebuilt equal byte for byte to pipe export of the run', async () => {
    // One run of the example for both: the kill falls inside the task's child run, and the resumed run
    // ends as the uninterrupted one does (which test/e2e/install-path.test.ts, view-attack and the
    // shipped pipe test run too).
    ;({dir, cleanup} = await tempDir('pipe-coding-example-'))
    server = undefined as unknown as ModelServer
    repo = path.join(dir, 'median')
    const example = path.join(repoRoot, 'examples', 'coding-agent')
    await cp(path.join(example, 'scratch'), repo, {recursive: true})
    git('init', '-q')
    const home = {PIPE_HOME: path.join(dir, 'home')}
    // The 100th artifact file of about 140 falls inside the task's child run.
    const killed = await pipe(codingExampleRun(), {cwd: repo, env: {...home, PIPE_FAULT_KILL_AT: 'artifact-file#100'}, timeoutMs: 240000})
    expect(killed.signal, killed.stderr).to.equal('SIGKILL')
    const runs = await runsIn(repo)
    const parent = runs.find((r) => !r.parent)!
    expect(parent.status).to.equal('interrupted')
    expect(
      runs.filter((r) => r.parent),
      'the kill fell inside the child run',
    ).to.have.length(1)
    const resumed = await pipe(['resume', parent.run_id, '--json'], {cwd: repo, env: home, timeoutMs: 240000})
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    const runId = parent.run_id
    // The repository: the baseline checkpoint (its first commit) and the agent's fix, tested.
    expect(git('log', '--format=%s')).to.equal('coding_agent: T1\npipe: checkpoint before task T1')
    expect(git('show', '--stat', '--format=%s', 'HEAD')).to.contain('median.js')
    expect(await readFile(path.join(repo, 'median.js'), 'utf8'))
      .to.contain('.sort((a, b) => a - b)')
      .and.contain('(sorted[middle - 1] + sorted[middle]) / 2')
    execFileSync(process.execPath, ['--test'], {cwd: repo, stdio: 'pipe'})
    // What a person reads: the first attempt's failing QA and the second's pass.
    const state = JSON.parse(await readFile(path.join(repo, '.pipe', 'artifacts', 'runs', runId, 'state.json'), 'utf8')) as {child_runs: string[]}
    const task = path.join(repo, '.pipe', 'artifacts', 'runs', state.child_runs[0]!, 'task_T1')
    const first = JSON.parse(await readFile(path.join(task, 'attempt_01', 'verdict.json'), 'utf8')) as {
      status: string
      failed_stage: string
      log_lines: string[]
    }
    expect(first).to.include({status: 'fail', failed_stage: 'tests'})
    expect(first.log_lines.join('\n')).to.contain('2 !== 9')
    expect(JSON.parse(await readFile(path.join(task, 'attempt_02', 'verdict.json'), 'utf8'))).to.include({status: 'pass'})
    // `pipe stats --json`, read in this process.
    expect((await statsIn(repo)).totals).to.deep.include({tasks: 1, tasks_passed: 1, mean_attempts: 2, failure_categories: {test_fail: 1}, patches: 2})
    // Its pipe test (examples/coding-agent/coding-agent.pipe-test.yaml) passing is proved with every
    // shipped test's, in one run, by test/cli/test-command.test.ts.

    const live = path.join(repo, '.pipe', 'artifacts')
    const exported = path.join(dir, 'exported')
    expect((await pipe(['export', runId, '--dir', exported], {cwd: repo, env: home})).code).to.equal(0)
    const list = async (root: string): Promise<string[]> =>
      ((await readdir(root, {recursive: true, withFileTypes: true})) as Array<{name: string; parentPath?: string; path?: string; isFile(): boolean}>)
        .filter((e) => e.isFile())
        .map((e) => path.relative(root, path.join(e.parentPath ?? e.path ?? root, e.name)))
        .sort()
    const files = await list(live)
    expect(files).to.deep.equal(await list(exported))
    expect(files.filter((f) => f.endsWith('verdict.json'))).to.have.length(3)
    for (const file of files) expect(await readFile(path.join(live, file), 'utf8'), file).to.equal(await readFile(path.join(exported, file), 'utf8'))
  })
})
