/**
 * Issue 40: what a gate's time does without anyone deciding — its deadline acts on whichever
 * command touches the run (pipe runs list too), and its reminder goes out once through a webhook
 * target of the policy. The clock is PIPE_NOW, moved past the time by the test: nothing waits.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {expectAuditPasses, readIn, runRecordIn} from '../helpers/stores.js'
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
  const events = (id: string): Promise<RunEvent[]> => readIn(path.join(dir, '.pipe'), (store) => store.readEvents(id))
  const start = async (policy: string): Promise<{id: string; since: string}> => {
    await writeFile(path.join(dir, 'policy.yaml'), policy)
    const started = await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--text', 'The tool shall print hello.', '--json'])
    expect(started.code, started.stderr).to.equal(10)
    const id = json<RunJson>(started).run_id
    return {id, since: (await runRecordIn(dir, id)).run.pending!.since}
  }

  it('pipe runs list applies a passed deadline (on_timeout: cancel), recorded as a decision by pipe naming the rule', async () => {
    const {id, since} = await start(`version: 1\napprovals:\n  manual_review: {from: [alice@example.com], timeout_s: 60, on_timeout: cancel}\n`)
    const early = await run(['runs', 'list', '--json'], {PIPE_NOW: after(since, 30)})
    expect(json<{runs: RunJson[]}>(early).runs.find((r) => r.run_id === id)?.status).to.equal('awaiting_input')

    const late = await run(['runs', 'list', '--json'], {PIPE_NOW: after(since, 61)})
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
    const listed = await run(['runs', 'list'], {PIPE_NOW: after(since, 3600)})
    expect(listed.code, listed.stderr).to.equal(0)
    expect((await runRecordIn(dir, id)).status).to.equal('cancelled')
    expect((await events(id)).find((e) => e.event === 'review_given')?.by).to.equal('policy (approvals.review.on_timeout)')
    const vote = await run(['review', id, '--decision', 'go', '--json'], {PIPE_USER: 'alice@example.com'})
    expect(vote.code).to.not.equal(0)
    expect(json<RunJson>(vote).error?.code).to.equal('E_STATE')
  })
})
