/**
 * Issue 40: what a gate's time does without anyone deciding — its deadline acts on whichever
 * command touches the run (pipe runs list too), and its reminder goes out once through a webhook
 * target of the policy. The clock is PIPE_NOW, moved past the time by the test: nothing waits.
 * The first of each command the file uses (run, runs list, review, runs show, policy check) runs as
 * a process, and so do the worker and the run it reminds on PostgreSQL; the rest run in the test's
 * process (pipeHere).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import {createServer, type IncomingHttpHeaders, type Server} from 'node:http'
import type {AddressInfo} from 'node:net'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses, readIn, runRecordIn} from '../helpers/stores.js'
import {until, useWorkerSuite, type WorkerSuite} from '../helpers/workers.js'
import type {RunEvent} from '../../src/types/run.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string; hint?: string}
}

const REVIEWED = `version: 1
name: reviewed
steps:
  - {id: ingest, kind: ingest, next: compile}
  - {id: compile, kind: compile, next: manual_review}
  - {id: manual_review, kind: review, next: done}
  - {id: done, kind: end, status: succeeded, reason: reviewed}
`

/** A webhook on 127.0.0.1 that keeps what it is sent and answers `status`. */
async function hook(status = 200): Promise<{url: string; got: Array<{headers: IncomingHttpHeaders; body: Record<string, unknown>}>; server: Server}> {
  const got: Array<{headers: IncomingHttpHeaders; body: Record<string, unknown>}> = []
  const server = createServer((req, res) => {
    let text = ''
    req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')))
    req.on('end', () => {
      got.push({headers: req.headers, body: JSON.parse(text) as Record<string, unknown>})
      res.writeHead(status, {'content-type': 'application/json'}).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got, server}
}

/** An ISO time `seconds` after `iso`. */
const after = (iso: string, seconds: number): string => new Date(new Date(iso).getTime() + seconds * 1000).toISOString()

describe('approvals: deadlines and reminders on the clock of PIPE_NOW', function () {
  this.timeout(180000)
  let dir: string
  let cleanup: () => Promise<void>
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-approvals-time-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
    execFileSync('git', ['-C', dir, 'config', 'user.email', 'starter@example.com'])
    await writeFile(path.join(dir, 'p.yaml'), REVIEWED)
  })
  afterEach(async () => cleanup())

  const run = (args: string[], env: Record<string, string> = {}): Promise<CliResult> =>
    pipe(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0', ...env}, timeoutMs: 60000})
  const here = (args: string[], env: Record<string, string> = {}): Promise<CliResult> => pipeHere(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0', ...env}})
  const events = (id: string): Promise<RunEvent[]> => readIn(path.join(dir, '.pipe'), (store) => store.readEvents(id))
  const start = async (policy: string, runner = here): Promise<{id: string; since: string}> => {
    await writeFile(path.join(dir, 'policy.yaml'), policy)
    const started = await runner(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--json'])
    expect(started.code, started.stderr).to.equal(10)
    const id = json<RunJson>(started).run_id
    return {id, since: (await runRecordIn(dir, id)).run.pending!.since}
  }

  it('pipe runs list applies a passed deadline (on_timeout: cancel), recorded as a decision by pipe naming the rule', async () => {
    const {id, since} = await start(`version: 1\napprovals:\n  manual_review: {from: [alice@example.com], timeout_s: 60, on_timeout: cancel}\n`, run)
    const early = await run(['runs', 'list', '--json'], {PIPE_NOW: after(since, 30)})
    expect(json<{runs: RunJson[]}>(early).runs.find((r) => r.run_id === id)?.status).to.equal('awaiting_input')

    const late = await here(['runs', 'list', '--json'], {PIPE_NOW: after(since, 61)})
    expect(late.code, late.stderr).to.equal(0)
    expect(json<{runs: RunJson[]}>(late).runs.find((r) => r.run_id === id)?.status).to.equal('cancelled')
    const timeline = await events(id)
    const passed = timeline.find((e) => e.event === 'review_deadline_passed')
    expect(passed?.by).to.equal('policy (approvals.manual_review.on_timeout)')
    expect(passed?.reason).to.contain("the policy's approvals.manual_review.on_timeout: cancel cancelled the run")
    expect((await runRecordIn(dir, id)).run.status_reason).to.contain("the policy's approvals.manual_review.on_timeout cancels the run")
    await expectAuditPasses(dir, id)
  })

  it('pipe runs list applies on_timeout: deny to a review: dropped as the rule decided, and a later vote is refused', async () => {
    const {id, since} = await start(`version: 1\napprovals:\n  review: {from: [alice@example.com], timeout_s: 60, on_timeout: deny}\n`)
    const listed = await here(['runs', 'list'], {PIPE_NOW: after(since, 3600)})
    expect(listed.code, listed.stderr).to.equal(0)
    expect((await runRecordIn(dir, id)).status).to.equal('cancelled')
    expect((await events(id)).find((e) => e.event === 'review_given')?.by).to.equal('policy (approvals.review.on_timeout)')
    const vote = await run(['review', id, '--decision', 'go', '--json'], {PIPE_USER: 'alice@example.com'})
    expect(vote.code).to.not.equal(0)
    expect(json<RunJson>(vote).error?.code).to.equal('E_STATE')
  })

  const REMINDED = `version: 1
approvals:
  manual_review: {required: 2, from: [alice@example.com, bob@example.com], remind_after_s: 600, remind_target: chat}
targets:
  chat: {type: webhook, format: json, url_env: REMIND_URL}
`

  it('a reminder goes through the policy target once, when remind_after_s passed, naming who may still vote', async () => {
    const target = await hook()
    try {
      const {id, since} = await start(REMINDED)
      expect((await here(['review', id, '--decision', 'go', '--json'], {PIPE_USER: 'alice@example.com'})).code).to.equal(10)
      const env = (seconds: number): Record<string, string> => ({PIPE_NOW: after(since, seconds), REMIND_URL: target.url})
      expect((await here(['runs', 'list'], env(300))).code).to.equal(0)
      expect(target.got).to.have.length(0)

      const listed = await here(['runs', 'list'], env(601))
      expect(listed.code, listed.stderr).to.equal(0)
      expect(target.got).to.have.length(1)
      const key = `${id}:manual_review:${since}:reminder`
      expect(target.got[0]!.headers['idempotency-key']).to.equal(key)
      expect(target.got[0]!.body).to.deep.include({
        event: 'approval.reminder',
        key,
        run_id: id,
        step: 'manual_review',
        gate: 'review',
        rule: 'manual_review',
        required: 2,
        voted: ['alice@example.com'],
        may_still_vote: ['bob@example.com'],
      })
      // Once: later commands that touch the run send nothing more.
      expect((await run(['runs', 'show', id], env(900))).code).to.equal(0)
      expect((await here(['runs', 'list'], env(1200))).code).to.equal(0)
      expect(target.got).to.have.length(1)
      const reminders = (await events(id)).filter((e) => e.event === 'reminder_sent')
      expect(reminders.map((e) => e.by)).to.deep.equal(['policy (approvals.manual_review.remind_after_s)'])
      expect(reminders[0]!.reason).to.contain("reminded bob@example.com through the policy's targets.chat")
      await expectAuditPasses(dir, id)
    } finally {
      target.server.close()
    }
  })

  it('a reminder the target refuses is recorded nowhere and goes out with the next command', async () => {
    const down = await hook(503)
    const up = await hook()
    try {
      const {id, since} = await start(REMINDED)
      expect((await here(['runs', 'list'], {PIPE_NOW: after(since, 700), REMIND_URL: down.url})).code).to.equal(0)
      expect(down.got).to.have.length(1)
      expect((await events(id)).some((e) => e.event === 'reminder_sent')).to.equal(false)
      expect((await here(['runs', 'show', id], {PIPE_NOW: after(since, 800), REMIND_URL: up.url})).code).to.equal(0)
      expect(up.got).to.have.length(1)
      expect(up.got[0]!.headers['idempotency-key']).to.equal(down.got[0]!.headers['idempotency-key'])
    } finally {
      down.server.close()
      up.server.close()
    }
  })

  it('policy check refuses a reminder without a target, a target the policy does not define, and one after the deadline', async () => {
    await writeFile(
      path.join(dir, 'policy.yaml'),
      `version: 1
approvals:
  review: {from: [alice@example.com], remind_after_s: 600}
  confirm: {from: [alice@example.com], remind_after_s: 600, remind_target: chta, timeout_s: 300}
targets:
  chat: {type: webhook, format: json, url_env: REMIND_URL}
`,
    )
    const result = await run(['policy', 'check', 'policy.yaml'])
    expect(result.code, result.stderr).to.equal(2)
    const out = result.stdout + result.stderr
    expect(out).to.contain('approvals.review.remind_after_s  remind_after_s: 600 needs remind_target')
    expect(out).to.contain('approvals.confirm.remind_target  "chta" names no target under targets: (its targets are chat)')
    expect(out).to.contain('approvals.confirm.remind_after_s  remind_after_s: 600 is not before timeout_s: 300')
  })
})

describe("approvals: a worker sends a gate's reminder on PostgreSQL", function () {
  this.timeout(180000)
  let suite: WorkerSuite
  const team = useWorkerSuite('pipe-remind-pg-', (s) => (suite = s))

  it('a run paused by one process is reminded by a worker serving the store, once', async () => {
    const target = await hook()
    try {
      execFileSync('git', ['init', '-q', '-b', 'main', suite.dir])
      execFileSync('git', ['-C', suite.dir, 'config', 'user.email', 'starter@example.com'])
      await writeFile(path.join(suite.dir, 'p.yaml'), REVIEWED)
      await writeFile(
        path.join(suite.dir, 'policy.yaml'),
        'version: 1\napprovals:\n  review: {from: [alice@example.com], remind_after_s: 600, remind_target: chat}\ntargets:\n  chat: {type: webhook, format: json, url_env: REMIND_URL}\n',
      )
      // The run is paused by a process of its own, as the test's title says, and reminded by the worker.
      const started = await pipe(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--store', suite.url, '--json'], {
        cwd: suite.dir,
        env: {PIPE_INTERACTIVE: '0'},
      })
      expect(started.code, started.stderr).to.equal(10)
      const id = json<RunJson>(started).run_id
      const since = (await readIn(suite.url, (store) => store.readRun(id))).pending!.since
      team.start(suite.url, [], {cwd: suite.dir, env: {PIPE_NOW: after(since, 601), REMIND_URL: target.url}})
      const reminded = async (): Promise<RunEvent[]> => (await readIn(suite.url, (store) => store.readEvents(id))).filter((e) => e.event === 'reminder_sent')
      await until('the worker recorded the reminder it sent', async () => (await reminded()).length === 1)
      expect(target.got).to.have.length(1)
      expect(target.got[0]!.body).to.deep.include({run_id: id, rule: 'review', may_still_vote: ['alice@example.com']})
      expect((await readIn(suite.url, (store) => store.readRun(id))).status).to.equal('awaiting_input')
    } finally {
      target.server.close()
    }
  })
})
