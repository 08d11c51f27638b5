/**
 * Issue 37 item 13: a confirmation's deadline acts. The policy's confirm.on_timeout says what a
 * passed deadline does — deny (as pipe confirm --no would, routed the same way), cancel, or wait
 * (the default: stays paused and says so) — and it happens without anyone answering: the next pipe
 * command that touches the run, or a pipe worker serving the store, applies it, recorded as the
 * policy's. No test waits for the clock: the commands after the pause run under Debian's libfaketime
 * two hours on, past the deadline, as processes (LD_PRELOAD), and so does the worker and the first
 * of each other command; the other runs that pause run in the test's process (pipeHere).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {confirmedPipeline, LATER, type RunJson} from '../helpers/decisions.js'
import {expectAuditPasses, readIn, runRecordIn, snapshotsIn} from '../helpers/stores.js'
import {needs} from '../helpers/tools.js'
import {until, useWorkerSuite, type WorkerSuite} from '../helpers/workers.js'
import type {RunEvent} from '../../src/types/run.js'

const ONE_STEP = confirmedPipeline('confirm-timeout')
const policy = (onTimeout?: string): string =>
  `version: 1\nallowed_commands:\n  - [node, -e, "..."]\nsandbox: off\nconfirm:\n  timeout_s: 60\n${onTimeout ? `  on_timeout: ${onTimeout}\n` : ''}`

function runId(result: CliResult): string {
  expect(result.code, result.stderr).to.equal(10)
  const out = json<RunJson>(result)
  expect(out.status).to.equal('awaiting_input')
  expect(out.pending?.deadline, 'the pause has a deadline').to.be.a('string')
  return out.run_id
}

describe('a confirmation deadline acts (CLI, file store)', function () {
  this.timeout(180000)
  let dir: string
  let cleanup: () => Promise<void>
  before(function () {
    needs(this, 'faketime')
  })
  beforeEach(async () => {
    ;({dir, cleanup} = await tempDir('pipe-confirm-timeout-'))
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
    await writeFile(path.join(dir, 'p.yaml'), ONE_STEP)
  })
  afterEach(async () => cleanup())

  const run = (args: string[], later = false): Promise<CliResult> =>
    pipe(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0', ...(later ? LATER : {})}, timeoutMs: 60000})
  /** `run` in this process, on the real clock (faketime is a process's). */
  const here = (args: string[]): Promise<CliResult> => pipeHere(args, {cwd: dir, env: {PIPE_INTERACTIVE: '0'}})
  const events = async (id: string): Promise<RunEvent[]> => readIn(path.join(dir, '.pipe'), (store) => store.readEvents(id))

  it('on_timeout: deny — runs show after the deadline refuses the step as pipe confirm --no would, recorded as the policy', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), policy('deny'))
    const id = runId(await run(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    expect((await runRecordIn(dir, id)).run.pending?.on_timeout).to.equal('deny')
    // Before the deadline nothing happens.
    const early = await run(['runs', 'show', id, '--json'])
    expect(json<{status: string}>(early).status).to.equal('awaiting_input')

    const shown = await run(['runs', 'show', id, '--json'], true)
    expect(shown.code, shown.stderr).to.equal(0)
    expect(json<{status: string}>(shown).status).to.equal('succeeded')
    expect(existsSync(path.join(dir, 'made.txt')), 'the refused command ran').to.equal(false)
    const [touch, end] = await snapshotsIn(dir, id)
    expect(touch!.decisions.at(-1)).to.include({decision: 'denied', next_step: 'refused'})
    expect((touch!.inputs as {confirmation?: {decision: string; by: string}}).confirmation).to.include({decision: 'no', by: 'policy (confirm.on_timeout)'})
    expect(end!.step.name).to.equal('refused')
    const timeline = await events(id)
    const passed = timeline.find((e) => e.event === 'confirm_deadline_passed')
    expect(passed?.by).to.equal('policy (confirm.on_timeout)')
    expect(passed?.reason).to.match(/^confirmation deadline passed at \S+; the policy's confirm.on_timeout: deny refused it$/)
    expect(timeline.find((e) => e.event === 'confirm_given')?.reason).to.contain('after its deadline')
    await expectAuditPasses(dir, id)
  })

  it('on_timeout: cancel — a late pipe confirm --yes is refused (E_STATE, saying the policy cancelled the run) and nothing runs', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), policy('cancel'))
    const id = runId(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    const late = await run(['confirm', id, '--yes', '--json'], true)
    expect(late.code, late.stdout).to.equal(2)
    const error = json<RunJson>(late).error!
    expect(error.code).to.equal('E_STATE')
    expect(error.message).to.match(/the policy's confirm.on_timeout: cancel cancelled the run \(the run is now cancelled\); this answer was not taken/)
    expect(error.hint).to.contain('confirm.timeout_s')
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
    const {run: record, status} = await runRecordIn(dir, id)
    expect(status).to.equal('cancelled')
    expect(record.status_reason).to.contain('by its deadline')
    const cancelled = (await events(id)).find((e) => e.event === 'cancelled' || (e as {status?: string}).status === 'cancelled')
    expect(JSON.stringify(cancelled)).to.contain('policy (confirm.on_timeout)')
    await expectAuditPasses(dir, id)
  })

  it('on_timeout: deny — pipe resume after the deadline applies it too', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), policy('deny'))
    const id = runId(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    const resumed = await run(['resume', id, '--json'], true)
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
  })

  it('the default (wait) keeps the run paused and says so; pipe confirm --yes still continues it', async () => {
    await writeFile(path.join(dir, 'policy.yaml'), policy())
    const id = runId(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    expect((await runRecordIn(dir, id)).run.pending?.on_timeout).to.equal(undefined)
    const shown = await run(['runs', 'show', id], true)
    expect(shown.code, shown.stderr).to.equal(0)
    expect(shown.stdout).to.match(/confirmation deadline passed at \S+; the run stays paused/)
    expect((await runRecordIn(dir, id)).status).to.equal('awaiting_input')
    const yes = await run(['confirm', id, '--yes', '--json'], true)
    expect(yes.code, yes.stderr).to.equal(0)
    expect(json<RunJson>(yes).status).to.equal('succeeded')
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(true)
  })
})

describe('a confirmation deadline acts (pipe worker, PostgreSQL store)', function () {
  this.timeout(180000)
  let suite: WorkerSuite
  const team = useWorkerSuite('pipe-confirm-timeout-pg-', (s) => (suite = s))
  before(function () {
    needs(this, 'faketime')
  })

  it('a worker serving the store applies passed deadlines of runs waiting for a person: deny goes on by the refusal, cancel cancels', async () => {
    const {dir, url} = suite
    execFileSync('git', ['init', '-q', '-b', 'main', dir])
    await writeFile(path.join(dir, 'p.yaml'), ONE_STEP)
    const paused: Record<string, string> = {}
    for (const action of ['deny', 'cancel']) {
      await writeFile(path.join(dir, `${action}.yaml`), policy(action))
      paused[action] = runId(
        await pipeHere(['run', 'p.yaml', '--policy', `${action}.yaml`, '--store', url, '--json'], {cwd: dir, env: {PIPE_INTERACTIVE: '0'}}),
      )
    }
    const worker = team.start(url, [], {cwd: dir, env: LATER})
    const statusOf = async (id: string): Promise<string> => (await readIn(url, (store) => store.readRun(id))).status
    await until(
      'the worker applied both deadlines',
      async () => (await statusOf(paused.deny!)) === 'succeeded' && (await statusOf(paused.cancel!)) === 'cancelled',
    )
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
    expect(worker.stderr()).to.match(/its confirmation deadline \S+ passed; confirm.on_timeout: deny -> succeeded/)
    const snapshots = await readIn(url, (store) => store.readSnapshots(paused.deny!))
    expect(snapshots[0]!.decisions.at(-1)).to.include({decision: 'denied', next_step: 'refused'})
    const timeline = await readIn(url, (store) => store.readEvents(paused.cancel!))
    expect(timeline.find((e) => e.event === 'confirm_deadline_passed')?.by).to.equal('policy (confirm.on_timeout)')
    const audit = await pipe(['audit', 'verify', '--json', '--store', url], {cwd: dir})
    expect(json<{problems: unknown[]}>(audit).problems).to.deep.equal([])
  })
})
