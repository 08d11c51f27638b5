/**
 * pipelines/coding.yaml on the built CLI (a scripted chat-completions server on 127.0.0.1, a real
 * git repository): tasks that end blocked, rolled back to their checkpoint, and what a person does
 * then. Retries spent and a person's fix resumed; a definition-of-done command the policy denies; an
 * edit outside files_touched or into forbidden_paths; a task whose dependency was blocked, skipped.
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe} from '../helpers/cli.js'
import {expectAuditPasses, runRecordIn, runsIn, snapshotsIn} from '../helpers/stores.js'
import {statsIn} from '../helpers/stats-in.js'
import type {ModelServer, Scripted} from '../helpers/model-server.js'
import {BLOCKED_SUMMARY, block, BUGGY, codingRepo, TASKS, type RunJson} from '../helpers/coding-repo.js'

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

/** The agent's n-th attempt at T1: an edit that keeps add() wrong (it builds on attempt n-1's), then its answer. */
const wrongAttempt = (n: number): Scripted[] => [
  {tool_calls: [{id: `w${n}`, name: 'apply_edit_blocks', arguments: {blocks: block(n === 1 ? 'a - b' : `a * b + ${n - 1}`, `a * b + ${n}`)}}]},
  {content: JSON.stringify({summary: `attempt ${n}`, plan: []})},
]

/** TASKS with its one task changed. */
const taskWith = (change: Record<string, unknown>): unknown => ({tasks: [{...TASKS.tasks[0]!, ...change}]})

describe('pipelines/coding.yaml (a scripted tool-calling model server on 127.0.0.1, a real git repository)', function () {
  this.timeout(300000)

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
})
