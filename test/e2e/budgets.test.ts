/**
 * Token and cost budgets (issue 40, items 4-5) on the built CLI, against a real chat-completions
 * server on 127.0.0.1 whose replies carry the usage that is counted. A foreach's children under
 * their parent's budget are budgets-foreach.test.ts's.
 *
 * A `pipe` process for the first of each command (the run that pauses, the first pipe budget: a
 * refusal printed and exited, pipe test, validate), the grants given while a run goes on and at once,
 * and the view; the other commands run in this process (test/helpers/pipe-here.ts: the same command
 * from argv, its output and exit code).
 */
import {expect} from 'chai'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses, madeOnce, readIn, runRecordIn, snapshotsIn} from '../helpers/stores.js'
import {ModelServer} from '../helpers/model-server.js'
import {raw, startView} from '../helpers/view.js'
import type {ChildProcess} from 'node:child_process'
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
/** `cli` in this process: `pipe ARGS --json` in the test's folder, with the same model server. */
const here = (args: string[], user?: string): Promise<CliResult> => pipeHere([...args, '--json'], {cwd: dir, env: env(user)})

/**
 * A run of a, b and c under a pipeline budget of 29,000 tokens, paused before c (a and b spent
 * 30,000), made once by a real `pipe run` against a server of its own, and copied into each test that
 * grants it (the copy's run reads its pipeline and prompt from the folder it was made in, which only
 * the made-once run wrote): what it printed, and the steps whose requests that server saw.
 */
const pausedBeforeC = madeOnce(async (made) => {
  await mkdir(path.join(made, 'p'), {recursive: true})
  await writeFile(path.join(made, 'p', 'prompt.md'), 'Name it.\n')
  await writeFile(path.join(made, 'p', 'out.schema.json'), JSON.stringify(SCHEMA))
  const file = path.join(made, 'p', 'p.yaml')
  await writeFile(file, `version: 1\nname: budgeted\nbudget: {tokens: 29000}\nsteps:\n${model('a', 'b') + model('b', 'c') + model('c')}`)
  const own = await ModelServer.start(() => REPLY)
  try {
    const first = await pipe(['run', file, '--json'], {cwd: made, env: {OPENAI_BASE_URL: own.url, PIPE_HOME: path.join(made, 'home')}})
    return {first, kinds: own.requests.map((r) => r.kind)}
  } finally {
    await own.close()
  }
})

describe('budgets: token and cost limits that pause and ask (a real model server)', function () {
  this.timeout(120000)

  it('pauses before the request that would pass the budget, says what was spent, and pipe budget records the grant and continues the run', async () => {
    const {first, kinds} = await pausedBeforeC(dir)
    expect(first.code, first.stderr).to.equal(10)
    const paused = json<RunJson>(first)
    expect(paused.status).to.equal('awaiting_input')
    expect(paused.pending?.kind).to.equal('budget')
    expect(paused.pending?.step).to.equal('c')
    expect(paused.pending?.budget).to.include({scope: 'pipeline', limit_tokens: 29000, spent_tokens: 30000})
    expect(paused.reason).to.match(
      /step c's next model request .* would pass the pipeline's budget of 29000 tokens: 30000 tokens spent so far; it was not sent/,
    )
    expect(paused.next_command).to.match(new RegExp(`^pipe budget ${paused.run_id} --add-tokens N`))
    // Never sent: the server saw a and b only.
    expect(kinds).to.deep.equal(['a', 'b'])
    // The run's page offers the same way out, not a review.
    const page = await here(['export', paused.run_id, '--html', 'paused.html'])
    expect(page.code, page.stderr).to.equal(0)
    expect(await readFile(path.join(dir, 'paused.html'), 'utf8')).to.match(new RegExp(`pipe budget ${paused.run_id} --add-tokens`))

    // A resume never resets the count: the spend is read from the records, and c is still not sent.
    const resumed = await here(['resume', paused.run_id])
    expect(resumed.code, resumed.stderr).to.equal(10)
    expect(json<RunJson>(resumed).pending?.budget).to.include({spent_tokens: 30000})
    expect(server.requests).to.have.length(0)

    // The paused budget counts tokens: dollars would raise nothing, and nothing is recorded.
    const wrong = await here(['budget', paused.run_id, '--add-usd', '1'])
    expect(wrong.code).to.not.equal(0)
    expect(json<RunJson>(wrong).error?.code, wrong.stdout).to.equal('E_INVALID_ARGS')

    // A grant that would take the limit past a whole number JSON can hold exactly is refused too
    // (a refusal as a process prints it and exits).
    const huge = await cli(['budget', paused.run_id, '--add-tokens', String(Number.MAX_SAFE_INTEGER)])
    expect(huge.code).to.equal(2)
    expect(huge.stderr).to.contain('E_INVALID_ARGS').and.contain('nothing was granted')

    const granted = await here(['budget', paused.run_id, '--add-tokens', '20000', '--note', 'worth it'])
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json<RunJson>(granted).status).to.equal('succeeded')
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['c'])
    const {run} = await runRecordIn(dir, paused.run_id)
    expect(run.budget_grants).to.have.length(1)
    expect(run.budget_grants![0]).to.include({scope: 'pipeline', tokens: 20000, note: 'worth it'})
    expect(run.budget_grants![0]!.by).to.be.a('string').and.not.equal('')

    // A grant on a run that is not paused at a budget is refused (E_STATE from a process: the next test).
    const late = await here(['budget', paused.run_id, '--add-tokens', '5'])
    expect(late.code).to.not.equal(0)
    expect(json<RunJson>(late).error?.code, late.stdout).to.equal('E_STATE')
    await expectAuditPasses(dir, paused.run_id)
  })

  it("a second grant while the first one's run goes on is refused with a clear error, and only the first is recorded", async () => {
    const made = await pausedBeforeC(dir)
    const paused = json<RunJson>(made.first)
    expect(paused.status).to.equal('awaiting_input')
    // The run spent a and b, and paused before c. The first grant continues it, which waits on the model's reply to c while the second grant comes.
    expect(made.kinds).to.deep.equal(['a', 'b'])
    const release = server.holdReplies()
    const first = cli(['budget', paused.run_id, '--add-tokens', '20000', '--note', 'first'])
    await server.waitForRequests(1)
    const second = await cli(['budget', paused.run_id, '--add-tokens', '30000', '--note', 'second'])
    release()
    const granted = await first
    // Seen running, it is refused before anything is recorded (under the lock it would be E_CONFLICT).
    expect(second.code, second.stderr).to.not.equal(0)
    expect(second.stderr).to.contain('E_STATE').and.not.contain('E_INTERNAL')
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json<RunJson>(granted).status).to.equal('succeeded')
    const {run} = await runRecordIn(dir, paused.run_id)
    expect(run.budget_grants?.map((g) => g.note)).to.deep.equal(['first'])
    await expectAuditPasses(dir, paused.run_id)
  })

  it('two grants given at once: one continues the run and is recorded, the other is refused (E_CONFLICT or E_STATE), never both', async () => {
    const paused = json<RunJson>((await pausedBeforeC(dir)).first)
    expect(paused.status).to.equal('awaiting_input')
    const results = await Promise.all(['one', 'two'].map((note) => cli(['budget', paused.run_id, '--add-tokens', '20000', '--note', note])))
    const won = results.filter((r) => r.code === 0)
    expect(won, results.map((r) => r.stderr).join('\n')).to.have.length(1)
    expect(json<RunJson>(won[0]!).status).to.equal('succeeded')
    const lost = results.find((r) => r.code !== 0)!
    expect(lost.stderr)
      .to.match(/E_CONFLICT|E_STATE/)
      .and.not.contain('E_INTERNAL')
    const {run} = await runRecordIn(dir, paused.run_id)
    expect(run.budget_grants).to.have.length(1)
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['c'])
    await expectAuditPasses(dir, paused.run_id)
  })

  it('a grant under approvals.budget is a vote: refused to people not in from and to the starter, raised only at the rule, with one amount', async () => {
    const file = await pipeline('budget: {tokens: 29000}\n', model('a', 'b') + model('b', 'c') + model('c'))
    await writeFile(
      path.join(dir, 'policy.yaml'),
      'version: 1\napprovals:\n  budget: {required: 2, from: ["@finance"], self_approval: false}\npeople:\n  finance: [alice@example.com, bob@example.com, starter@example.com]\n',
    )
    const as = (who: string, args: string[]): Promise<CliResult> => here(args, who)
    const refusal = (result: CliResult, code: string): string => {
      expect(result.code, result.stdout).to.not.equal(0)
      expect(json<RunJson>(result).error?.code, result.stdout).to.equal(code)
      return json<RunJson>(result).error!.message
    }
    // The run and the whole rule run in this process.
    const refusedHere = async (who: string, tokens: number, code: string): Promise<string> =>
      refusal(await here(['budget', id, '--add-tokens', String(tokens)], who), code)
    const started = await here(['run', file, '--policy', path.join(dir, 'policy.yaml')], 'starter@example.com')
    expect(started.code, started.stderr).to.equal(10)
    const id = json<RunJson>(started).run_id

    expect(refusal(await as('mallory@example.com', ['budget', id, '--add-tokens', '20000']), 'E_POLICY_DENIED')).to.contain(
      "mallory@example.com is not among the people the policy's approvals.budget names",
    )
    expect(await refusedHere('starter@example.com', 20000, 'E_POLICY_DENIED')).to.contain(
      'started run ' + id + ", and the policy's approvals.budget says self_approval: false",
    )
    const first = await as('alice@example.com', ['budget', id, '--add-tokens', '20000', '--note', 'worth it'])
    expect(first.code, first.stderr).to.equal(10)
    expect(json<RunJson>(first).reason).to.equal("1 of 2 approvals under the policy's approvals.budget; may still approve: bob@example.com")
    expect((await runRecordIn(dir, id)).run.budget_grants ?? []).to.deep.equal([])
    expect(await refusedHere('alice@example.com', 20000, 'E_POLICY_DENIED')).to.contain('has already voted')
    expect(await refusedHere('bob@example.com', 5, 'E_CONFLICT')).to.contain('alice@example.com approved "grant +20000 tokens"')
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['a', 'b'])

    const second = await here(['budget', id, '--add-tokens', '20000'], 'bob@example.com')
    expect(second.code, second.stderr).to.equal(0)
    expect(json<RunJson>(second).status).to.equal('succeeded')
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['a', 'b', 'c'])
    const {run} = await runRecordIn(dir, id)
    expect(run.budget_grants).to.have.length(1)
    expect(run.budget_grants![0]).to.include({scope: 'pipeline', tokens: 20000, by: 'bob@example.com'})
    const events = await readIn(path.join(dir, '.pipe'), (store) => store.readEvents(id))
    expect(events.filter((e) => e.event === 'vote_cast').map((e) => [e.by, e.decision])).to.deep.equal([
      ['alice@example.com', 'grant +20000 tokens'],
      ['bob@example.com', 'grant +20000 tokens'],
    ])
    await expectAuditPasses(dir, id)
  })

  it('on_exceed: fail ends the step with the outcome over_budget, which on: routes; unrouted it fails the run with E_BUDGET', async () => {
    const routed = await pipeline(
      '',
      model('a', 'c') +
        model('c', 'fin', ', budget: {tokens: 10, on_exceed: fail}, on: {over_budget: cheap}') +
        '  - {id: cheap, kind: end, status: succeeded, reason: the cheaper way}\n  - {id: fin, kind: noop}\n',
    )
    const result = await here(['run', routed])
    expect(result.code, result.stderr).to.equal(0)
    const body = json<RunJson>(result)
    expect(body.status).to.equal('succeeded')
    const snapshots = await snapshotsIn(dir, body.run_id)
    const c = snapshots.find((s) => s.step.name === 'c')!
    expect(c.decisions.at(-1)!.decision).to.equal('over_budget')
    expect(snapshots.map((s) => s.step.name)).to.deep.equal(['a', 'c', 'cheap'])
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['a'])

    const unrouted = await pipeline('', model('c', undefined, ', budget: {tokens: 10, on_exceed: fail}'), 'unrouted.yaml')
    const failed = await here(['run', unrouted])
    expect(failed.code).to.not.equal(0)
    expect(json<RunJson>(failed).error?.code).to.equal('E_BUDGET')
  })

  it("pipe test grants budgets as pipe budget does (budget: in a test), the cassette's replies counted as recorded", async () => {
    const steps = model('a', 'b') + model('b', 'c') + model('c')
    const recording = await pipeline('', steps, 'record.yaml')
    const recorded = await here(['run', recording, '--record', 'c.jsonl'])
    expect(recorded.code, recorded.stderr).to.equal(0)
    await pipeline('budget: {tokens: 29000}\n', steps)
    await writeFile(
      path.join(dir, 'p', 'budget.pipe-test.yaml'),
      [
        'version: 1',
        'pipeline: p.yaml',
        'cassette: ../c.jsonl',
        'tests:',
        '  - {name: granted, budget: [{add_tokens: 20000, note: worth it}], expect: {status: succeeded, outcomes: {c: success}}}',
        '  - {name: paused, expect: {status: awaiting_input, outcomes: {c: null}}}',
        '  - {name: granted twice, budget: [{add_tokens: 20000}, {add_tokens: 5}], expect: {status: succeeded}}',
        '',
      ].join('\n'),
    )
    const tested = await pipe(['test', path.join(dir, 'p', 'budget.pipe-test.yaml'), '--json'], {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home')}})
    const report = json<{tests: Array<{name: string; status: string; failures: Array<{kind: string; message: string}>}>}>(tested)
    const byName = Object.fromEntries(report.tests.map((t) => [t.name, t]))
    expect(byName['granted']!.status, JSON.stringify(byName['granted'])).to.equal('passed')
    expect(byName['paused']!.status, JSON.stringify(byName['paused'])).to.equal('passed')
    expect(byName['granted twice']!.status).to.equal('failed')
    expect(byName['granted twice']!.failures.map((f) => f.kind)).to.deep.equal(['budget'])
  })

  it('pipe validate refuses a negative budget, and a cost budget with no price known for the model in use', async () => {
    const negative = await pipeline('budget: {tokens: -1}\n', model('a'), 'negative.yaml')
    const unpriced = await pipeline('provider: {model: local-7b}\nbudget: {cost_usd: 1}\n', model('a'), 'unpriced.yaml')
    const priced = await pipeline(
      'provider: {model: local-7b, prices: {prompt_per_1k: 0.001, completion_per_1k: 0.002}}\nbudget: {cost_usd: 1}\n',
      model('a'),
      'priced.yaml',
    )
    // The default model is priced by pipe's shipped defaults.
    const known = await pipeline('budget: {cost_usd: 1}\n', model('a'), 'known.yaml')
    // One pipe validate judges each file on its own (the exit code is 0 only when every file is valid).
    const checked = await pipe(['validate', negative, unpriced, priced, known, '--json'], {cwd: dir})
    expect(checked.code, checked.stdout + checked.stderr).to.not.equal(0)
    const files = json<{files: Array<{file: string; valid: boolean; diagnostics: Array<{message: string; path?: string}>}>}>(checked).files
    const verdict = (file: string): {valid: boolean; said: string} => {
      const found = files.find((f) => path.resolve(dir, f.file) === file)
      expect(found, `${file} in ${checked.stdout}`).to.not.equal(undefined)
      return {valid: found!.valid, said: JSON.stringify(found!.diagnostics)}
    }
    expect(verdict(negative).valid).to.equal(false)
    expect(verdict(negative).said).to.match(/budget\.tokens|must be >= 0/)
    expect(verdict(unpriced).valid).to.equal(false)
    expect(verdict(unpriced).said).to.contain('cost_usd needs the price of model \\"local-7b\\"')
    expect(verdict(priced), 'a cost budget with the model priced in the pipeline').to.deep.equal({valid: true, said: '[]'})
    expect(verdict(known), "the default model, priced by pipe's shipped defaults").to.deep.equal({valid: true, said: '[]'})
  })

  it('a cost budget pauses on dollars at the default price of the model in use', async () => {
    // gpt-4o-mini: $0.00015 per 1k prompt tokens, $0.0006 per 1k completion tokens: each reply costs $0.0045.
    const file = await pipeline('budget: {cost_usd: 0.004}\n', model('a', 'b') + model('b'))
    const result = await here(['run', file])
    expect(result.code, result.stderr).to.equal(10)
    const paused = json<RunJson & {pending: {budget: {spent_usd: number; limit_usd: number}}}>(result)
    expect(paused.pending.budget).to.include({scope: 'pipeline', spent_usd: 0.0045, limit_usd: 0.004})
    const granted = await here(['budget', paused.run_id, '--add-usd', '0.01'])
    expect(granted.code, granted.stderr).to.equal(0)
    expect(json<RunJson>(granted).status).to.equal('succeeded')
    expect(server.requests.map((r) => r.kind)).to.deep.equal(['a', 'b'])
  })

  it("budget messages quote amounts as written (whole tokens, dollars to the cent or to the places the budget gave), in pipe stats and the view's stats page too", async () => {
    // A dollar a reply: 10,000 prompt tokens at $0.05 and 5,000 completion tokens at $0.10 per 1,000.
    const file = await pipeline(
      'provider: {prices: {prompt_per_1k: 0.05, completion_per_1k: 0.10}}\nbudget: {cost_usd: 1.50}\n',
      model('a', 'b') + model('b', 'c') + model('c'),
    )
    const result = await here(['run', file])
    expect(result.code, result.stderr).to.equal(10)
    const paused = json<RunJson>(result)
    expect(paused.reason).to.match(/would pass the pipeline's budget of \$1\.50: 30000 tokens \(\$2\.00\) spent so far; it was not sent$/)
    const granted = await here(['budget', paused.run_id, '--add-usd', '1.5', '--note', 'one more'])
    expect(granted.code, granted.stderr).to.equal(0)
    const events = await readIn(path.join(dir, '.pipe'), (store) => store.readEvents(paused.run_id))
    expect(events.find((e) => e.event === 'budget_granted')?.reason).to.equal("$1.50 more for the pipeline's budget: one more")
    const stats = await pipeHere(['stats'], {cwd: dir, env: {NO_COLOR: '1', COLUMNS: '400'}})
    expect(stats.code, stats.stderr).to.equal(0)
    expect(stats.stdout).to.contain('$3.00/$3.00')
    // The view's stats page says the same, per pipeline and per run.
    const servers: ChildProcess[] = []
    try {
      const {url} = await startView(dir, servers)
      const page = await raw(`${url}stats`)
      expect(page.status).to.equal(200)
      const table = /<h3>Spend against budget<\/h3>([^]*?)<\/table>\s*<table[^>]*>([^]*?)<\/table>/.exec(page.body)
      expect(table?.[1]).to.contain('<code>budgeted</code>').and.contain('45000 tokens, $3.00')
      expect(table?.[2]).to.contain(paused.run_id).and.contain('pipeline budgeted').and.contain('$3.00/$3.00')
    } finally {
      for (const server of servers) server.kill('SIGKILL')
    }
  })
})
