/**
 * Publishing to webhooks through the ledger on the built CLI, to a real HTTP server on 127.0.0.1:
 * each payload shape, one delivery per spec version however often or by how many processes it is
 * published, retries, refusals, and a SIGKILL between sending and recording. Secrets, targets that do
 * not answer, two stores and payload escaping are publish-safety.test.ts's.
 *
 * A `pipe` process (`cli`) for the first of each command the file uses, where two run at once or one
 * is killed, and for an answer that never ends (a read that might never end: a process's timeout
 * stops it); the other commands run in this process (`here`, test/helpers/pipe-here.ts: the same
 * command, output and exit code, without a process's start).
 */
import {expect} from 'chai'
import {spawn} from 'node:child_process'
import {createHmac} from 'node:crypto'
import {cp, readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {expectAuditPasses, readIn, runRecordIn} from '../helpers/stores.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {WebhookServer} from '../helpers/webhook-server.js'
import {allTargets, prd, publishCommands, SECRET, type RunJson} from '../helpers/publish-fixtures.js'

let dir: string
let cleanup: () => Promise<void>
let server: WebhookServer

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-publish-'))
  await cp(path.join(repoRoot, 'pipelines'), path.join(dir, 'pipelines'), {recursive: true})
  server = await WebhookServer.start()
})
afterEach(async () => {
  await server.close()
  await cleanup()
})

const {pipeline, env, cli, ledger, snapshotsOfStep} = publishCommands(() => ({dir, server}))

/** `cli(args, extra)` in this process. */
function here(args: string[], extra: Record<string, string | undefined> = {}): Promise<CliResult> {
  return pipeHere(args, {cwd: dir, env: {...env(), ...extra}})
}

/** The first run \`pipe runs list --json\` lists (the newest) with the status it gives, read in this process. */
async function newestRun(): Promise<{run_id: string; status: string}> {
  const ids = (await readdir(path.join(dir, '.pipe', 'runs'))).filter((n) => n.startsWith('R-')).sort()
  expect(ids, 'a run is recorded').not.to.deep.equal([])
  const {run, status} = await runRecordIn(dir, ids.at(-1)!)
  return {run_id: run.run_id, status}
}

describe('publish to webhooks through the ledger (a real HTTP server on 127.0.0.1)', function () {
  this.timeout(90000)

  it('sends each payload shape with its fields, a valid Feishu signature and the Idempotency-Key', async () => {
    const result = await cli(['run', await pipeline(allTargets), '--input', prd, '--decision', 'go', '--json'])
    expect(result.code, result.stderr).to.equal(0)
    const run = json<RunJson>(result)
    const key = (target: string): string => `${run.feature_id}+${target}+${run.spec_version}`

    const [feishu] = server.deliveries('/feishu')
    expect(feishu!.headers['idempotency-key']).to.equal(key('feishu'))
    expect(feishu!.headers['content-type']).to.contain('application/json')
    const fb = feishu!.body as {
      timestamp: string
      sign: string
      msg_type: string
      content: {post: {zh_cn: {title: string; content: Array<Array<{tag: string; text: string}>>}}}
    }
    expect(fb.msg_type).to.equal('post')
    expect(fb.content.post.zh_cn.title).to.equal('Spec published: Team Expense Tracker')
    expect(fb.content.post.zh_cn.content[0]![0]).to.deep.equal({tag: 'text', text: `${run.feature_id} ${run.spec_version} (verified)`})
    const expected = createHmac('sha256', `${fb.timestamp}\n${SECRET}`).update('').digest('base64')
    expect(fb.sign).to.equal(expected)
    expect(Math.abs(Number(fb.timestamp) - Date.now() / 1000)).to.be.below(120)

    const [slack] = server.deliveries('/slack')
    const sb = slack!.body as {text: string; blocks: Array<{type: string; text?: {type: string; text: string}}>}
    expect(sb.text).to.equal(`Spec published: Team Expense Tracker — ${run.spec_version}`)
    expect(sb.blocks.map((b) => b.type)).to.deep.equal(['header', 'section', 'context'])
    expect(sb.blocks[1]!.text!.type).to.equal('mrkdwn')
    expect(sb.blocks[1]!.text!.text).to.contain('[P0] Users can create a group')
    expect(slack!.headers['idempotency-key']).to.equal(key('slack'))

    const [generic] = server.deliveries('/json')
    const gb = generic!.body as {
      event: string
      idempotency_key: string
      feature_id: string
      spec_version: string
      run_id: string
      target: string
      content_hash: string
      spec: {meta: {spec_version: string}}
    }
    expect(gb).to.include({
      event: 'spec.published',
      idempotency_key: key('generic'),
      feature_id: run.feature_id,
      spec_version: run.spec_version,
      run_id: run.run_id,
      target: 'generic',
    })
    expect(gb.spec.meta.spec_version).to.equal(run.spec_version)
    expect(gb.content_hash).to.match(/^sha256:/)

    const entries = await ledger()
    expect(entries.map((e) => [e.target, e.status, e.attempts.length]).sort()).to.deep.equal([
      ['feishu', 'delivered', 1],
      ['generic', 'delivered', 1],
      ['local', 'delivered', 1],
      ['slack', 'delivered', 1],
    ])
    const listed = await here(['ledger', 'list'])
    expect(listed.stdout).to.contain(key('slack')).and.contain('delivered')
  })

  it('delivers one message per spec version however often it is published, from one or two processes', async () => {
    const run = json<RunJson>(await here(['run', await pipeline(allTargets), '--input', prd, '--decision', 'go', '--json']))
    const again = await here(['publish', run.run_id, '--json'])
    expect(again.code, again.stderr).to.equal(0)
    const results = json<{results: Array<{target: string; status: string; external_id: string}>}>(again).results
    expect(results.map((r) => r.status)).to.deep.equal(['already_published', 'already_published', 'already_published', 'already_published'])
    // Two processes at once.
    const both = await Promise.all([cli(['publish', run.run_id, '--target', 'generic']), cli(['publish', run.run_id, '--target', 'generic'])])
    for (const b of both) expect(b.code, b.stderr).to.equal(0)
    for (const p of ['/feishu', '/slack', '/json']) expect(server.deliveries(p), p).to.have.length(1)
    const timeline = await here(['runs', 'show', run.run_id])
    expect(timeline.stdout).to.contain('published').and.contain('already_published')
  })

  it('sends exactly once when two processes publish a new key at the same moment', async () => {
    const run = json<RunJson>(
      await here(['run', await pipeline('      - {name: local, type: file, dir: published}\n'), '--input', prd, '--decision', 'go', '--json']),
    )
    // The same run, now with a webhook target the pipeline did not have when it ran: a new key.
    const text = (await readFile(path.join(dir, 'pipelines', 'hooks.yaml'), 'utf8')).replace(
      '      - {name: local, type: file, dir: published}\n',
      '      - {name: local, type: file, dir: published}\n      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK}\n',
    )
    const original = await readFile(path.join(dir, 'pipelines', 'hooks.yaml'), 'utf8')
    await writeFile(path.join(dir, 'pipelines', 'hooks.yaml'), text)
    const refused = await here(['publish', run.run_id])
    expect(refused.code).to.equal(4)
    expect(refused.stderr).to.contain('changed since run')
    await writeFile(path.join(dir, 'pipelines', 'hooks.yaml'), original)
    // A run of the webhook pipeline, paused at review, published by two processes after approval.
    const paused = json<RunJson>(await here(['run', await pipeline(allTargets), '--input', prd, '--json']))
    expect(paused.status).to.equal('awaiting_input')
    server.reply({delayMs: 300}, {delayMs: 300}, {delayMs: 300})
    const arrivedBefore = server.arrived.length
    const review = cli(['review', paused.run_id, '--decision', 'go'])
    // The second process starts while the review is delivering (its first request has arrived and waits for its answer).
    await Promise.race([server.arrival(arrivedBefore + 1), review])
    const [reviewed, manual] = await Promise.all([review, cli(['publish', paused.run_id, '--target', 'generic'])])
    expect(reviewed.code, reviewed.stderr).to.equal(0)
    // It waits for the review's process to let the run go, then finds the key delivered.
    expect(manual.code, manual.stderr).to.equal(0)
    expect(server.deliveries('/json')).to.have.length(1)
    expect((await ledger()).filter((e) => e.run_id === paused.run_id && e.target === 'generic').map((e) => e.attempts.length)).to.deep.equal([1])
  })

  it('waits for the process that drives the run before publishing by hand, so the run’s timeline stays one chain', async () => {
    // The driver's publish step sends to `generic` and waits for an answer the test gives when it chooses.
    let answer!: () => void
    server.reply({until: new Promise<void>((resolve) => (answer = resolve))})
    const hooks = await pipeline(
      '      - {name: local, type: file, dir: published}\n      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK, timeout_ms: 120000}\n',
    )
    const driver = pipe(['run', hooks, '--input', prd, '--decision', 'go', '--json'], {cwd: dir, env: env()})
    const ended = await Promise.race([server.arrival(1), driver])
    expect(server.arrived, `the driver is sending to generic: ${ended?.stderr ?? ''}`).to.have.length(1)
    const {run_id: runId} = await newestRun()

    const byHand = spawn(process.execPath, [bin, 'publish', runId, '--target', 'local'], {cwd: dir, env: {...process.env, ...env(), NO_COLOR: '1'}})
    let stderr = ''
    let stdout = ''
    byHand.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    const exited = new Promise<number | null>((resolve) => byHand.on('close', resolve))
    const waiting = new Promise<void>((resolve) =>
      byHand.stderr.setEncoding('utf8').on('data', (d: string) => {
        stderr += d
        if (stderr.includes('waiting for it to let the run go')) resolve()
      }),
    )
    const first = await Promise.race([waiting.then(() => 'waits' as const), exited.then(() => 'exited' as const)])
    // The driver goes on whatever this found, so that a failure here leaves no process behind.
    answer()
    expect(first, `pipe publish did not wait for the driver: ${stderr}${stdout}`).to.equal('waits')
    expect(stderr).to.contain(`run ${runId} is being driven by another pipe process`)

    const driven = await driver
    expect(driven.code, driven.stderr).to.equal(0)
    expect(await exited, stderr).to.equal(0)
    expect(stdout).to.contain('already delivered  local')
    // Its line comes after the driver's last, in one chain that pipe audit verify accepts (read in this process).
    const timeline = (await readIn(path.join(dir, '.pipe'), (store) => store.readEvents(runId))).map((e) => e.event)
    expect(timeline.at(-1), timeline.join(', ')).to.equal('published')
    await expectAuditPasses(dir, runId)
  })

  it('retries a 500 and succeeds, with both attempts in the ledger and the snapshot', async () => {
    server.reply({status: 500, body: {error: 'boom'}})
    const run = json<RunJson>(
      await here([
        'run',
        await pipeline('      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK}\n'),
        '--input',
        prd,
        '--decision',
        'go',
        '--json',
      ]),
    )
    expect(run.status).to.equal('succeeded')
    expect(server.deliveries('/json')).to.have.length(1)
    const [entry] = await ledger()
    expect(entry!.attempts.map((a) => [a.n, a.state, a.status_code])).to.deep.equal([
      [1, 'retryable', 500],
      [2, 'delivered', 200],
    ])
    const snaps = await snapshotsOfStep(run.run_id, 'publish')
    expect(snaps[0]!.step.attempts).to.equal(2)
    expect(snaps[0]!.errors.map((e) => [e.attempt, e.retryable])).to.deep.equal([[1, true]])
    expect(snaps[0]!.errors[0]!.message).to.contain('answered 500')
  })

  it('stops at once on a 400, blocked (the approved run is not lost), with the reason from the response', async () => {
    server.reply({status: 400, body: {error: 'invalid_payload: text too long'}})
    const result = await here([
      'run',
      await pipeline('      - {name: slack, type: webhook, format: slack, url_env: SLACK_HOOK}\n'),
      '--input',
      prd,
      '--decision',
      'go',
      '--json',
    ])
    expect(result.code).to.equal(6)
    const run = json<RunJson>(result)
    expect(run.status).to.equal('blocked')
    expect(run.error?.message).to.contain('refused the delivery (400)').and.contain('invalid_payload: text too long')
    const [entry] = await ledger()
    expect(entry!.status).to.equal('failed')
    expect(entry!.attempts).to.have.length(1)
    expect(server.deliveries()).to.have.length(0)
  })

  it('reads at most 64 KiB of an answer that never ends: the status decides, the connection is closed', async () => {
    // 256 MiB, then the body holds unended: a client without a limit would wait for timeout_ms (unknown outcome).
    server.reply({endless: 256 * 1024 * 1024})
    // A process: were the limit gone, this read would never end, and only a process can be stopped.
    const result = await cli([
      'run',
      await pipeline('      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK, timeout_ms: 120000}\n'),
      '--input',
      prd,
      '--decision',
      'go',
      '--json',
    ])
    expect(result.code, result.stderr).to.equal(0)
    expect(json<RunJson>(result).status).to.equal('succeeded')
    await server.endlessClosed()
    // What the server got into the socket before pipe closed it: the 64 KiB read and the kernel's buffers, far from its budget.
    expect(server.endlessWritten[0]).to.be.below(64 * 1024 * 1024)
    const [entry] = await ledger()
    expect(entry!.status).to.equal('delivered')
    expect(entry!.attempts.map((a) => [a.state, a.status_code])).to.deep.equal([['delivered', 200]])
    // The answer's id was cut off with the rest: the idempotency key stands in for it, as for any answer without one.
    expect(entry!.external_id).to.equal(entry!.key)
  })

  it('refuses to publish a version without a go', async () => {
    const paused = json<RunJson>(await here(['run', await pipeline(allTargets), '--input', prd, '--json']))
    const refused = await here(['publish', paused.run_id])
    expect(refused.code).to.equal(2)
    expect(refused.stderr).to.contain('has no review decision "go"')
    const held = await here(['review', paused.run_id, '--decision', 'hold'])
    expect(held.code).to.equal(10)
    expect((await here(['publish', paused.run_id])).code).to.equal(2)
    expect(server.deliveries()).to.have.length(0)
    expect(await ledger()).to.deep.equal([])
  })

  it('keeps the documented guarantee after a SIGKILL between sending and recording', async () => {
    const file = await pipeline(
      '      - {name: generic, type: webhook, format: json, url_env: JSON_HOOK}\n      - {name: careful, type: webhook, format: slack, url_env: SLACK_HOOK, uncertain: hold}\n',
    )
    const killed = await cli(['run', file, '--input', prd, '--decision', 'go'], {PIPE_FAULT_KILL_AT: 'publish-sent:generic'})
    expect(killed.signal).to.equal('SIGKILL')
    expect(server.deliveries('/json')).to.have.length(1)
    const runId = await newestRun()
    expect(runId.status).to.equal('interrupted')
    // resend (the default): sent once more, with the same Idempotency-Key, then never again.
    // The kills are processes (PIPE_FAULT_KILL_AT); the resumes and publishes run here.
    const resumed = await here(['resume', runId.run_id, '--json'])
    expect(resumed.code, resumed.stderr).to.equal(0)
    const deliveries = server.deliveries('/json')
    expect(deliveries).to.have.length(2)
    expect(new Set(deliveries.map((d) => d.headers['idempotency-key'])).size).to.equal(1)
    const generic = (await ledger()).find((e) => e.target === 'generic')!
    expect(generic.attempts.map((a) => a.state)).to.deep.equal(['unknown', 'delivered'])
    await here(['publish', runId.run_id])
    expect(server.deliveries('/json')).to.have.length(2)

    // hold: a second run killed the same way stops for a person instead of sending again.
    const second = await cli(['run', file, '--input', prd, '--decision', 'go'], {PIPE_FAULT_KILL_AT: 'publish-sent:careful'})
    expect(second.signal).to.equal('SIGKILL')
    const run2 = (await newestRun()).run_id
    const stopped = await here(['resume', run2, '--json'])
    expect(stopped.code, stopped.stderr).to.equal(6)
    expect(json<RunJson>(stopped).status).to.equal('blocked')
    expect(json<RunJson>(stopped).error?.message).to.contain('it is unknown whether')
    expect(server.deliveries('/slack')).to.have.length(2)
    const settled = await here(['publish', run2, '--target', 'careful', '--mark-delivered', '--json'])
    expect(settled.code, settled.stderr).to.equal(0)
    expect(server.deliveries('/slack')).to.have.length(2)
    expect((await ledger()).find((e) => e.run_id === run2 && e.target === 'careful')!.status).to.equal('delivered')
    const finished = await here(['resume', run2, '--json'])
    expect(finished.code, finished.stderr).to.equal(0)
    expect(json<RunJson>(finished).status).to.equal('succeeded')
    expect(server.deliveries('/slack')).to.have.length(2)
    expect(server.deliveries('/json')).to.have.length(3)
  })

  it('never reads the URL from the pipeline: a missing variable is a clear error', async () => {
    const result = await here([
      'run',
      await pipeline('      - {name: generic, type: webhook, format: json, url_env: NOT_SET_HOOK}\n'),
      '--input',
      prd,
      '--decision',
      'go',
      '--json',
    ])
    expect(result.code).to.equal(6)
    expect(json<RunJson>(result).error?.message).to.contain('$NOT_SET_HOOK, which is not set')
  })
})
