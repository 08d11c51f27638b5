/**
 * Budgets on a PostgreSQL store driven by a worker: the worker pauses the detached run at its
 * budget, pipe budget on another process records the grant and hands the run back to the queue,
 * and the worker goes on with it, counting what was spent from the rows, not from its memory.
 *
 * The workers, and the first `run`, `runs show`, `budget`, `audit verify`, `stats` and `resume`, are
 * `pipe` processes; the other commands run in this process (test/helpers/pipe-here.ts: the same
 * command, output and exit code).
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {ModelServer} from '../helpers/model-server.js'
import {until, useWorkerSuite} from '../helpers/workers.js'
import type {Cluster} from '../helpers/postgres.js'

const REPLY = {content: JSON.stringify({title: 'x'}), usage: {prompt_tokens: 10000, completion_tokens: 5000}}

describe('budgets on a PostgreSQL store with a worker', function () {
  this.timeout(180000)
  let cluster: Cluster
  let dir: string
  let db: string
  let url: string
  let server: ModelServer
  const team = useWorkerSuite('pipe-pg-budget-', (suite) => ({cluster, dir, db, url} = suite))

  beforeEach(async () => {
    server = await ModelServer.start(() => REPLY)
  })
  afterEach(async () => server.close())

  /** `pipe runs show RUN --json`, in this process or (`command` pipe) as a process. */
  const show = async <T>(runId: string, command: typeof pipeHere = pipeHere): Promise<T> =>
    json<T>(await command(['runs', 'show', runId, '--json', '--store', url], {cwd: dir}))
  const queued = async (runId: string): Promise<boolean> =>
    (await cluster.sql<{n: number}>(db, 'SELECT count(*)::int AS n FROM pipe_queue WHERE run_id = $1', [runId]))[0]!.n === 1

  it('a worker pauses the run at its budget; pipe budget records the grant, queues it, and the worker finishes it', async () => {
    await mkdir(path.join(dir, 'p'), {recursive: true})
    await writeFile(path.join(dir, 'p', 'prompt.md'), 'Name it.\n')
    await writeFile(path.join(dir, 'p', 'out.schema.json'), JSON.stringify({type: 'object', required: ['title'], properties: {title: {type: 'string'}}}))
    const step = (id: string, next?: string): string =>
      `  - {id: ${id}, kind: model, prompt: prompt.md, output_schema: out.schema.json${next ? `, next: ${next}` : ''}}\n`
    const file = path.join(dir, 'p', 'p.yaml')
    await writeFile(file, `version: 1\nname: budgeted\nbudget: {tokens: 29000}\nsteps:\n${step('a', 'b')}${step('b', 'c')}${step('c')}`)
    const env = {OPENAI_BASE_URL: server.url}

    const detached = await pipe(['run', file, '--detach', '--store', url, '--json'], {cwd: dir, env})
    expect(detached.code, detached.stderr).to.equal(0)
    const runId = json<{run_id: string}>(detached).run_id
    team.start(url, [], {cwd: dir, env: {PIPE_INTERACTIVE: '0', ...env}})
    await until('the worker paused the run at its budget', async () => {
      const run = await show<{status: string; run: {pending?: {kind: string}}}>(runId)
      return run.status === 'awaiting_input' && run.run.pending?.kind === 'budget' && !(await queued(runId))
    })
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['a', 'b'])
    const paused = await show<{run: {pending: {budget: {spent_tokens: number; limit_tokens: number}}}}>(runId, pipe)
    expect(paused.run.pending.budget).to.include({spent_tokens: 30000, limit_tokens: 29000})

    const granted = await pipe(['budget', runId, '--add-tokens', '20000', '--note', 'worth it', '--store', url, '--json'], {cwd: dir, env})
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json(granted)).to.deep.include({run_id: runId, status: 'queued'})
    await until('the worker finished the run', async () => (await show<{status: string}>(runId)).status === 'succeeded' && !(await queued(runId)))
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['a', 'b', 'c'])

    const record = await show<{run: {budget_grants?: Array<{scope: string; tokens: number; note: string}>}}>(runId)
    expect(record.run.budget_grants).to.have.length(1)
    expect(record.run.budget_grants![0]).to.include({scope: 'pipeline', tokens: 20000, note: 'worth it'})
    const events = await cluster.sql<{line: string}>(db, 'SELECT line FROM pipe_events WHERE run_id = $1 ORDER BY n', [runId])
    expect(events.map((e) => (JSON.parse(e.line) as {event: string}).event)).to.include('budget_granted')
    const audit = await pipe(['audit', 'verify', runId, '--json', '--store', url], {cwd: dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
  })

  /** A parent whose foreach runs item.yaml for x and y side by side; each request allows a 12,000-token completion: one fits the parent's 20,000, two at once do not. */
  const fan = async (): Promise<string> => {
    await mkdir(path.join(dir, 'p'), {recursive: true})
    await writeFile(path.join(dir, 'p', 'named.md'), 'Name {{name}}.\n')
    await writeFile(path.join(dir, 'p', 'out.schema.json'), JSON.stringify({type: 'object', required: ['title'], properties: {title: {type: 'string'}}}))
    await writeFile(
      path.join(dir, 'p', 'item.yaml'),
      `version: 1\nname: item\nprovider: {max_tokens: 12000}\ninputs:\n  name: {type: string, required: true}\nsteps:\n` +
        `  - {id: work, kind: model, prompt: named.md, vars: {name: "\${{ inputs.name }}"}, output_schema: out.schema.json}\n`,
    )
    const file = path.join(dir, 'p', 'fan.yaml')
    await writeFile(
      file,
      `version: 1\nname: fan\nprovider: {max_tokens: 12000}\nbudget: {tokens: 20000}\nsteps:\n` +
        `  - {id: each, kind: foreach, items: "\${{ ['x', 'y'] }}", pipeline: ./item.yaml, with: {name: "\${{ item }}"}, concurrency: 2}\n`,
    )
    return file
  }

  it("foreach children driven by two workers hold against their parent's budget: the request that would pass it with a sibling's under way is not sent, and pipe budget PARENT continues them", async () => {
    const file = await fan()
    const small = {content: JSON.stringify({title: 'x'}), usage: {prompt_tokens: 3000, completion_tokens: 2000}}
    server.script('*', small, small)
    const release = server.holdReplies()
    const env = {OPENAI_BASE_URL: server.url}
    const detached = await pipeHere(['run', file, '--detach', '--store', url, '--json'], {cwd: dir, env})
    expect(detached.code, detached.stderr).to.equal(0)
    const parent = json<{run_id: string}>(detached).run_id
    const workerEnv = {PIPE_INTERACTIVE: '0', ...env}
    team.start(url, [], {cwd: dir, env: workerEnv})
    team.start(url, [], {cwd: dir, env: workerEnv})

    type Child = {run_id: string; status: string; pending?: {kind: string; reason: string; budget?: {run_id?: string}}}
    const children = async (): Promise<Child[]> =>
      (await cluster.sql<{body: string}>(db, 'SELECT body FROM pipe_runs WHERE parent_run = $1 ORDER BY run_id', [parent])).map(
        (r) => JSON.parse(r.body) as Child,
      )
    const pausedAtBudget = async (): Promise<boolean> => (await children()).some((c) => c.status === 'awaiting_input' && c.pending?.kind === 'budget')
    // Whichever comes first: one request under way and a sibling paused at the parent's budget, or two under way.
    await until(
      'a request under way and a sibling paused at the budget, or two requests under way',
      async () => server.requests.length >= 2 || (server.requests.length === 1 && (await pausedAtBudget())),
    )
    expect(server.requests, 'a sibling on another worker sent its request while the first was under way').to.have.length(1)
    const waiting = (await children()).find((c) => c.status === 'awaiting_input')!
    expect(waiting.pending?.budget?.run_id).to.equal(parent)
    expect(waiting.pending?.reason).to.contain(`would pass parent run ${parent}'s pipeline budget of 20000 tokens`)
    release()
    await until(
      'the parent stopped blocked at its children',
      async () => (await show<{status: string}>(parent)).status === 'blocked' && !(await queued(parent)),
    )
    expect(server.requests).to.have.length(1)

    // The budget is the parent's: the child's refusal names the command that continues both.
    const onChild = await pipeHere(['budget', waiting.run_id, '--add-tokens', '5', '--store', url, '--json'], {cwd: dir, env})
    const hint = json<{error: {code: string; hint: string}}>(onChild).error
    expect(hint.code).to.equal('E_STATE')
    expect(hint.hint).to.contain(`pipe budget ${parent} --add-tokens N`)
    const granted = await pipeHere(['budget', parent, '--add-tokens', '20000', '--note', 'both', '--store', url, '--json'], {cwd: dir, env})
    expect(granted.code, granted.stderr).to.equal(0)
    await until('the worker finished the parent', async () => (await show<{status: string}>(parent)).status === 'succeeded' && !(await queued(parent)))
    expect((await children()).map((c) => c.status)).to.deep.equal(['succeeded', 'succeeded'])
    expect(server.requests).to.have.length(2)
    // What is recorded is what the replies said; nothing a hold kept outlives its run.
    const stats = json<{runs: Array<{run_id: string; total_tokens: number}>}>(await pipe(['stats', '--store', url, '--json'], {cwd: dir}))
    expect(stats.runs.find((r) => r.run_id === parent)!.total_tokens).to.equal(10000)
    expect(await cluster.sql(db, 'SELECT run_id FROM pipe_budget_holds')).to.deep.equal([])
    const audit = await pipeHere(['audit', 'verify', parent, '--json', '--store', url], {cwd: dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
  })

  it("a worker that dies with a request under way leaves no hold that counts: once its lease is out, the paused sibling's request is sent", async () => {
    const file = await fan()
    const release = server.holdReplies()
    const env = {OPENAI_BASE_URL: server.url}
    const detached = await pipeHere(['run', file, '--detach', '--store', url, '--json'], {cwd: dir, env})
    const parent = json<{run_id: string}>(detached).run_id
    // A lease far longer than the test: it runs out only when the test runs it out, never by the clock of a busy machine.
    const doomed = team.start(url, ['--concurrency', '2'], {cwd: dir, env: {PIPE_INTERACTIVE: '0', PIPE_LEASE_MS: '3600000', ...env}})
    const paused = async (): Promise<string | undefined> =>
      (
        await cluster.sql<{run_id: string}>(
          db,
          "SELECT run_id FROM pipe_runs WHERE parent_run = $1 AND body::jsonb->>'status' = 'awaiting_input' AND body::jsonb->'pending'->>'kind' = 'budget'",
          [parent],
        )
      )[0]?.run_id
    await until('one request under way and its sibling paused at the budget', async () => server.requests.length === 1 && (await paused()) !== undefined)
    const sibling = (await paused())!
    expect(await cluster.sql(db, 'SELECT run_id FROM pipe_budget_holds')).to.have.length(1)

    // The worker dies with the request under way: its hold row stays, and counts while its lease does.
    doomed.child.kill('SIGKILL')
    await doomed.exited
    release()
    const held = await pipe(['resume', sibling, '--store', url, '--json'], {cwd: dir, env})
    expect(json<{status: string}>(held).status, held.stdout).to.equal('awaiting_input')
    expect(server.requests).to.have.length(1)

    // Its lease run out (what the clock does once nobody renews it): the dead worker's hold counts no longer.
    await cluster.sql(db, 'UPDATE pipe_runs SET lease_until = now() WHERE lease_until IS NOT NULL')
    server.script('*', {content: JSON.stringify({title: 'y'}), usage: {prompt_tokens: 3000, completion_tokens: 2000}})
    const resumed = await pipeHere(['resume', sibling, '--store', url, '--json'], {cwd: dir, env})
    expect(json<{status: string}>(resumed).status, resumed.stdout + resumed.stderr).to.equal('succeeded')
    expect(server.requests).to.have.length(2)
  })
})
