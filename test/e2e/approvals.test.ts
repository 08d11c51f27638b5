/**
 * Issue 40 items 1-3: who may decide at a gate. Rules in policy.yaml checked in one pass; a person
 * is PIPE_USER, else the repository's git user.email (real git), else the OS user; pipe review,
 * confirm and answer refuse whom the rule does not allow, record each vote, and open the gate once
 * at `required` approvals, also when two people vote at the same moment; a gate's deadline acts
 * for a review as for a confirmation. No test waits for the clock: the commands after a pause run
 * under libfaketime two hours on.
 *
 * Most commands run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its output
 * and exit code). A real `pipe` process stays for what only a process does (libfaketime preloaded,
 * two votes at the same moment, PostgreSQL's workers) and, in each test, for the command the test is
 * about (`spawned`).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {confirmedPipeline, LATER, votersOf, type RunJson} from '../helpers/decisions.js'
import {expectAuditPasses, readIn, runRecordIn} from '../helpers/stores.js'
import {needs} from '../helpers/tools.js'
import {until, useWorkerSuite, type WorkerSuite} from '../helpers/workers.js'
import type {RunEvent} from '../../src/types/run.js'

const REVIEWED = `version: 1
name: reviewed
steps:
  - {id: ingest, kind: ingest, next: compile}
  - {id: compile, kind: compile, next: manual_review}
  - {id: manual_review, kind: review, next: done}
  - {id: done, kind: end, status: succeeded, reason: reviewed}
`
const TWO_OF_THREE = `version: 1
approvals:
  manual_review: {required: 2, from: [alice@example.com, "@release"], self_approval: false}
people:
  release: [bob@example.com, starter@example.com]
`

const CONFIRMED = confirmedPipeline('confirmed')
const RELEASE_CONFIRMS = `version: 1
allowed_commands:
  - [node, -e, "..."]
sandbox: off
approvals:
  confirm: {required: 1, from: ["@release"], timeout_s: 3600, on_timeout: deny}
people:
  release: [alice@example.com, dave@example.com]
`

describe('approvals: who may decide at a gate (CLI, file store, real git)', function () {
  this.timeout(180000)
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-approvals-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
    // The starter is who the repository's git says, not an environment variable.
    execFileSync('git', ['-C', dir, 'config', 'user.email', 'starter@example.com'])
    await writeFile(path.join(dir, 'p.yaml'), REVIEWED)
  })
  afterEach(async () => cleanup())

  const envOf = (as?: string, extra: Record<string, string> = {}): Record<string, string> => ({
    PIPE_INTERACTIVE: '0',
    ...(as ? {PIPE_USER: as} : {}),
    ...extra,
  })
  /** `pipe ARGS` as PIPE_USER `as`, in this process. */
  const run = (args: string[], as?: string): Promise<CliResult> => pipeHere(args, {cwd: dir, env: envOf(as)})
  /** The same as a `pipe` process; `later`: its clock two hours on (libfaketime, preloaded: only a process). */
  const spawned = (args: string[], as?: string, later = false): Promise<CliResult> =>
    pipe(args, {cwd: dir, env: envOf(as, later ? LATER : {}), timeoutMs: 60000})
  const events = (id: string): Promise<RunEvent[]> => readIn(path.join(dir, '.pipe'), (store) => store.readEvents(id))
  const start = async (policy: string): Promise<string> => {
    await writeFile(path.join(dir, 'policy.yaml'), policy)
    const started = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--json'])
    expect(started.code, started.stderr).to.equal(10)
    return json<RunJson>(started).run_id
  }
  const refused = (result: CliResult, code: string): string => {
    expect(result.code, result.stdout).to.not.equal(0)
    const error = json<RunJson>(result).error!
    expect(error.code).to.equal(code)
    return error.message
  }

  it('policy check and validate list every approvals error in one pass, quoting the bad values', async () => {
    await writeFile(
      path.join(dir, 'policy.yaml'),
      `version: 1
approvals:
  manual_review: {required: 4, from: [alice@example.com, "@release"]}
  confirm: {required: -1, from: ["@nobody"], timeout_s: -5, on_timeout: deny}
people:
  release: [bob@example.com]
`,
    )
    // policy check as a process, validate in this process.
    for (const [index, args] of [
      ['policy', 'check', 'policy.yaml'],
      ['validate', 'policy.yaml'],
    ].entries()) {
      const result = index === 0 ? await spawned(args) : await run(args)
      expect(result.code, result.stderr).to.equal(2)
      const out = result.stdout + result.stderr
      expect(out).to.contain('approvals.manual_review.required  required: 4 is more than the 2 distinct people from names')
      expect(out).to.contain('approvals.confirm.from[0]  "@nobody" names no group under people: (its groups are @release)')
      expect(out).to.contain('approvals.confirm.required  required: -1 must be at least 1')
      expect(out).to.contain('approvals.confirm.timeout_s  timeout_s: -5 must be more than 0 seconds')
      expect(out).to.not.contain('E_INTERNAL')
    }
  })

  it('refuses a person not in from, the starter (self_approval: false) and a second vote; the gate opens at two approvals', async () => {
    const id = await start(TWO_OF_THREE)
    expect((await runRecordIn(dir, id)).run.started_by?.id).to.equal('starter@example.com')

    // The refusal as a process (its exit code and error), the rest in this process.
    expect(refused(await spawned(['review', id, '--decision', 'go', '--json']), 'E_POLICY_DENIED')).to.match(
      /^starter@example.com started run R-\S+, and the policy's approvals.manual_review says self_approval: false/,
    )
    expect(refused(await run(['review', id, '--decision', 'go', '--json'], 'mallory@example.com'), 'E_POLICY_DENIED')).to.contain(
      "mallory@example.com is not among the people the policy's approvals.manual_review names",
    )
    const first = await run(['review', id, '--decision', 'go', '--note', 'looks right', '--json'], 'alice@example.com')
    expect(first.code, first.stderr).to.equal(10)
    expect(json<RunJson>(first).reason).to.equal("1 of 2 approvals under the policy's approvals.manual_review; may still approve: bob@example.com")
    expect(refused(await run(['review', id, '--decision', 'go', '--json'], 'alice@example.com'), 'E_POLICY_DENIED')).to.contain(
      'alice@example.com has already voted at this gate',
    )
    const shown = await run(['runs', 'show', id])
    expect(shown.stdout).to.match(
      /approvals: 1 of 2 under the policy's approvals.manual_review; voted: alice@example.com go at \S+; may still approve: bob@example.com/,
    )
    const page = await run(['export', id, '--html', '-'])
    expect(page.stdout).to.match(/Voted under the policy's <code>approvals.manual_review<\/code>: alice@example.com go at /)

    const second = await run(['review', id, '--decision', 'go', '--json'], 'bob@example.com')
    expect(second.code, second.stderr).to.equal(0)
    expect(json<RunJson>(second).status).to.equal('succeeded')
    const timeline = await events(id)
    const votes = timeline.filter((e) => e.event === 'vote_cast')
    expect(votes.map((v) => [v.by, v.decision])).to.deep.equal([
      ['alice@example.com', 'go'],
      ['bob@example.com', 'go'],
    ])
    expect(votes[0]!.reason).to.match(/note: looks right; shown sha256:[0-9a-f]{64}$/)
    expect(timeline.filter((e) => e.event === 'review_given').map((e) => e.by)).to.deep.equal(['bob@example.com'])
    // A vote on a run that moved on.
    expect(refused(await run(['review', id, '--decision', 'go', '--json'], 'starter@example.com'), 'E_STATE')).to.contain('is not waiting for')
    await expectAuditPasses(dir, id)
  })

  it('pipe resume --decision and pipe run --decision cannot decide a gate under a rule: only votes open it', async () => {
    const id = await start(TWO_OF_THREE)
    // The first refusal as a process.
    for (const decision of ['go', 'drop']) {
      const resume = decision === 'go' ? spawned : run
      expect(refused(await resume(['resume', id, '--decision', decision, '--json']), 'E_POLICY_DENIED')).to.contain(
        "under the policy's approvals.manual_review",
      )
    }
    const record = await runRecordIn(dir, id)
    expect(record.status).to.equal('awaiting_input')
    expect(record.run.review).to.equal(undefined)
    expect((await events(id)).filter((e) => e.event === 'review_given' || e.event === 'vote_cast')).to.deep.equal([])
    // The hint's command continues the run once the rule is met.
    expect((await run(['review', id, '--decision', 'go', '--json'], 'alice@example.com')).code).to.equal(10)
    expect(json<RunJson>(await run(['review', id, '--decision', 'go', '--json'], 'bob@example.com')).status).to.equal('succeeded')

    const started = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--decision', 'go', '--json'])
    expect(refused(started, 'E_POLICY_DENIED')).to.contain("the policy's approvals.manual_review says who decides it")
    const page = await readIn(path.join(dir, '.pipe'), (store) => store.listRuns({}))
    expect(page.runs.map((r) => r.run_id)).to.deep.equal([id])
  })

  it('a replay is a new run under the same rule: --decision is refused, and whoever replays it is its starter', async () => {
    const id = await start(TWO_OF_THREE)
    const decided = await spawned(['replay', id, '--from', 'compile', '--decision', 'go', '--json'], 'alice@example.com')
    expect(refused(decided, 'E_POLICY_DENIED')).to.contain("the policy's approvals.manual_review says who decides it")
    const replayed = await run(['replay', id, '--from', 'compile', '--json'], 'alice@example.com')
    expect(replayed.code, replayed.stderr).to.equal(10)
    const copy = json<RunJson>(replayed).run_id
    expect((await runRecordIn(dir, copy)).run.started_by?.id).to.equal('alice@example.com')
    expect(refused(await run(['review', copy, '--decision', 'go', '--json'], 'alice@example.com'), 'E_POLICY_DENIED')).to.contain(
      'alice@example.com started run',
    )
  })

  it('pipe run --answers and pipe replay --answers cannot answer a gate under an answers rule: only votes (pipe answer) do', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), 'version: 1\napprovals:\n  answers: {from: [alice@example.com]}\n')
    await writeFile(
      path.join(dir, 'a.yaml'),
      `answers:\n${['acceptance_criteria', 'non_functional', 'constraints'].map((f) => `  ${f}: An answer about ${f}.\n`).join('')}`,
    )
    const begin = ['run', defaultPipeline, '--input', path.join(examples, 'one-sentence.txt'), '--policy', 'policy.yaml']
    // Even from a person the rule names: answers given before the run asks are nobody's vote.
    const given = await spawned([...begin, '--answers', 'a.yaml', '--json'], 'alice@example.com')
    expect(refused(given, 'E_POLICY_DENIED')).to.equal(
      "--answers would answer the questions of step apply_answers before anyone votes, but the policy's approvals.answers says who decides it (1 of: alice@example.com); nothing was started",
    )
    expect(json<RunJson>(given).error!.hint).to.contain('pipe answer RUN --file FILE')
    expect(existsSync(path.join(dir, '.pipe', 'runs')), 'no run was created').to.equal(false)

    const paused = await run([...begin, '--json'], 'alice@example.com')
    expect(paused.code, paused.stderr).to.equal(10)
    const id = json<RunJson>(paused).run_id
    expect(refused(await run(['replay', id, '--from', 'compile', '--answers', 'a.yaml', '--json'], 'alice@example.com'), 'E_POLICY_DENIED')).to.contain(
      "the policy's approvals.answers says who decides it",
    )
    expect(refused(await run(['answer', id, '--file', 'a.yaml', '--json'], 'mallory@example.com'), 'E_POLICY_DENIED')).to.contain(
      "mallory@example.com is not among the people the policy's approvals.answers names",
    )
    const answered = await run(['answer', id, '--file', 'a.yaml', '--json'], 'alice@example.com')
    expect(answered.code, answered.stderr).to.equal(10)
    expect((await events(id)).filter((e) => e.event === 'vote_cast').map((e) => [e.by, e.decision])).to.deep.equal([['alice@example.com', 'answered']])
    expect((await runRecordIn(dir, id)).run.pending?.kind).to.equal('review')
  })

  it('the approval that met the rule but could not continue the run (a secret unset) continues it when given again', async () => {
    await writeFile(path.join(dir, 'p.yaml'), REVIEWED.replace('name: reviewed\n', 'name: reviewed\nsecrets: [TOK]\n'))
    await writeFile(path.join(dir, 'policy.yaml'), TWO_OF_THREE)
    const as = (who: string, env: Record<string, string> = {}) => ({cwd: dir, env: envOf(who, env)})
    const started = await pipeHere(
      ['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--json'],
      as('starter@example.com', {TOK: 't'}),
    )
    const id = json<RunJson>(started).run_id
    expect((await pipeHere(['review', id, '--decision', 'go', '--json'], as('alice@example.com'))).code).to.equal(10)
    // The approval that cannot continue the run, as a process.
    expect(refused(await pipe(['review', id, '--decision', 'go', '--json'], {...as('bob@example.com'), timeoutMs: 60000}), 'E_CONFIG')).to.contain('TOK')
    const again = await pipeHere(['review', id, '--decision', 'go', '--json'], as('bob@example.com', {TOK: 't'}))
    expect(again.code, again.stdout).to.equal(0)
    expect(json<RunJson>(again).status).to.equal('succeeded')
    expect((await events(id)).filter((e) => e.event === 'vote_cast').map((e) => e.by)).to.deep.equal(['alice@example.com', 'bob@example.com'])
    await expectAuditPasses(dir, id)
  })

  it('validate --policy warns of a rule keyed by no step of the pipeline nor a gate kind (a misspelt step id governs nothing)', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), TWO_OF_THREE.replace('manual_review:', 'manual_reveiw:'))
    const result = await spawned(['validate', 'p.yaml', '--policy', 'policy.yaml'])
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stdout).to.contain(
      'approvals.manual_reveiw names no step of pipeline reviewed (its steps are ingest, compile, manual_review, done) nor a gate kind (review, confirm, answers, budget), so it governs none of its gates',
    )
    await writeFile(path.join(dir, 'policy.yaml'), TWO_OF_THREE)
    expect((await run(['validate', 'p.yaml', '--policy', 'policy.yaml'])).stdout).to.not.contain('names no step')
  })

  it('a refusal decides at once; the starter may refuse their own run', async () => {
    const id = await start(TWO_OF_THREE)
    const drop = await spawned(['review', id, '--decision', 'drop', '--json'])
    expect(drop.code, drop.stderr).to.not.equal(10)
    expect((await runRecordIn(dir, id)).status).to.equal('cancelled')
    expect((await events(id)).find((e) => e.event === 'vote_cast')?.by).to.equal('starter@example.com')
  })

  it('two people voting at the same moment: both votes recorded, the gate opens once', async () => {
    const id = await start(TWO_OF_THREE)
    // Two processes at once (pipeHere runs one command at a time).
    const [a, b] = await Promise.all([
      spawned(['review', id, '--decision', 'go', '--json'], 'alice@example.com'),
      spawned(['review', id, '--decision', 'go', '--json'], 'bob@example.com'),
    ])
    expect([a.code, b.code].sort(), a.stderr + b.stderr).to.deep.equal([0, 10])
    expect((await runRecordIn(dir, id)).status).to.equal('succeeded')
    const timeline = await events(id)
    expect(votersOf(timeline)).to.deep.equal(['alice@example.com', 'bob@example.com'])
    expect(timeline.filter((e) => e.event === 'review_given')).to.have.length(1)
    expect(timeline.filter((e) => e.event === 'resumed')).to.have.length(1)
    await expectAuditPasses(dir, id)
  })

  it('a confirmation under a group rule: a person outside the group is refused, one in it confirms', async () => {
    await writeFile(path.join(dir, 'c.yaml'), CONFIRMED)
    await writeFile(path.join(dir, 'policy.yaml'), RELEASE_CONFIRMS)
    const started = await run(['run', 'c.yaml', '--policy', 'policy.yaml', '--json'])
    expect(started.code, started.stderr).to.equal(10)
    const id = json<RunJson>(started).run_id
    expect(refused(await spawned(['confirm', id, '--yes', '--json'], 'mallory@example.com'), 'E_POLICY_DENIED')).to.contain(
      "mallory@example.com is not among the people the policy's approvals.confirm names (from: alice@example.com, dave@example.com)",
    )
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
    const yes = await run(['confirm', id, '--yes', '--json'], 'dave@example.com')
    expect(yes.code, yes.stderr).to.equal(0)
    expect(json<RunJson>(yes).status).to.equal('succeeded')
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(true)
    expect((await events(id)).find((e) => e.event === 'confirm_given')?.by).to.equal('dave@example.com')
  })

  describe('deadlines', function () {
    before(function () {
      needs(this, 'faketime')
    })

    it("a confirmation's deadline under its approvals rule (on_timeout: deny) refuses the step, recorded as the rule", async () => {
      await writeFile(path.join(dir, 'c.yaml'), CONFIRMED)
      await writeFile(path.join(dir, 'policy.yaml'), RELEASE_CONFIRMS)
      const started = await run(['run', 'c.yaml', '--policy', 'policy.yaml', '--json'])
      expect(started.code, started.stderr).to.equal(10)
      const id = json<RunJson>(started).run_id
      const shown = await spawned(['runs', 'show', id, '--json'], undefined, true)
      expect(json<RunJson>(shown).status, shown.stderr).to.equal('succeeded')
      expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
      const timeline = await events(id)
      expect(timeline.find((e) => e.event === 'confirm_deadline_passed')?.by).to.equal('policy (approvals.confirm.on_timeout)')
      expect(timeline.find((e) => e.event === 'confirm_given')?.by).to.equal('policy (approvals.confirm.on_timeout)')
    })

    it("a review's deadline (on_timeout: deny) drops it when the next command touches the run, recorded as the rule that fired", async () => {
      const id = await start(`version: 1\napprovals:\n  review: {from: [alice@example.com], timeout_s: 60, on_timeout: deny}\n`)
      expect((await runRecordIn(dir, id)).run.pending).to.include({rule: 'review', on_timeout: 'deny'})
      const early = await run(['runs', 'show', id, '--json'])
      expect(json<RunJson & {run: {status: string}}>(early).status).to.equal('awaiting_input')
      const late = await spawned(['review', id, '--decision', 'go', '--json'], 'alice@example.com', true)
      expect(refused(late, 'E_STATE')).to.contain("the policy's approvals.review.on_timeout: deny refused the step")
      expect(json<RunJson>(late).error!.hint).to.contain('approvals.review.timeout_s')
      expect((await runRecordIn(dir, id)).status).to.equal('cancelled')
      const timeline = await events(id)
      expect(timeline.find((e) => e.event === 'review_deadline_passed')?.by).to.equal('policy (approvals.review.on_timeout)')
      expect(timeline.find((e) => e.event === 'review_given')?.by).to.equal('policy (approvals.review.on_timeout)')
      expect(timeline.some((e) => e.event === 'vote_cast')).to.equal(false)
      await expectAuditPasses(dir, id)
    })
  })
})

describe('approvals on PostgreSQL with workers', function () {
  this.timeout(180000)
  let suite: WorkerSuite
  const team = useWorkerSuite('pipe-approvals-pg-', (s) => (suite = s))

  const setUp = async (policy: string): Promise<void> => {
    execFileSync('git', ['init', '-q', '-b', 'main', suite.dir])
    execFileSync('git', ['-C', suite.dir, 'config', 'user.email', 'starter@example.com'])
    await writeFile(path.join(suite.dir, 'p.yaml'), REVIEWED)
    await writeFile(path.join(suite.dir, 'policy.yaml'), policy)
  }
  const statusOf = async (id: string): Promise<string> => (await readIn(suite.url, (store) => store.readRun(id))).status
  const vote = (id: string, as: string): Promise<CliResult> =>
    pipe(['review', id, '--decision', 'go', '--store', suite.url, '--json'], {cwd: suite.dir, env: {PIPE_INTERACTIVE: '0', PIPE_USER: as}})

  it('two people vote at once on a run a worker holds: both recorded, the gate opens once, the worker goes on', async () => {
    await setUp(TWO_OF_THREE)
    team.start(suite.url, [], {cwd: suite.dir})
    // Queued in this process; the worker and the two votes at once are processes.
    const started = await pipeHere(
      ['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--detach', '--store', suite.url, '--json'],
      {
        cwd: suite.dir,
        env: {PIPE_INTERACTIVE: '0'},
      },
    )
    expect(started.code, started.stderr).to.equal(0)
    const id = json<RunJson>(started).run_id
    await until('the worker paused the run at its review', async () => (await statusOf(id)) === 'awaiting_input')
    const [a, b] = await Promise.all([vote(id, 'alice@example.com'), vote(id, 'bob@example.com')])
    expect([a.code, b.code].sort(), a.stderr + b.stderr).to.deep.equal([0, 10])
    await until('the worker finished the run', async () => (await statusOf(id)) === 'succeeded')
    const timeline = await readIn(suite.url, (store) => store.readEvents(id))
    expect(votersOf(timeline)).to.deep.equal(['alice@example.com', 'bob@example.com'])
    expect(timeline.filter((e) => e.event === 'review_given')).to.have.length(1)
    const audit = await pipeHere(['audit', 'verify', '--json', '--store', suite.url], {cwd: suite.dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
  })

  it("a worker applies a review's passed deadline (on_timeout: cancel), recorded as the rule that fired", async function () {
    needs(this, 'faketime')
    await setUp(`version: 1\napprovals:\n  manual_review: {from: [alice@example.com], timeout_s: 60, on_timeout: cancel}\n`)
    const started = await pipeHere(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--store', suite.url, '--json'], {
      cwd: suite.dir,
      env: {PIPE_INTERACTIVE: '0'},
    })
    expect(started.code, started.stderr).to.equal(10)
    const id = json<RunJson>(started).run_id
    const worker = team.start(suite.url, [], {cwd: suite.dir, env: LATER})
    // The worker says so after its commit: wait for what it says, then for the record.
    await until('the worker said it applied the deadline', async () =>
      /its review deadline \S+ passed; approvals.manual_review.on_timeout: cancel -> cancelled/.test(worker.stderr()),
    )
    expect(await statusOf(id)).to.equal('cancelled')
    const timeline = await readIn(suite.url, (store) => store.readEvents(id))
    expect(timeline.find((e) => e.event === 'review_deadline_passed')?.by).to.equal('policy (approvals.manual_review.on_timeout)')
  })
})
