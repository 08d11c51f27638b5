/**
 * pipelines/coding.yaml on the built CLI, against a scripted chat-completions server on 127.0.0.1
 * that plays the spec steps, the architect, the task planner, an agent's tool-call conversations
 * and the summary, in real git repositories in temp dirs: a task done first time, one fixed on its
 * second attempt, and examples/coding-agent through a kill -9. The tasks that block (their retries
 * spent, a command denied, an edit out of bounds, a dependency blocked) are coding-blocked.test.ts's.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import {readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir, codingExampleRun} from '../helpers/cli.js'
import {runsIn} from '../helpers/stores.js'
import {statsIn} from '../helpers/stats-in.js'
import type {ModelRequest, ModelServer} from '../helpers/model-server.js'
import {ARCH, block, codingRepo, TASKS, type RunJson} from '../helpers/coding-repo.js'

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

const {setup, git, env, run, attemptStarts} = codingRepo({
  get: () => ({dir, repo, cleanup, server}),
  set: (made) => ({dir, repo, cleanup, server} = {dir, repo, cleanup, server, ...made}),
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
