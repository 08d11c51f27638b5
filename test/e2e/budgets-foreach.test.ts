/**
 * Token and cost budgets (issue 40, items 4-5) of a foreach's child runs on the built CLI, against a
 * real chat-completions server on 127.0.0.1: counted once toward the parent's budget, stopped at it
 * (siblings under way at once included), continued by a grant of the parent's budget (a vote under
 * approvals.budget), and a child's model with no known price refused under a cost budget.
 *
 * One `pipe` process per behaviour (the run that counts its children once, the grant that continues
 * a parent's children, the siblings' run under way at once, the starter's refused vote, the run that
 * refuses a model with no price); the commands around them run in this process
 * (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {expectAuditPasses, readIn, runRecordIn} from '../helpers/stores.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {statsIn} from '../helpers/stats-in.js'
import {ModelServer} from '../helpers/model-server.js'
import {changeIn} from '../helpers/wait.js'
import {budgetCommands, model, REPLY, SCHEMA, type RunJson} from '../helpers/budget-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
let server: ModelServer

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-budget-'))
  await mkdir(path.join(dir, 'p'), {recursive: true})
  await writeFile(path.join(dir, 'p', 'prompt.md'), 'Name it.\n')
  await writeFile(path.join(dir, 'p', 'out.schema.json'), JSON.stringify(SCHEMA))
  server = await ModelServer.start(() => REPLY)
})
afterEach(async () => {
  await server.close()
  await cleanup()
})

const {pipeline, env, cli} = budgetCommands(() => ({dir, server}))
/** `cli` in this process (test/helpers/pipe-here.ts): `pipe ARGS --json` in the test's folder, with the same model server. */
const here = (args: string[], user?: string): Promise<CliResult> => pipeHere([...args, '--json'], {cwd: dir, env: env(user)})

describe('budgets: token and cost limits that pause and ask (a real model server)', function () {
  this.timeout(120000)

  it("counts a foreach's child runs toward the parent's budget once, and a retried request once", async () => {
    await writeFile(path.join(dir, 'p', 'item.yaml'), `version: 1\nname: item\nsteps:\n${model('work')}`)
    const file = await pipeline(
      'budget: {tokens: 44000}\n',
      model('first', 'each', ', retry: {max_retries: 2}') +
        `  - {id: each, kind: foreach, items: "\${{ ['x', 'y'] }}", pipeline: ./item.yaml, concurrency: 1, next: after}\n` +
        model('after'),
    )
    // The first request fails with a retryable error and spends nothing; its retry spends 15,000.
    server.script('first', {status: 503, body: {error: {message: 'busy'}}}, REPLY)
    const result = await cli(['run', file])
    expect(result.code, result.stderr).to.equal(10)
    const paused = json<RunJson>(result)
    expect(paused.pending, result.stdout).to.not.equal(undefined)
    // first (15,000) + two children (15,000 each) = 45,000: over 44,000, and not twice the children.
    expect(paused.pending).to.include({kind: 'budget', step: 'after'})
    expect(paused.pending?.budget).to.include({spent_tokens: 45000})
    expect(server.count('after')).to.equal(0)

    // What pipe stats --json prints, read in this process (the command's own output is checked in budgets.test.ts's cost test).
    const report = await statsIn(dir)
    const row = report.runs.find((r) => r.run_id === paused.run_id)!
    expect(row.total_tokens).to.equal(45000)
    expect(row.budget?.pipeline).to.include({tokens: 44000, spent_tokens: 45000, over: true})
    expect(report.pipelines.find((p) => p.pipeline === 'budgeted')!.budget).to.deep.equal({runs: 1, over: 1, spent_tokens: 45000, spent_usd: 0.0135})
  })

  it("a foreach's children stop at the parent's budget: the request that would pass it is not sent, and pipe budget PARENT continues them", async () => {
    await writeFile(path.join(dir, 'p', 'item.yaml'), `version: 1\nname: item\nsteps:\n${model('work')}`)
    const file = await pipeline(
      'budget: {tokens: 29000}\n',
      model('first', 'each') +
        `  - {id: each, kind: foreach, items: "\${{ ['x', 'y', 'z'] }}", pipeline: ./item.yaml, concurrency: 1, next: after}\n` +
        model('after'),
    )
    // The run in this process; the grant that continues it is a process.
    const result = await here(['run', file])
    const parent = json<RunJson>(result)
    expect(parent.status, result.stdout).to.equal('blocked')
    // first (15,000) and x (15,000) spent 30,000: y's and z's requests would pass 29,000 and were never sent.
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['first', 'work'])
    const children = await readIn(path.join(dir, '.pipe'), (store) => store.listChildren(parent.run_id))
    const paused = children.filter((c) => c.status === 'awaiting_input')
    expect(paused).to.have.length(2)
    expect(paused[0]!.pending?.budget).to.include({scope: 'pipeline', run_id: parent.run_id, spent_tokens: 30000, limit_tokens: 29000})
    expect(paused[0]!.pending?.reason).to.contain(`would pass parent run ${parent.run_id}'s pipeline budget of 29000 tokens`)

    // The budget is the parent's: a grant on the child says where to give it, and records nothing (pipe budget, in this process).
    const onChild = await here(['budget', paused[0]!.run_id, '--add-tokens', '5'])
    expect(onChild.code).to.not.equal(0)
    expect(json<RunJson>(onChild).error?.code, onChild.stdout).to.equal('E_STATE')
    expect(json<RunJson>(onChild).error?.hint).to.contain(`pipe budget ${parent.run_id} --add-tokens N`)

    const granted = await cli(['budget', parent.run_id, '--add-tokens', '60000', '--note', 'three items after all'])
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json<RunJson>(granted).status).to.equal('succeeded')
    // y and z ask what x asked: the redrive answers them from the store's reply cache, counted as recorded.
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['first', 'work', 'after'])
    const after = await readIn(path.join(dir, '.pipe'), (store) => store.listChildren(parent.run_id))
    expect(after.map((c) => c.status)).to.deep.equal(['succeeded', 'succeeded', 'succeeded'])
    const {run} = await runRecordIn(dir, parent.run_id)
    expect(run.budget_grants).to.have.length(1)
    expect(run.budget_grants![0]).to.include({scope: 'pipeline', tokens: 60000, note: 'three items after all'})
    // Counted once: five replies of 15,000, however the children paused and went on (pipe stats --json, read in this process).
    const stats = await statsIn(dir)
    const row = stats.runs.find((r) => r.run_id === parent.run_id)!
    expect(row.total_tokens).to.equal(75000)
    expect(row.budget?.pipeline, JSON.stringify(row.budget)).to.include({spent_tokens: 75000, granted_tokens: 60000})
    await expectAuditPasses(dir, parent.run_id)
  })

  it("siblings under way at once hold their estimates against the parent's budget: the request both together would pass is not sent", async () => {
    // Each request allows a 12,000-token completion: one fits the parent's 20,000, two at once do not.
    await writeFile(path.join(dir, 'p', 'named.md'), 'Name {{name}}.\n')
    await writeFile(
      path.join(dir, 'p', 'item.yaml'),
      `version: 1\nname: item\ninputs:\n  name: {type: string, required: true}\nsteps:\n` +
        `  - {id: work, kind: model, prompt: named.md, vars: {name: "\${{ inputs.name }}"}, output_schema: out.schema.json}\n`,
    )
    const file = await pipeline(
      'provider: {max_tokens: 12000}\nbudget: {tokens: 20000}\n',
      `  - {id: each, kind: foreach, items: "\${{ ['x', 'y'] }}", pipeline: ./item.yaml, with: {name: "\${{ item }}"}, concurrency: 2}\n`,
    )
    const small = {content: JSON.stringify({title: 'x'}), usage: {prompt_tokens: 3000, completion_tokens: 2000}}
    server.script('*', small, small)
    const release = server.holdReplies()
    // A process: its replies are held while the test watches it, and nothing but its timeout would stop it if the test failed before release().
    const running = cli(['run', file])
    const store = path.join(dir, '.pipe')
    await mkdir(path.join(store, 'runs'), {recursive: true})
    const pausedChild = async (): Promise<boolean> =>
      readIn(store, async (s) => {
        for (const id of await s.listRunIds()) {
          const r = await s.readRun(id).catch(() => undefined)
          if (r?.parent && r.status === 'awaiting_input' && r.pending?.kind === 'budget') return true
        }
        return false
      })
    // Whichever comes first: one request under way and its sibling paused at the budget (its request not sent), or both under way.
    const paused1 = changeIn(path.join(store, 'runs'), pausedChild, 'a child paused at the budget', running, true)
    paused1.catch(() => undefined)
    await Promise.race([Promise.all([paused1, server.waitForRequests(1)]), server.waitForRequests(2)])
    expect(server.requests, 'the second sibling sent its request while the first was under way').to.have.length(1)
    release()
    const result = await running
    const parent = json<RunJson>(result)
    expect(parent.status, result.stdout).to.equal('blocked')
    const children = await readIn(store, (s) => s.listChildren(parent.run_id))
    const paused = children.filter((c) => c.status === 'awaiting_input')
    expect(children.map((c) => c.status).sort()).to.deep.equal(['awaiting_input', 'succeeded'])
    expect(paused[0]!.pending?.reason).to.match(
      new RegExp(
        `would pass parent run ${parent.run_id}'s pipeline budget of 20000 tokens: \\d+ tokens spent so far, 1 other running step\\(s\\)' requests included; it was not sent`,
      ),
    )

    // The grant lets the paused sibling go on; what is recorded is what the replies said, nothing held.
    // (pipe budget and pipe stats --json in this process: the previous test grants a parent's budget by a process.)
    const granted = await here(['budget', parent.run_id, '--add-tokens', '20000', '--note', 'both items'])
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json<RunJson>(granted).status).to.equal('succeeded')
    expect(server.requests).to.have.length(2)
    const stats = await statsIn(dir)
    const row = stats.runs.find((r) => r.run_id === parent.run_id)!
    expect(row.total_tokens).to.equal(10000)
    expect(row.budget?.pipeline).to.include({spent_tokens: 10000})
    await expectAuditPasses(dir, parent.run_id)
  })

  it("a grant of a parent's budget its children paused at is a vote under approvals.budget: the starter may not grant it", async () => {
    await writeFile(path.join(dir, 'p', 'item.yaml'), `version: 1\nname: item\nsteps:\n${model('work')}`)
    const file = await pipeline(
      'budget: {tokens: 14000}\n',
      `  - {id: each, kind: foreach, items: "\${{ ['x', 'y'] }}", pipeline: ./item.yaml, concurrency: 1}\n`,
    )
    await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\napprovals:\n  budget: {from: [alice@example.com, starter@example.com], self_approval: false}\n')
    const as = (who: string, args: string[]): Promise<CliResult> =>
      pipe([...args, '--json'], {cwd: dir, env: {OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home'), PIPE_USER: who}})
    // The run in this process; the starter's refused vote is a process.
    const parent = json<RunJson>(await here(['run', file, '--policy', path.join(dir, 'policy.yaml')], 'starter@example.com'))
    expect(parent.status).to.equal('blocked')
    expect(server.requests).to.have.length(1)
    const self = await as('starter@example.com', ['budget', parent.run_id, '--add-tokens', '20000'])
    expect(json<RunJson>(self).error?.code, self.stdout).to.equal('E_POLICY_DENIED')
    expect(json<RunJson>(self).error?.message).to.contain("the policy's approvals.budget says self_approval: false")
    expect((await runRecordIn(dir, parent.run_id)).run.budget_grants ?? []).to.deep.equal([])
    // Alice's grant by pipe budget in this process, as she would give it.
    const granted = await here(['budget', parent.run_id, '--add-tokens', '20000'], 'alice@example.com')
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json<RunJson>(granted).status).to.equal('succeeded')
    expect((await runRecordIn(dir, parent.run_id)).run.budget_grants![0]).to.include({by: 'alice@example.com', tokens: 20000})
  })

  it("a child pipeline's model with no known price under its parent's cost budget is refused before its request, never counted as $0", async () => {
    // The parent's file names only a priced model, so validate passes it; the child's file names another.
    await writeFile(path.join(dir, 'p', 'item.yaml'), `version: 1\nname: item\nsteps:\n${model('work', undefined, ', model: local-7b')}`)
    const file = await pipeline('budget: {cost_usd: 1}\n', `  - {id: each, kind: foreach, items: "\${{ ['x'] }}", pipeline: ./item.yaml, concurrency: 1}\n`)
    // validate in this process; the refused run is a process.
    expect((await pipeHere(['validate', file], {cwd: dir})).code).to.equal(0)
    const result = await cli(['run', file])
    expect(result.code, result.stdout).to.not.equal(0)
    expect(json<RunJson>(result).status).to.not.equal('succeeded')
    expect(server.requests).to.have.length(0)
    const parent = json<RunJson>(result).run_id
    const [child] = await readIn(path.join(dir, '.pipe'), (store) => store.listChildren(parent))
    const {run} = await runRecordIn(dir, child!.run_id)
    expect(JSON.stringify(run)).to.contain('E_CONFIG').and.contain('asks model \\"local-7b\\", whose price in US dollars pipe does not know')
  })
})
