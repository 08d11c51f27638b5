import {expect} from 'chai'
import {cp, mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type {RunEvent, RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {examples, json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses, ledgerIn, snapshotsIn, storeIn} from '../helpers/stores.js'
import {cannedReply, ModelServer} from '../helpers/model-server.js'
import {WebhookServer} from '../helpers/webhook-server.js'

interface RunJson {
  run_id: string
  status: string
  next_command?: string
  error?: {code: string; message: string; hint?: string; step?: string}
}

const prd = path.join(examples, 'full-prd.md')
const user = os.userInfo().username

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-redrive-'))
  await cp(path.join(repoRoot, 'pipelines'), path.join(dir, 'pipelines'), {recursive: true})
})
afterEach(async () => cleanup())

// A `pipe` process (`cli`) for the file's first use of each command as a process: the first redrive,
// runs show, policy check, a run (the blocked run's hint) and publish; every other command runs in
// this process (`here`, test/helpers/pipe-here.ts: the same command, output and exit code).
function cli(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipe(args, {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home'), PIPE_INTERACTIVE: '0', ...env}})
}

/** `cli(args, env)` in this process. */
function here(args: string[], env: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipeHere(args, {cwd: dir, env: {PIPE_HOME: path.join(dir, 'home'), PIPE_INTERACTIVE: '0', ...env}})
}

/** What `pipe snapshot show RUN --json` prints, read in-process (the tests here are about resume). */
function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(dir, runId)
}

/** The snapshot files as bytes, to show that a redrive leaves every earlier one as it was. */
async function snapshotFiles(runId: string): Promise<Map<string, string>> {
  const at = path.join(dir, '.pipe', 'runs', runId, 'snapshots')
  const files = (await readdir(at)).filter((f) => f.endsWith('.json')).sort()
  return new Map(await Promise.all(files.map(async (f) => [f, await readFile(path.join(at, f), 'utf8')] as [string, string])))
}

/** The run record and its events, as `pipe runs show RUN --json` gives them, read in-process. */
async function runShow(runId: string): Promise<{run: RunRecord; events: RunEvent[]}> {
  const store = await storeIn(dir)
  try {
    return {run: await store.readRun(runId), events: await store.readEvents(runId)}
  } finally {
    await store.close?.()
  }
}

function policy(commands: string): string {
  return `version: 1\nallowed_commands:\n${commands}forbidden_paths: [".git/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 30000}\n`
}

async function expectUnchanged(before: Map<string, string>, runId: string): Promise<void> {
  const after = await snapshotFiles(runId)
  for (const [file, content] of before) expect(after.get(file), `${file} is unchanged`).to.equal(content)
}

describe('redrive: pipe resume on a failed or blocked run', function () {
  this.timeout(120000)

  it('redrives a run that failed at a model step while the endpoint was down, once it is back (a real HTTP server)', async () => {
    const first = await ModelServer.start(cannedReply)
    const port = Number(new URL(first.url).port)
    await first.close()
    const env = {OPENAI_BASE_URL: first.url, OPENAI_API_KEY: 'sk-test-redrive-0000000000000000'}
    const failed = await here(['run', 'pipelines/default.yaml', '--input', prd, '--decision', 'go', '--provider', 'openai', '--json'], env)
    expect(failed.code, failed.stderr).to.equal(1)
    const body = json<RunJson>(failed)
    expect(body.status).to.equal('failed')
    expect(body.error?.step).to.equal('compile')
    expect(body.next_command, 'a failed run says how to redrive it').to.equal(`pipe resume ${body.run_id}`)
    const before = await snapshotFiles(body.run_id)
    expect((await snapshots(body.run_id)).map((s) => s.step.name)).to.deep.equal(['ingest', 'compile'])

    const server = await ModelServer.start(cannedReply, port)
    try {
      const resumed = await cli(['resume', body.run_id, '--json'], env)
      expect(resumed.code, resumed.stderr).to.equal(0)
      expect(json<RunJson>(resumed).status).to.equal('succeeded')
      expect(server.count('compile')).to.equal(1)
    } finally {
      await server.close()
    }
    await expectUnchanged(before, body.run_id)
    const list = await snapshots(body.run_id)
    expect(list.map((s) => [s.step.seq, s.step.name])).to.deep.equal([
      [1, 'ingest'],
      [2, 'compile'],
      [3, 'compile'],
      [4, 'validate_gates'],
      [5, 'plan_tasks'],
      [6, 'generate_vv'],
      [7, 'manual_review'],
      [8, 'publish'],
    ])
    expect(list[1]!.decisions.at(-1)).to.include({run_status: 'failed', next_step: null})
    expect(list[2]!.meta.prev_hash, 'the hash chain goes on from the failed snapshot').to.equal(list[1]!.meta.record_hash)
    expect(list[2]!.step.iteration, 'a redrive is the same iteration, a new attempt').to.equal(list[1]!.step.iteration)
    const {run, events} = await runShow(body.run_id)
    expect(run.status).to.equal('succeeded')
    expect(run.error).to.equal(undefined)
    expect(run.redrives).to.have.length(1)
    expect(run.redrives![0]).to.include({seq: 2, step: 'compile', from: 'failed', by: user, policy_version: run.policy_version})
    const redriven = events.filter((e) => e.event === 'redriven')
    expect(redriven).to.have.length(1)
    expect(redriven[0]).to.include({from: 'failed', to: 'running', step: 'compile', seq: 2, by: user})
    expect(events.map((e) => e.event).filter((e) => ['failed', 'redriven', 'succeeded'].includes(e))).to.deep.equal(['failed', 'redriven', 'succeeded'])
    expect((await cli(['runs', 'show', body.run_id])).stdout).to.match(new RegExp(`redriven \\(failed -> running\\) step compile by ${user}`))
    await expectAuditPasses(dir, body.run_id)
    const again = await here(['resume', body.run_id], env)
    expect(again.code).to.equal(2)
    expect(again.stderr).to.contain('has ended (succeeded) and cannot be resumed')
  })

  it('redrives a command the policy denied under a corrected policy, and again without one', async () => {
    const pipeline = path.join(dir, 'cmd.yaml')
    await writeFile(
      pipeline,
      'version: 1\nname: cmd\nsteps:\n  - {id: prepare, kind: noop, next: say}\n  - {id: say, kind: command, run: [echo, hello], max_iterations: 1, next: done}\n  - {id: done, kind: noop}\n',
    )
    const strict = path.join(dir, 'strict.yaml')
    const open = path.join(dir, 'open.yaml')
    await writeFile(strict, policy('  - [node, --check]\n'))
    await writeFile(open, policy('  - [node, --check]\n  - [echo, "..."]\n'))
    const denied = await here(['run', pipeline, '--policy', strict, '--json'])
    expect(denied.code, denied.stderr).to.equal(3)
    const body = json<RunJson>(denied)
    expect(body).to.include({status: 'failed'})
    expect(body.error?.code).to.equal('E_POLICY_DENIED')
    const strictVersion = (await runShow(body.run_id)).run.policy_version

    // Nothing changed: the step runs again, is denied again, and leaves a snapshot of its own.
    const same = await here(['resume', body.run_id, '--json'])
    expect(same.code, same.stderr).to.equal(3)
    expect(json<RunJson>(same).status).to.equal('failed')
    expect((await snapshots(body.run_id)).map((s) => [s.step.seq, s.step.name, s.step.iteration])).to.deep.equal([
      [1, 'prepare', 1],
      [2, 'say', 1],
      [3, 'say', 1],
    ])

    // The policy file edited in place is not taken silently.
    await writeFile(strict, policy('  - [node, --check]\n  - [echo, hello]\n'))
    const silent = await here(['resume', body.run_id])
    expect(silent.code).to.equal(4)
    expect(silent.stderr).to.contain('the policy changed since run').and.contain(`pipe resume ${body.run_id} --policy ${strict}`)
    const before = await snapshotFiles(body.run_id)

    const fixed = await here(['resume', body.run_id, '--policy', open, '--json'])
    expect(fixed.code, fixed.stderr).to.equal(0)
    expect(json<RunJson>(fixed).status).to.equal('succeeded')
    await expectUnchanged(before, body.run_id)
    const list = await snapshots(body.run_id)
    expect(list.map((s) => [s.step.seq, s.step.name, s.step.iteration])).to.deep.equal([
      [1, 'prepare', 1],
      [2, 'say', 1],
      [3, 'say', 1],
      [4, 'say', 1],
      [5, 'done', 1],
    ])
    const openVersion = json<{policy_version: string}>(await cli(['policy', 'check', open, '--json'])).policy_version
    expect(list[3]!.meta.policy_version).to.equal(openVersion)
    expect(list[2]!.meta.policy_version).to.equal(strictVersion)
    expect((list[3]!.outputs as {command: {stdout: {head: string}}}).command.stdout.head).to.equal('hello\n')
    const {run, events} = await runShow(body.run_id)
    expect(run.policy_version).to.equal(openVersion)
    expect(run.policy_path).to.equal(open)
    expect(run.redrives!.map((r) => [r.seq, r.step, r.from, r.policy_version, r.previous_policy_version])).to.deep.equal([
      [2, 'say', 'failed', strictVersion, undefined],
      [3, 'say', 'failed', openVersion, strictVersion],
    ])
    const redriven = events.filter((e) => e.event === 'redriven')
    expect(redriven.map((e) => [e.seq, e.by, e.policy_version])).to.deep.equal([
      [2, user, undefined],
      [3, user, openVersion],
    ])
    await expectAuditPasses(dir, body.run_id)
  })

  it('refuses to redrive a run that failed on a loop bound, and a changed policy for a run that did not fail', async () => {
    const loop = path.join(dir, 'loop.yaml')
    await writeFile(loop, 'version: 1\nname: loop\nsteps:\n  - {id: again, kind: noop, max_iterations: 2, next: again}\n')
    const failed = await here(['run', loop, '--json'])
    expect(failed.code, failed.stderr).to.equal(1)
    const body = json<RunJson>(failed)
    expect(body.error?.code).to.equal('E_LOOP_LIMIT')
    expect(body.next_command, 'no redrive is offered').to.equal(undefined)
    const before = await snapshotFiles(body.run_id)
    const shown = await runShow(body.run_id)
    const refused = await here(['resume', body.run_id])
    expect(refused.code).to.equal(2)
    expect(refused.stderr).to.contain(`Error [E_STATE]: run ${body.run_id} failed before step again ran (E_LOOP_LIMIT:`)
    expect(refused.stderr).to.contain(`pipe replay ${body.run_id} --from STEP`)
    await expectUnchanged(before, body.run_id)
    expect(await runShow(body.run_id)).to.deep.equal(shown)

    const paused = json<RunJson>(await here(['run', 'pipelines/default.yaml', '--input', prd, '--json']))
    expect(paused.status).to.equal('awaiting_input')
    const other = path.join(dir, 'other.yaml')
    await writeFile(other, policy('  - [echo, "..."]\n'))
    const changed = await here(['resume', paused.run_id, '--policy', other, '--decision', 'go'])
    expect(changed.code).to.equal(2)
    expect(changed.stderr).to.contain('its policy changes only when a person redrives it')
  })

  it('resumes a run blocked at an end after a routed failure: the failed command runs again, and passing, the run succeeds', async () => {
    const pipeline = path.join(dir, 'build.yaml')
    await writeFile(
      pipeline,
      'version: 1\nname: build\nsteps:\n  - {id: build, kind: command, run: [node, check.js], on: {failure: wait}}\n  - {id: wait, kind: end, status: blocked, reason: "the build fails: fix check.js"}\n',
    )
    await writeFile(path.join(dir, 'check.js'), 'process.exit(1)\n')
    const open = path.join(dir, 'open.yaml')
    await writeFile(open, policy('  - [node, check.js]\n'))
    const blocked = await cli(['run', pipeline, '--policy', open, '--json'])
    expect(blocked.code, blocked.stderr).to.equal(6)
    const body = json<RunJson>(blocked)
    expect(body.status).to.equal('blocked')
    expect(body.next_command).to.equal(`pipe resume ${body.run_id}`)
    // The hint says what resume does, and names the command once.
    expect(body.error?.hint).to.equal(
      `Fix what made step build fail (pipe snapshot show ${body.run_id} --step build shows it); resuming runs build again and goes on from its outcome. Then continue it with: pipe resume ${body.run_id}`,
    )
    expect(blocked.stderr.split(`pipe resume ${body.run_id}`)).to.have.length(2)

    // Resumed with the cause still there: build fails again and the run is blocked again at wait.
    const still = await here(['resume', body.run_id, '--json'])
    expect(still.code, still.stderr).to.equal(6)
    expect(json<RunJson>(still).status).to.equal('blocked')

    await writeFile(path.join(dir, 'check.js'), 'process.exit(0)\n')
    const before = await snapshotFiles(body.run_id)
    const resumed = await here(['resume', body.run_id, '--json'])
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    await expectUnchanged(before, body.run_id)
    const list = await snapshots(body.run_id)
    expect(
      list.map((s) => [s.step.seq, s.step.name, s.decisions.at(-1)!.decision, s.decisions.at(-1)!.next_step, s.decisions.at(-1)!.by ?? null]),
    ).to.deep.equal([
      [1, 'build', 'failure', 'wait', null],
      [2, 'wait', 'blocked', 'wait', null],
      [3, 'wait', 'resumed', 'build', user],
      [4, 'build', 'failure', 'wait', null],
      [5, 'wait', 'blocked', 'wait', null],
      [6, 'wait', 'resumed', 'build', user],
      [7, 'build', 'success', null, null],
    ])
    const {run} = await runShow(body.run_id)
    expect(run.status).to.equal('succeeded')
    expect(run.error).to.equal(undefined)
    await expectAuditPasses(dir, body.run_id)
  })

  it('resumes a run blocked at an end nothing failed before: it ends succeeded, as the hint says', async () => {
    const pipeline = path.join(dir, 'gate.yaml')
    await writeFile(
      pipeline,
      'version: 1\nname: gate\nsteps:\n  - {id: prepare, kind: noop, next: wait}\n  - {id: wait, kind: end, status: blocked, reason: "sign the release off"}\n',
    )
    const blocked = await here(['run', pipeline, '--json'])
    expect(blocked.code, blocked.stderr).to.equal(6)
    const body = json<RunJson>(blocked)
    expect(body.error?.hint).to.equal(`Deal with it; resuming ends the run succeeded. Then continue it with: pipe resume ${body.run_id}`)
    const resumed = await here(['resume', body.run_id, '--json'])
    expect(resumed.code, resumed.stderr).to.equal(0)
    expect(json<RunJson>(resumed).status).to.equal('succeeded')
    expect((await snapshots(body.run_id)).map((s) => [s.step.name, s.decisions.at(-1)!.decision])).to.deep.equal([
      ['prepare', 'success'],
      ['wait', 'blocked'],
      ['wait', 'resumed'],
    ])
  })

  it('redrives a model step whose replies broke its output schema by asking the model again, not the reply cache (a real HTTP server)', async () => {
    await mkdir(path.join(dir, 'prompts'))
    await writeFile(path.join(dir, 'prompts', 'title.md'), 'A title for: {{topic}}\n')
    await writeFile(
      path.join(dir, 'title.schema.json'),
      JSON.stringify({type: 'object', additionalProperties: false, required: ['title'], properties: {title: {type: 'string'}}}),
    )
    const pipeline = path.join(dir, 'title.yaml')
    await writeFile(
      pipeline,
      'version: 1\nname: title\nsteps:\n  - {id: draft, kind: model, prompt: prompts/title.md, vars: {topic: CSV export}, output_schema: title.schema.json, max_repairs: 1}\n',
    )
    // The first replies break the schema (a number, then a missing field); later ones are valid.
    const server = await ModelServer.start(() => ({content: JSON.stringify({title: 'CSV export'})}))
    server.script('draft', {content: JSON.stringify({title: 7})}, {content: JSON.stringify({name: 'CSV export'})})
    try {
      const env = {OPENAI_BASE_URL: server.url}
      const failed = await here(['run', pipeline, '--provider', 'openai', '--json'], env)
      expect(failed.code, failed.stderr).to.equal(1)
      const body = json<RunJson>(failed)
      expect(body.error?.code).to.equal('E_MODEL')
      expect(body.next_command).to.equal(`pipe resume ${body.run_id}`)
      expect(server.count('draft')).to.equal(2)

      const resumed = await here(['resume', body.run_id, '--json'], env)
      expect(resumed.code, resumed.stderr).to.equal(0)
      expect(json<RunJson>(resumed).status).to.equal('succeeded')
      expect(server.count('draft'), 'the first request is asked again, not answered by its rejected reply').to.equal(3)
      const list = await snapshots(body.run_id)
      expect(list.map((s) => [s.step.seq, s.step.name, s.decisions.at(-1)!.decision])).to.deep.equal([
        [1, 'draft', 'error'],
        [2, 'draft', 'success'],
      ])
      expect(list[1]!.outputs).to.deep.include({value: {title: 'CSV export'}})
      expect(list[1]!.meta.model_calls?.map((c) => c.source)).to.deep.equal(['live'])
      await expectAuditPasses(dir, body.run_id)
    } finally {
      await server.close()
    }
  })

  it('leaves a run blocked, not failed, when a webhook refuses after the go, and publishes once on resume (a real HTTP server)', async () => {
    const hook = await WebhookServer.start()
    try {
      const text = (await readFile(path.join(dir, 'pipelines', 'default.yaml'), 'utf8')).replace(
        '      - {name: local, type: file, dir: published}\n',
        '      - {name: local, type: file, dir: published}\n      - {name: ci, type: webhook, format: json, url_env: CI_HOOK}\n',
      )
      const pipeline = path.join(dir, 'pipelines', 'hook.yaml')
      await writeFile(pipeline, text)
      hook.reply({status: 400, body: {error: 'channel archived'}})
      const env = {CI_HOOK: `${hook.url}/ci`}
      const blocked = await here(['run', pipeline, '--input', prd, '--decision', 'go', '--json'], env)
      expect(blocked.code, blocked.stderr).to.equal(6)
      const body = json<RunJson>(blocked)
      expect(body.status).to.equal('blocked')
      expect(body.error?.message).to.contain('refused the delivery (400)').and.contain('channel archived')
      expect(body.error?.hint).to.contain(`pipe resume ${body.run_id}`)
      expect(body.error?.hint, 'the hint names the command once').not.to.contain('Then continue it with')
      expect(body.next_command).to.equal(`pipe resume ${body.run_id}`)
      expect(hook.deliveries()).to.have.length(0)
      const before = await snapshotFiles(body.run_id)

      const resumed = await here(['resume', body.run_id, '--json'], env)
      expect(resumed.code, resumed.stderr).to.equal(0)
      expect(json<RunJson>(resumed).status).to.equal('succeeded')
      expect(hook.deliveries('/ci')).to.have.length(1)
      await expectUnchanged(before, body.run_id)
      const list = await snapshots(body.run_id)
      expect(list.slice(-2).map((s) => [s.step.name, s.decisions.at(-1)?.run_status ?? null])).to.deep.equal([
        ['publish', 'blocked'],
        ['publish', null],
      ])
      const ledger = await ledgerIn(dir)
      const ci = ledger.find((e) => e.target === 'ci')!
      expect(ci.attempts.map((a) => [a.state, a.status_code])).to.deep.equal([
        ['failed', 400],
        ['delivered', 200],
      ])
      expect(ledger.find((e) => e.target === 'local')!.attempts, 'the file target delivered once').to.have.length(1)
      const {events} = await runShow(body.run_id)
      expect(events.find((e) => e.event === 'redriven')).to.include({from: 'blocked', to: 'running', step: 'publish', by: user})
      expect((await cli(['publish', body.run_id], env)).code).to.equal(0)
      expect(hook.deliveries('/ci'), 'exactly once').to.have.length(1)
      await expectAuditPasses(dir, body.run_id)
    } finally {
      await hook.close()
    }
  })
})
