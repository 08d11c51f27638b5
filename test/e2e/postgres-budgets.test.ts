/**
 * Budgets on a PostgreSQL store driven by a worker: the worker pauses the detached run at its
 * budget, pipe budget on another process records the grant and hands the run back to the queue,
 * and the worker goes on with it, counting what was spent from the rows, not from its memory.
 */
import {expect} from 'chai'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe} from '../helpers/cli.js'
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

  const show = async <T>(runId: string): Promise<T> => json<T>(await pipe(['runs', 'show', runId, '--json', '--store', url], {cwd: dir}))
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
    const paused = await show<{run: {pending: {budget: {spent_tokens: number; limit_tokens: number}}}}>(runId)
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
})
