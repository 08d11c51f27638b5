/**
 * kind: agent's calls that a person confirms, on the built CLI against a scripted chat-completions
 * server on 127.0.0.1, in a real git repository in a temp dir: pipe confirm --yes and --no, at a
 * terminal, a confirmed call never run twice, an edited step state or cassette refused, a yes that
 * never decides another call.
 *
 * A `pipe` process for the first of each command the file uses (a run's pause as printed, a --no
 * that reaches the model, audit verify's findings unkeyed), the confirm held at a fault point and the
 * one that overtakes it (two at once), and the prompt at a terminal (stdin); the other commands run in
 * this process (test/helpers/pipe-here.ts: the same command from argv, its output and exit code,
 * asking the same model server).
 */
import {expect} from 'chai'
import {createHash} from 'node:crypto'
import {mkdir, readdir, readFile, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {json, pipe, type CliResult} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses, runRecordIn} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'
import type {ModelServer} from '../helpers/model-server.js'
import {sealRecord} from '../../src/store/trail/integrity.js'
import {agentRepo, toolResults, type RunJson} from '../helpers/agent-repo.js'

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

const {setup, env, run, snapshots} = agentRepo({
  get: () => ({dir, repo, cleanup, server}),
  set: (made) => ({dir, repo, cleanup, server} = {dir, repo, cleanup, server, ...made}),
})

/** `pipe ARGS` in the repository, in this process, with the model server's endpoint (or `e`). */
const here = (args: string[], e: Record<string, string> = env()): Promise<CliResult> => pipeHere(args, {cwd: repo, env: e})
/** `run(file)` in this process. */
const runHere = (file: string): Promise<CliResult> => here(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')])

describe('kind: agent (a scripted tool-calling model server on 127.0.0.1, a real git repository)', function () {
  this.timeout(180000)

  it('pauses a dangerous run_command for confirmation; --no reaches the model as a refusal, --yes runs it', async () => {
    const file = await setup()
    server.script(
      'fix',
      {tool_calls: [{id: 't1', name: 'run_command', arguments: {command: 'node mark.js'}}]},
      {tool_calls: [{id: 't2', name: 'run_command', arguments: {command: 'node mark.js'}}]},
      {content: 'marked'},
    )
    const paused = await run(file)
    expect(paused.code, paused.stderr).to.equal(10)
    const body = json<RunJson>(paused)
    expect(body.status).to.equal('awaiting_input')
    expect(body.pending?.kind).to.equal('confirm')
    expect(body.pending?.action).to.deep.include({tool: 'run_command', call_id: 't1', argv: [['node', 'mark.js']]})
    expect(body.next_command).to.contain(`pipe confirm ${body.run_id} --yes`)
    const text = await here(['runs', 'show', body.run_id])
    expect(text.stdout + text.stderr).to.contain('node mark.js')
    expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
    expect(server.count()).to.equal(1)

    const refused = await pipe(['confirm', body.run_id, '--no', '--note', 'not on a Friday', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(refused.code, refused.stderr).to.equal(10)
    expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
    // The model got the refusal, with the note, as the call's result; the first turn was not asked again.
    expect(server.count()).to.equal(2)
    expect(toolResults(server.requests[1]!)['t1']).to.contain('refused').and.contain('not on a Friday')
    expect(json<RunJson>(refused).pending?.action?.call_id).to.equal('t2')

    const confirmed = await here(['confirm', body.run_id, '--yes', '--json'])
    expect(confirmed.code, confirmed.stderr).to.equal(0)
    expect(await readFile(path.join(repo, 'marked.txt'), 'utf8')).to.equal('ran')
    expect(server.count()).to.equal(3)
    const [snap] = await snapshots(body.run_id)
    expect(snap!.tool_calls!.map((c) => [c.call_id, c.decision])).to.deep.equal([
      ['t1', 'refused'],
      ['t2', 'confirmed'],
    ])
    expect(snap!.tool_calls![0]!.note).to.equal('not on a Friday')
  })

  it("a confirmed call that ran never runs again on redrive: the turn after it fails (401), pipe resume answers the cached reply's same call id from the record", async () => {
    const file = await setup()
    server.script(
      'fix',
      {tool_calls: [{id: 'k1', name: 'run_command', arguments: {command: 'node count.js'}}]},
      {status: 401, body: {error: {message: 'Incorrect API key provided', type: 'invalid_request_error'}}},
      {content: 'counted'},
    )
    const paused = json<RunJson>(await runHere(file))
    expect(paused.pending?.action?.call_id).to.equal('k1')
    const failed = await here(['confirm', paused.run_id, '--yes', '--json'])
    expect(failed.code, failed.stdout + failed.stderr).to.equal(1)
    expect(json<RunJson>(failed).status).to.equal('failed')
    expect(await readFile(path.join(repo, 'count.txt'), 'utf8')).to.equal('ran\n')
    expect(server.count()).to.equal(2)

    const redriven = await here(['resume', paused.run_id, '--json'])
    expect(redriven.code, redriven.stdout + redriven.stderr).to.equal(0)
    // It ran once: the first turn came from the reply cache (one request more, the one that failed), with the same call id.
    expect(await readFile(path.join(repo, 'count.txt'), 'utf8')).to.equal('ran\n')
    expect(server.count()).to.equal(3)
    // The model is given the result it was given when the call ran.
    expect(toolResults(server.requests[2]!)['k1']).to.equal(toolResults(server.requests[1]!)['k1']).and.contain('"exit_code":0')
    const [first, second] = await snapshots(paused.run_id)
    const ranFirst = (first!.errors.at(-1)!.details as {tool_calls: Array<Record<string, unknown>>}).tool_calls
    expect(ranFirst.map((c) => [c['call_id'], c['decision'], c['executed']])).to.deep.equal([['k1', 'confirmed', true]])
    expect(second!.tool_calls!.map((c) => [c.call_id, c.decision, c.executed, c.replayed_from])).to.deep.equal([['k1', 'confirmed', undefined, 1]])
    await expectAuditPasses(repo, paused.run_id)
  })

  describe('a confirmation runs exactly the action shown: an edited step state is refused (E_INTEGRITY) and reported by audit verify', () => {
    const shownThenEdited = async (
      extraEnv: Record<string, string>,
    ): Promise<{runId: string; stateFile: string; original: string; edit: (reseal: boolean) => Promise<void>; e: () => Record<string, string>}> => {
      const file = await setup()
      server.script('fix', {tool_calls: [{id: 'e1', name: 'run_command', arguments: {command: 'node test.js'}}]}, {content: 'tested'})
      const e = (): Record<string, string> => ({...env(), ...extraEnv})
      const paused = json<RunJson>(await here(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], e()))
      expect(paused.pending?.action?.argv).to.deep.equal([['node', 'test.js']])
      const stateDir = path.join(repo, '.pipe', 'runs', paused.run_id, 'state')
      const [name] = await readdir(stateDir)
      const stateFile = path.join(stateDir, name!)
      const original = await readFile(stateFile, 'utf8')
      // What \`pipe audit verify RUN\` finds before the edit, under the test's audit key if it has one (the
      // edited cases below check what it prints, the first of them from a process).
      const before = await here(['audit', 'verify', paused.run_id], e())
      expect(before.code, before.stdout + before.stderr).to.equal(0)
      const edit = async (reseal: boolean): Promise<void> => {
        type Saved = {pending: Array<{function: {arguments: string}}>}
        const parsed = JSON.parse(original) as {state?: Saved} & Saved
        // (An unsealed state, as pipe wrote before it sealed them, is the state itself.)
        const state = parsed.state ?? parsed
        state.pending[0]!.function.arguments = JSON.stringify({command: 'node mark.js'})
        // Re-sealed with pipe's own function, as someone without the audit key can.
        const saved = reseal ? sealRecord({state}) : parsed
        await writeFile(stateFile, `${JSON.stringify(saved)}\n`)
      }
      return {runId: paused.run_id, stateFile, original, edit, e}
    }

    /** The refusal of `pipe confirm RUN --yes`, in this process (test/helpers/pipe-here.ts). */
    const refuses = async (runId: string, e: Record<string, string>, says: string): Promise<void> => {
      const confirmed = await here(['confirm', runId, '--yes', '--json'], e)
      expect(confirmed.code, confirmed.stdout + confirmed.stderr).to.equal(4)
      const error = json<RunJson>(confirmed).error
      expect(error?.code).to.equal('E_INTEGRITY')
      expect(error?.message).to.contain(says)
      expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
      // The status \`pipe runs show RUN --json\` gives, read in this process.
      expect((await runRecordIn(repo, runId)).status).to.equal('awaiting_input')
      expect(server.count()).to.equal(1)
    }

    it('unkeyed: an edit is named by audit verify and refused; re-sealed, audit cannot tell, but the hash of the action shown still refuses it', async () => {
      const {runId, stateFile, original, edit, e} = await shownThenEdited({})
      await edit(false)
      const audit = await pipe(['audit', 'verify', runId], {cwd: repo, env: e()})
      expect(audit.code).to.equal(4)
      expect(audit.stdout + audit.stderr)
        .to.contain(path.basename(stateFile))
        .and.contain('seal does not match')
      await refuses(runId, e(), 'fails its seal')
      await edit(true)
      const resealed = await here(['audit', 'verify', runId], e())
      expect(resealed.code, `a re-sealed edit passes an unkeyed audit (README says so): ${resealed.stdout}${resealed.stderr}`).to.equal(0)
      await refuses(runId, e(), 'would run run_command node mark.js (e1), not the call the person was shown: run_command node test.js (e1)')
      // Put back as it was shown, the confirmation runs it: refusing lost nothing.
      await writeFile(stateFile, original)
      const done = await here(['confirm', runId, '--yes', '--json'], e())
      expect(done.code, done.stdout + done.stderr).to.equal(0)
      expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
    })

    it('keyed (PIPE_AUDIT_KEY): an edit re-sealed without the key is named by audit verify and refused', async () => {
      const {runId, stateFile, edit, e} = await shownThenEdited({PIPE_AUDIT_KEY: 'k-secret-audit'})
      await edit(true)
      const audit = await here(['audit', 'verify', runId], e())
      expect(audit.code, audit.stdout + audit.stderr).to.equal(4)
      expect(audit.stdout + audit.stderr)
        .to.contain(path.basename(stateFile))
        .and.contain('sealed without the audit key')
      await refuses(runId, e(), 'fails its seal')
    })
  })

  it('a replayed run paused for a confirmation refuses a cassette edited since it started (E_INTEGRITY, both hashes); --accept-cassette goes on with it, recorded', async () => {
    const file = await setup()
    server.script('fix', {tool_calls: [{id: 'r1', name: 'run_command', arguments: {command: 'node test.js'}}]}, {content: 'the recorded answer'})
    const policyFile = path.join(dir, 'p', 'policy.yaml')
    // The recording, its confirmation (the run goes on recording to its cassette), the replay and the
    // refusal below run in this process.
    const recording = json<RunJson>(await here(['run', file, '--json', '--policy', policyFile, '--record', 'fix.cassette.jsonl']))
    const recorded = await here(['confirm', recording.run_id, '--yes', '--json'])
    expect(recorded.code, recorded.stdout + recorded.stderr).to.equal(0)
    expect(server.count()).to.equal(2)

    const cassette = path.join(repo, 'fix.cassette.jsonl')
    const paused = await here(['run', file, '--json', '--policy', policyFile, '--replay', 'fix.cassette.jsonl'])
    expect(paused.code, paused.stdout + paused.stderr).to.equal(10)
    const runId = json<RunJson>(paused).run_id
    const before = await readFile(cassette, 'utf8')
    expect(before).to.contain('the recorded answer')
    await writeFile(cassette, before.replace('the recorded answer', 'a tampered answer'))
    const sha = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`

    const refused = await here(['confirm', runId, '--yes', '--json'])
    expect(refused.code, refused.stdout + refused.stderr).to.equal(4)
    const error = json<RunJson>(refused).error!
    expect(error.code).to.equal('E_INTEGRITY')
    expect(error.message)
      .to.contain(cassette)
      .and.contain(sha(before))
      .and.contain(await readFile(cassette, 'utf8').then(sha))
    expect(error.hint).to.contain(`pipe confirm ${runId} --yes --accept-cassette`)
    expect((await runRecordIn(repo, runId)).status).to.equal('awaiting_input')
    const snapshotDir = path.join(repo, '.pipe', 'runs', runId, 'snapshots')
    expect(existsSync(snapshotDir) ? await readdir(snapshotDir) : [], 'no step finished').to.deep.equal([])

    // The hint's command, in this process.
    const accepted = await here(['confirm', runId, '--yes', '--accept-cassette', '--json'])
    expect(accepted.code, accepted.stdout + accepted.stderr).to.equal(0)
    const [snap] = await snapshots(runId)
    expect((snap!.outputs as Record<string, unknown>)['value']).to.equal('a tampered answer')
    expect(server.count(), 'the replay asked no endpoint').to.equal(2)
    const events = (await readFile(path.join(repo, '.pipe', 'runs', runId, 'events.jsonl'), 'utf8'))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as {event: string; reason?: string})
    const acceptance = events.find((e) => e.event === 'cassette_accepted')
    expect(acceptance?.reason).to.contain(sha(before)).and.contain('fix.cassette.jsonl')
    expect(events.findIndex((e) => e.event === 'cassette_accepted')).to.be.lessThan(events.findIndex((e) => e.event === 'confirm_given'))
    await expectAuditPasses(repo, runId)
  })

  it('ends denied when the model gives up after a person refused its call; unrouted, the run fails with E_POLICY_DENIED', async () => {
    const file = await setup()
    server.script(
      'fix',
      {tool_calls: [{id: 'd1', name: 'run_command', arguments: {command: 'node mark.js'}}]},
      {tool_calls: [{id: 'g', name: 'give_up', arguments: {reason: 'I need to run mark.js'}}]},
    )
    const paused = json<RunJson>(await runHere(file))
    const refused = await here(['confirm', paused.run_id, '--no', '--json'])
    expect(refused.code, refused.stderr).to.equal(3)
    expect(json<RunJson>(refused).error?.code).to.equal('E_POLICY_DENIED')
    const [snap] = await snapshots(paused.run_id)
    expect(snap!.decisions[0]!.decision).to.equal('denied')
    expect(snap!.decisions[0]!.reason).to.contain('I need to run mark.js')
    expect((snap!.outputs as Record<string, unknown>)['value']).to.equal(null)
    // A second answer to the ended run: refused, exit 2.
    const again = await here(['confirm', paused.run_id, '--yes', '--json'])
    expect(again.code, again.stdout + again.stderr).to.equal(2)
    expect(json<RunJson>(again).error?.message).to.contain('not waiting for a confirmation')
  })

  it('a yes given for one call never decides another: a confirm overtaken by a second one that moved the run on is E_STATE, and nothing runs', async () => {
    const file = await setup()
    server.script(
      'fix',
      {tool_calls: [{id: 'a1', name: 'run_command', arguments: {command: 'node test.js'}}]},
      {tool_calls: [{id: 'b2', name: 'run_command', arguments: {command: 'node mark.js'}}]},
      {content: 'done'},
    )
    const paused = json<RunJson>(await runHere(file))
    expect(paused.pending?.action?.call_id).to.equal('a1')
    // A --yes for a1 stops right after it saw the run waiting for a1 ...
    const gate = path.join(dir, 'gate')
    await mkdir(gate)
    const held = pipe(['confirm', paused.run_id, '--yes', '--json'], {
      cwd: repo,
      env: {...env(), PIPE_FAULT_PAUSE_AT: 'confirm-checked', PIPE_FAULT_PAUSE_DIR: gate},
      timeoutMs: 120000,
    })
    // Watched, not polled; if it ended without getting there, the checks below say how it ended.
    await changeIn(gate, async () => (await readdir(gate)).some((n) => n.startsWith('reached.')), 'the --yes reaching confirm-checked', held).catch(
      () => undefined,
    )
    // ... while a --no for a1 gets there first: the model is told, and asks for b2 (a process too: the
    // two commands run at the same time).
    const refused = await pipe(['confirm', paused.run_id, '--no', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(refused.code, refused.stderr).to.equal(10)
    expect(json<RunJson>(refused).pending?.action?.call_id).to.equal('b2')
    await writeFile(path.join(gate, 'go'), '')
    const late = await held
    expect(late.code, late.stdout + late.stderr).to.equal(2)
    expect(json<RunJson>(late).error?.message).to.contain('another call').and.contain('b2').and.contain('a1')
    expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
    expect((await runRecordIn(repo, paused.run_id)).status).to.equal('awaiting_input')
  })

  it('a model that numbers its calls afresh each reply (the same id again) still gets each call confirmed and run once', async () => {
    const file = await setup()
    server.script(
      'fix',
      {tool_calls: [{id: 'call_0', name: 'run_command', arguments: {command: 'node test.js'}}]},
      {tool_calls: [{id: 'call_0', name: 'run_command', arguments: {command: 'node mark.js'}}]},
      {content: 'done'},
    )
    const paused = json<RunJson>(await runHere(file))
    const first = await here(['confirm', paused.run_id, '--yes', '--json'])
    expect(first.code, first.stdout + first.stderr).to.equal(10)
    const second = json<RunJson>(first).pending?.action
    expect(second?.argv).to.deep.equal([['node', 'mark.js']])
    expect(second?.call_id).to.not.equal('call_0')
    const done = await here(['confirm', paused.run_id, '--yes', '--json'])
    expect(done.code, done.stdout + done.stderr).to.equal(0)
    expect(await readFile(path.join(repo, 'marked.txt'), 'utf8')).to.equal('ran')
    // Each result answers its own call in what the model is sent.
    const last = server.requests[2]!.body.messages
    const ids = last.flatMap((m) => (m.tool_calls ?? []).map((c) => c.id))
    expect(new Set(ids).size).to.equal(2)
    expect(last.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).to.deep.equal(ids)
  })

  it('asks at the terminal when it may prompt: the action shown, no with a note reaches the model', async () => {
    const file = await setup()
    server.script('fix', {tool_calls: [{id: 'i1', name: 'run_command', arguments: {command: 'node mark.js'}}]}, {content: 'left it'})
    const result = await pipe(['run', file, '--policy', path.join(dir, 'p', 'policy.yaml')], {
      cwd: repo,
      env: {...env(), PIPE_INTERACTIVE: '1'},
      input: 'maybe\nno\nnot today\n',
      timeoutMs: 120000,
    })
    expect(result.code, result.stderr).to.equal(0)
    expect(result.stderr).to.contain('argv: ["node","mark.js"]').and.contain('"maybe" is not yes or no')
    expect(toolResults(server.requests[1]!)['i1']).to.contain('refused').and.contain('not today')
    expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
  })
})
