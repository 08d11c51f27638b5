/**
 * kind: agent on the built CLI, against a scripted chat-completions server on 127.0.0.1 that plays
 * tool-call conversations, in a real git repository in a temp dir.
 */
import {expect} from 'chai'
import {spawn, execFileSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdir, readdir, readFile, symlink, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {bin, json, pipe, tempDir, type CliResult} from '../helpers/cli.js'
import {auditCommandIn, expectAuditPasses, runRecordIn, snapshotsIn} from '../helpers/stores.js'
import {changeIn} from '../helpers/wait.js'
import {confirmHere, resumeHere, type InProcess} from '../helpers/in-process.js'
import {ModelServer, type ModelRequest} from '../helpers/model-server.js'
import {sealRecord} from '../../src/store/trail/integrity.js'

interface RunJson {
  run_id: string
  status: string
  reason?: string
  pending?: {kind: string; action?: {tool: string; argv?: string[][]; call_id: string}}
  error?: {code: string; message: string; hint?: string}
  next_command?: string
}

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

const BUGGY = 'export function add(a, b) {\n  return a - b\n}\n'
const TEST = "import {add} from './calc.js'\nif (add(2, 3) !== 5) {\n  console.error('add(2, 3) is', add(2, 3))\n  process.exit(1)\n}\nconsole.log('ok')\n"
const FIX = 'calc.js\n<<<<<<< SEARCH\n  return a - b\n=======\n  return a + b\n>>>>>>> REPLACE\n'

function policy(extra = ''): string {
  return `version: 1
allowed_commands:
  - [node, test.js]
  - [node, mark.js]
  - [node, count.js]
  - [node, --check, "{path}"]
forbidden_paths: [".git/**", ".env"]
max_patch_lines: 200
max_retries_default: 0
resource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576}
sandbox: auto
${extra}`
}

async function setup(policyExtra = '', step = ''): Promise<string> {
  ;({dir, cleanup} = await tempDir('pipe-agent-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
  await writeFile(path.join(repo, 'calc.js'), BUGGY)
  await writeFile(path.join(repo, 'test.js'), TEST)
  await writeFile(path.join(repo, 'mark.js'), "import {writeFileSync} from 'node:fs'\nwriteFileSync('marked.txt', 'ran')\n")
  await writeFile(path.join(repo, 'count.js'), "import {appendFileSync} from 'node:fs'\nappendFileSync('count.txt', 'ran\\n')\n")
  await writeFile(path.join(repo, '.env'), 'TOKEN=sk-secret\n')
  execFileSync('git', ['init', '-q'], {cwd: repo})
  execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'add', '-A'], {cwd: repo})
  execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'start'], {cwd: repo})
  const p = path.join(dir, 'p')
  await mkdir(p)
  await writeFile(path.join(p, 'task.md'), 'Fix the bug: {{task}}\n')
  await writeFile(path.join(p, 'policy.yaml'), policy(policyExtra))
  await writeFile(
    path.join(p, 'agent.yaml'),
    `version: 1
name: agent
steps:
  - id: fix
    kind: agent
    prompt: task.md
    vars:
      task: add() subtracts
    tools: [list_directory, find_files, search_text, read_file, apply_edit_blocks, run_command]
${step}`,
  )
  server = await ModelServer.start()
  return path.join(p, 'agent.yaml')
}

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

const env = (): Record<string, string> => ({OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home')})

function run(file: string): Promise<CliResult> {
  return pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: env(), timeoutMs: 120000})
}

/** What `pipe snapshot show RUN --json` prints, read in-process. */
function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(repo, runId)
}

/** The tool-result messages a request carried, by call id. */
function toolResults(request: ModelRequest): Record<string, string> {
  return Object.fromEntries(request.body.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id!, m.content]))
}

describe('kind: agent (a scripted tool-calling model server on 127.0.0.1, a real git repository)', function () {
  this.timeout(180000)

  it('does a task first time: reads a file, applies an edit block, runs a pre-approved test, answers', async () => {
    const file = await setup('tools_preapproved: [[node, test.js]]\nsyntax_checks: {".js": [node, --check, "{path}"]}\n')
    server.script(
      'fix',
      {tool_calls: [{id: 'c1', name: 'read_file', arguments: {path: 'calc.js'}}]},
      {tool_calls: [{id: 'c2', name: 'apply_edit_blocks', arguments: {blocks: FIX}}]},
      {tool_calls: [{id: 'c3', name: 'run_command', arguments: {command: 'node test.js'}}]},
      {content: 'add() now adds; node test.js prints ok.'},
    )
    const result = await run(file)
    expect(result.code, result.stderr + result.stdout).to.equal(0)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a + b')
    // The model was offered the tools as function tools, and saw each result.
    expect(server.requests[0]!.body.tools!.map((t) => t.function.name)).to.include.members(['read_file', 'apply_edit_blocks', 'run_command', 'give_up'])
    expect(toolResults(server.requests[1]!)['c1']).to.contain('return a - b')
    expect(toolResults(server.requests[2]!)['c2']).to.contain('"applied":true')
    expect(toolResults(server.requests[3]!)['c3']).to.contain('ok').and.contain('"exit_code":0')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.decisions[0]!.decision).to.equal('done')
    expect(snap!.outputs).to.include({value: 'add() now adds; node test.js prints ok.', turns: 4, tool_calls: 3})
    expect((snap!.outputs as Record<string, unknown>)['files_changed']).to.deep.equal(['calc.js'])
    expect(snap!.tool_calls!.map((c) => [c.name, c.level, c.decision, c.ok])).to.deep.equal([
      ['read_file', 'safe', 'auto', true],
      ['apply_edit_blocks', 'moderate', 'auto', true],
      ['run_command', 'dangerous', 'preapproved', true],
    ])
    expect(snap!.evidence_links.length).to.be.greaterThan(0)
    // The conversation state beside the records does not trouble the audit.
    await expectAuditPasses(repo, json<RunJson>(result).run_id)
  })

  it('answers invalid arguments with the schema error and denies paths outside the repository, running nothing', async () => {
    const file = await setup()
    await mkdir(path.join(dir, 'outside'))
    await writeFile(path.join(dir, 'outside', 'secret.txt'), 'outside secret\n')
    await symlink(path.join(dir, 'outside'), path.join(repo, 'link'))
    server.script(
      'fix',
      {tool_calls: [{id: 'bad', name: 'apply_edit_blocks', arguments: {blocks: FIX, extra: 1}}]},
      {
        tool_calls: [
          {id: 'up', name: 'read_file', arguments: {path: '../outside/secret.txt'}},
          {id: 'abs', name: 'read_file', arguments: {path: path.join(dir, 'outside', 'secret.txt')}},
          {id: 'sym', name: 'read_file', arguments: {path: 'link/secret.txt'}},
          {id: 'env', name: 'read_file', arguments: {path: '.env'}},
          {id: 'wr', name: 'apply_edit_blocks', arguments: {blocks: 'link/secret.txt\n<<<<<<< SEARCH\noutside secret\n=======\nchanged\n>>>>>>> REPLACE\n'}},
        ],
      },
      {content: 'nothing to do'},
    )
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    const second = toolResults(server.requests[1]!)
    expect(second['bad']).to.contain('invalid arguments').and.contain('extra').and.contain('nothing was run')
    const third = toolResults(server.requests[2]!)
    for (const id of ['up', 'abs', 'sym', 'env', 'wr']) expect(third[id], id).to.contain('denied')
    expect(await readFile(path.join(dir, 'outside', 'secret.txt'), 'utf8')).to.equal('outside secret\n')
    expect(JSON.stringify(third)).not.to.contain('outside secret').and.not.to.contain('sk-secret')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls!.map((c) => c.decision)).to.deep.equal(['invalid', 'denied', 'denied', 'denied', 'denied', 'denied'])
  })

  it('rolls an edit back when the configured syntax checker fails, returning its output', async () => {
    const file = await setup('syntax_checks: {".js": [node, --check, "{path}"]}\n')
    const broken = 'calc.js\n<<<<<<< SEARCH\n  return a - b\n=======\n  return a + (b\n>>>>>>> REPLACE\n'
    server.script('fix', {tool_calls: [{id: 's1', name: 'apply_edit_blocks', arguments: {blocks: broken}}]}, {content: 'gave it a try'})
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
    const answer = toolResults(server.requests[1]!)['s1']!
    expect(answer).to.contain('"rolled_back":true').and.contain('SyntaxError')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls![0]).to.include({name: 'apply_edit_blocks', ok: false})
    expect((snap!.outputs as Record<string, unknown>)['files_changed']).to.deep.equal([])
  })

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
    const text = await pipe(['runs', 'show', body.run_id], {cwd: repo, env: env()})
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

    const confirmed = await pipe(['confirm', body.run_id, '--yes', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
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
    const paused = json<RunJson>(await run(file))
    expect(paused.pending?.action?.call_id).to.equal('k1')
    const failed = await pipe(['confirm', paused.run_id, '--yes', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(failed.code, failed.stdout + failed.stderr).to.equal(1)
    expect(json<RunJson>(failed).status).to.equal('failed')
    expect(await readFile(path.join(repo, 'count.txt'), 'utf8')).to.equal('ran\n')
    expect(server.count()).to.equal(2)

    // pipe resume's session in this process, with the endpoint its process would have.
    const redriven = await resumeHere(repo, paused.run_id, env())
    expect(redriven.code, JSON.stringify(redriven.error)).to.equal(0)
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
      const paused = json<RunJson>(
        await pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: e(), timeoutMs: 120000}),
      )
      expect(paused.pending?.action?.argv).to.deep.equal([['node', 'test.js']])
      const stateDir = path.join(repo, '.pipe', 'runs', paused.run_id, 'state')
      const [name] = await readdir(stateDir)
      const stateFile = path.join(stateDir, name!)
      const original = await readFile(stateFile, 'utf8')
      // What \`pipe audit verify RUN\` finds before the edit, under the test's audit key if it has one (the
      // edited cases below run it as a process: what it prints is what they check).
      const before = await auditCommandIn(repo, paused.run_id, extraEnv.PIPE_AUDIT_KEY === undefined ? {} : {key: extraEnv.PIPE_AUDIT_KEY})
      expect(before.code, before.said).to.equal(0)
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

    /** The refusal of `pipe confirm RUN --yes`: by the command, or (`here`) by its session in this process (test/helpers/in-process.ts). */
    const refuses = async (runId: string, e: Record<string, string>, says: string, here = false): Promise<void> => {
      let error: RunJson['error']
      if (here) {
        const confirmed = await confirmHere(repo, runId, {decision: 'yes'}, e)
        expect(confirmed.code, JSON.stringify(confirmed)).to.equal(4)
        error = confirmed.error
      } else {
        const confirmed = await pipe(['confirm', runId, '--yes', '--json'], {cwd: repo, env: e, timeoutMs: 120000})
        expect(confirmed.code, confirmed.stdout + confirmed.stderr).to.equal(4)
        error = json<RunJson>(confirmed).error
      }
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
      const resealed = await auditCommandIn(repo, runId)
      expect(resealed.code, `a re-sealed edit passes an unkeyed audit (README says so): ${resealed.said}`).to.equal(0)
      // (This refusal and the confirmation after it by pipe confirm's session in this process: the command's refusal is the one above.)
      await refuses(runId, e(), 'would run run_command node mark.js (e1), not the call the person was shown: run_command node test.js (e1)', true)
      // Put back as it was shown, the confirmation runs it: refusing lost nothing.
      await writeFile(stateFile, original)
      const done = await confirmHere(repo, runId, {decision: 'yes'}, e())
      expect(done.code, JSON.stringify(done.error)).to.equal(0)
      expect(existsSync(path.join(repo, 'marked.txt'))).to.equal(false)
    })

    it('keyed (PIPE_AUDIT_KEY): an edit re-sealed without the key is named by audit verify and refused', async () => {
      const {runId, stateFile, edit, e} = await shownThenEdited({PIPE_AUDIT_KEY: 'k-secret-audit'})
      await edit(true)
      // What pipe audit verify RUN exits with and prints under the key, in this process (the unkeyed case above runs the command).
      const audit = await auditCommandIn(repo, runId, {key: 'k-secret-audit'})
      expect(audit.code, audit.said).to.equal(4)
      expect(audit.said).to.contain(path.basename(stateFile)).and.contain('sealed without the audit key')
      await refuses(runId, e(), 'fails its seal')
    })
  })

  it('a replayed run paused for a confirmation refuses a cassette edited since it started (E_INTEGRITY, both hashes); --accept-cassette goes on with it, recorded', async () => {
    const file = await setup()
    server.script('fix', {tool_calls: [{id: 'r1', name: 'run_command', arguments: {command: 'node test.js'}}]}, {content: 'the recorded answer'})
    const policyFile = path.join(dir, 'p', 'policy.yaml')
    const recording = json<RunJson>(
      await pipe(['run', file, '--json', '--policy', policyFile, '--record', 'fix.cassette.jsonl'], {cwd: repo, env: env(), timeoutMs: 120000}),
    )
    // The recording's confirmation by pipe confirm's session in this process: the run goes on recording to its cassette.
    const recorded = await confirmHere(repo, recording.run_id, {decision: 'yes'}, env())
    expect(recorded.code, JSON.stringify(recorded.error)).to.equal(0)
    expect(server.count()).to.equal(2)

    const cassette = path.join(repo, 'fix.cassette.jsonl')
    const paused = await pipe(['run', file, '--json', '--policy', policyFile, '--replay', 'fix.cassette.jsonl'], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(paused.code, paused.stdout + paused.stderr).to.equal(10)
    const runId = json<RunJson>(paused).run_id
    const before = await readFile(cassette, 'utf8')
    expect(before).to.contain('the recorded answer')
    await writeFile(cassette, before.replace('the recorded answer', 'a tampered answer'))
    const sha = (text: string): string => `sha256:${createHash('sha256').update(text).digest('hex')}`

    const refused = await pipe(['confirm', runId, '--yes', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
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

    // pipe confirm --yes --accept-cassette's session in this process (the hint above is the command's own line).
    const accepted = await confirmHere(repo, runId, {decision: 'yes', acceptCassette: true}, env())
    expect(accepted.code, JSON.stringify(accepted.error)).to.equal(0)
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
    const paused = json<RunJson>(await run(file))
    const refused = await pipe(['confirm', paused.run_id, '--no', '--json'], {cwd: repo, env: env(), timeoutMs: 120000})
    expect(refused.code, refused.stderr).to.equal(3)
    expect(json<RunJson>(refused).error?.code).to.equal('E_POLICY_DENIED')
    const [snap] = await snapshots(paused.run_id)
    expect(snap!.decisions[0]!.decision).to.equal('denied')
    expect(snap!.decisions[0]!.reason).to.contain('I need to run mark.js')
    expect((snap!.outputs as Record<string, unknown>)['value']).to.equal(null)
    // A second answer to the ended run, by pipe confirm's session in this process: refused, exit 2.
    const again = await confirmHere(repo, paused.run_id, {decision: 'yes'}, env())
    expect(again.code, JSON.stringify(again)).to.equal(2)
    expect(again.error?.message).to.contain('not waiting for a confirmation')
  })

  it('a yes given for one call never decides another: a confirm overtaken by a second one that moved the run on is E_STATE, and nothing runs', async () => {
    const file = await setup()
    server.script(
      'fix',
      {tool_calls: [{id: 'a1', name: 'run_command', arguments: {command: 'node test.js'}}]},
      {tool_calls: [{id: 'b2', name: 'run_command', arguments: {command: 'node mark.js'}}]},
      {content: 'done'},
    )
    const paused = json<RunJson>(await run(file))
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
    // ... while a --no for a1 gets there first: the model is told, and asks for b2.
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
    const paused = json<RunJson>(await run(file))
    // Both confirmations by pipe confirm's session in this process (what the command prints is checked above).
    const first: InProcess = await confirmHere(repo, paused.run_id, {decision: 'yes'}, env())
    expect(first.code, JSON.stringify(first.error)).to.equal(10)
    const second = first.outcome?.pending?.action
    expect(second?.argv).to.deep.equal([['node', 'mark.js']])
    expect(second?.call_id).to.not.equal('call_0')
    const done = await confirmHere(repo, paused.run_id, {decision: 'yes'}, env())
    expect(done.code, JSON.stringify(done.error)).to.equal(0)
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

  it('checks each segment of a compound command line: a denied one stops it before anything runs', async () => {
    const file = await setup('confirm: []\n')
    server.script(
      'fix',
      {tool_calls: [{id: 'x1', name: 'run_command', arguments: {command: 'node mark.js && git push'}}]},
      {tool_calls: [{id: 'x2', name: 'run_command', arguments: {command: 'node mark.js > out.txt'}}]},
      {tool_calls: [{id: 'x3', name: 'run_command', arguments: {command: 'node test.js || node mark.js'}}]},
      {content: 'done'},
    )
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(toolResults(server.requests[1]!)['x1']).to.contain('segment 2').and.contain('git').and.contain('nothing was run')
    expect(toolResults(server.requests[2]!)['x2']).to.contain('redirections')
    // node test.js fails (the bug), so || runs node mark.js.
    expect(toolResults(server.requests[3]!)['x3']).to.contain('"ran":true')
    expect(await readFile(path.join(repo, 'marked.txt'), 'utf8')).to.equal('ran')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls!.map((c) => c.decision)).to.deep.equal(['denied', 'auto', 'auto'])
  })

  it('falls back to the JSON reply protocol when the endpoint rejects tools with 400', async () => {
    const file = await setup()
    server.script(
      'fix',
      {status: 400, body: {error: {message: 'this model does not support tools', type: 'invalid_request_error'}}},
      {content: JSON.stringify({tool: 'read_file', arguments: {path: 'calc.js'}})},
      {content: JSON.stringify({final: 'read it'})},
    )
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(server.requests[0]!.body.tools).to.have.length.greaterThan(0)
    const retold = server.requests[1]!.body
    expect(retold.tools).to.equal(undefined)
    expect(retold.messages[0]!.content).to.contain('{"tool": "<name>", "arguments": {...}}').and.contain('read_file')
    const results = server.requests[2]!.body.messages.filter((m) => m.role === 'user' && m.content.startsWith('Result of read_file'))
    expect(results).to.have.length(1)
    expect(results[0]!.content).to.contain('return a - b')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect((snap!.outputs as Record<string, unknown>)['value']).to.equal('read it')
    expect((snap!.inputs as Record<string, unknown>)['protocol']).to.equal('json')
  })

  it('checks the final answer against output_schema, sending an invalid one back (bounded repairs)', async () => {
    const file = await setup('', '    output_schema: answer.schema.json\n')
    await writeFile(
      path.join(dir, 'p', 'answer.schema.json'),
      JSON.stringify({type: 'object', required: ['fixed'], additionalProperties: false, properties: {fixed: {type: 'boolean'}}}),
    )
    server.script('fix', {content: 'I fixed it'}, {content: '{"fixed": "yes"}'}, {content: '{"fixed": true}'})
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(0)
    expect(server.requests[1]!.body.messages.at(-1)!.content).to.contain('not JSON')
    expect(server.requests[2]!.body.messages.at(-1)!.content).to.contain('/fixed must be boolean')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect((snap!.outputs as Record<string, unknown>)['value']).to.deep.equal({fixed: true})
    // One pipe validate of the pipeline as it ran and of a copy that reads a field the schema does not
    // have: each file is judged on its own, and the exit code is the typo's.
    const typoFile = path.join(dir, 'p', 'typo.yaml')
    await writeFile(
      typoFile,
      `${await readFile(file, 'utf8')}    next: after\n  - id: after\n    kind: end\n    status: succeeded\n    reason: "\${{ steps.fix.outputs.value.fixd }}"\n`,
    )
    const checked = await pipe(['validate', file, typoFile], {cwd: repo})
    expect(checked.code).to.equal(2)
    const out = checked.stdout + checked.stderr
    expect(out, 'the pipeline as it ran is valid').to.contain(`ok  ${file} (pipeline)`)
    expect(out).to.contain('1 error(s) in 1 of 2 file(s)')
    expect(out).to.contain('typo.yaml:').and.contain('steps.fix.outputs.value has no field "fixd"').and.not.contain('unreachable')
  })

  it('keeps secrets out of the transcript: the prompt, tool results and replies are masked in requests and records', async () => {
    const file = await setup()
    const token = 'tok-3f9a8b7c6d5e4f3a2b1c'
    await writeFile(path.join(dir, 'p', 'task.md'), 'Deploy with {{token}}: {{task}}\n')
    await writeFile(
      file,
      (await readFile(file, 'utf8'))
        .replace('name: agent\n', 'name: agent\nsecrets: [API_TOKEN]\n')
        .replace('      task: add() subtracts\n', '      task: add() subtracts\n      token: ${{ secrets.API_TOKEN }}\n'),
    )
    await writeFile(path.join(repo, 'deploy.cfg'), `token=${token}\n`)
    server.script('fix', {tool_calls: [{id: 'r', name: 'read_file', arguments: {path: 'deploy.cfg'}}]}, {content: `the token is ${token}`})
    const result = await pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {
      cwd: repo,
      env: {...env(), API_TOKEN: token},
      timeoutMs: 120000,
    })
    expect(result.code, result.stderr).to.equal(0)
    expect(JSON.stringify(server.requests.map((r) => r.body.messages))).not.to.contain(token)
    const store = path.join(repo, '.pipe')
    const files = (await readdir(store, {recursive: true, withFileTypes: true})).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
    expect(
      files.some((f) => f.includes(`${path.sep}state${path.sep}`)),
      'the conversation state is among the records',
    ).to.equal(true)
    const leaking = []
    for (const f of files) if ((await readFile(f, 'utf8')).includes(token)) leaking.push(f)
    expect(leaking).to.deep.equal([])
  })

  it('masks a secret that has quotes and backslashes in a tool result (the nearest lines of a failed edit block), in requests and records', async () => {
    const file = await setup()
    // JSON writes it escaped (\" and \\): masking the JSON text of a result would not find it.
    const token = 'tok"3f9a\\8b7c6d5e4f3a'
    await writeFile(file, (await readFile(file, 'utf8')).replace('name: agent\n', 'name: agent\nsecrets: [API_TOKEN]\n'))
    await writeFile(path.join(repo, 'deploy.cfg'), `token=${token}\n`)
    const block = 'deploy.cfg\n<<<<<<< SEARCH\ntoken=wrong\n=======\ntoken=right\n>>>>>>> REPLACE\n'
    server.script('fix', {tool_calls: [{id: 'e', name: 'apply_edit_blocks', arguments: {blocks: block}}]}, {content: 'done'})
    const result = await pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {
      cwd: repo,
      env: {...env(), API_TOKEN: token},
      timeoutMs: 120000,
    })
    expect(result.code, result.stderr).to.equal(0)
    const sent = toolResults(server.requests[1]!)['e']!
    expect(sent, 'the failed block came back with the nearest lines').to.contain('nearest').and.contain('[REDACTED]')
    // The secret's tail, twelve hex digits: written raw or JSON-escaped it is there; a record's
    // sha256 seals hold four given hex digits now and then, but not twelve.
    const tail = '8b7c6d5e4f3a'
    expect(sent).not.to.contain(tail)
    const store = path.join(repo, '.pipe')
    const files = (await readdir(store, {recursive: true, withFileTypes: true})).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name))
    const leaking = []
    for (const f of files) if ((await readFile(f, 'utf8')).includes(tail)) leaking.push(f)
    expect(leaking).to.deep.equal([])
  })

  it('runs at most 50 tool calls of one reply; the rest are answered with an error, unrun', async () => {
    const file = await setup()
    // Two calls past the bound are enough to show the rest are refused, not only the one after it.
    const calls = Array.from({length: 52}, (_, i) => ({
      id: `c${i}`,
      name: 'apply_edit_blocks',
      arguments: {blocks: `new${i}.txt\n<<<<<<< SEARCH\n=======\nx\n>>>>>>> REPLACE\n`},
    }))
    server.script('fix', {tool_calls: calls}, {content: 'done'})
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(0)
    const created = (await readdir(repo)).filter((n) => /^new\d+\.txt$/.test(n))
    expect(created).to.have.length(50)
    expect(existsSync(path.join(repo, 'new50.txt'))).to.equal(false)
    // Every call of the reply got its result (the endpoint requires one per call id).
    const results = toolResults(server.requests[1]!)
    expect(Object.keys(results)).to.have.length(52)
    expect(results['c51']).to.contain('at most 50 tools').and.contain('not run')
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.tool_calls!.filter((c) => c.decision === 'invalid').map((c) => c.call_id)).to.deep.equal(calls.slice(50).map((c) => c.id))
  })

  it('ends gave_up at max_turns; the unrouted failure fails the run', async () => {
    const file = await setup('', '    max_turns: 2\n')
    server.script('fix', {tool_calls: [{name: 'read_file', arguments: {path: 'calc.js'}}]}, {tool_calls: [{name: 'read_file', arguments: {path: 'calc.js'}}]})
    const result = await run(file)
    expect(result.code, result.stderr).to.equal(1)
    expect(server.count()).to.equal(2)
    const [snap] = await snapshots(json<RunJson>(result).run_id)
    expect(snap!.decisions[0]!.decision).to.equal('gave_up')
    // The same safe call again, with nothing changed in between, is answered from the cache.
    expect(snap!.tool_calls!.map((c) => c.cache_hit)).to.deep.equal([false, true])
  })

  it('fails with E_CONFIG and a hint on the offline provider', async () => {
    const file = await setup()
    const result = await pipe(['run', file, '--provider', 'offline', '--policy', path.join(dir, 'p', 'policy.yaml')], {
      cwd: repo,
      env: {PIPE_HOME: path.join(dir, 'home')},
    })
    expect(result.code).to.equal(1)
    expect(result.stderr).to.contain('Error [E_CONFIG]').and.contain('offline rules provider').and.contain('OPENAI_BASE_URL')
    expect(server.count()).to.equal(0)
  })

  it('validate names unknown tools with did-you-mean and bad fields at file:line:col', async () => {
    const file = await setup('', '    max_turns: 0\n')
    await writeFile(file, (await readFile(file, 'utf8')).replace('tools: [list_directory,', 'tools: [read_fil, list_directory,'))
    const result = await pipe(['validate', file], {cwd: repo})
    expect(result.code).to.equal(2)
    const out = result.stdout + result.stderr
    expect(out).to.match(/agent\.yaml:\d+:\d+.*unknown tool "read_fil".*did you mean "read_file"/i)
    expect(out).to.match(/agent\.yaml:\d+:\d+.*max_turns/)
  })

  it('continues after a SIGKILL during a turn without running again a call that changed files', async () => {
    const file = await setup()
    const append = 'calc.js\n<<<<<<< SEARCH\nexport function add(a, b) {\n=======\n// checked\nexport function add(a, b) {\n>>>>>>> REPLACE\n'
    server.script('fix', {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: append}}]}, {hang: true}, {content: 'added the comment'})
    const childEnv: NodeJS.ProcessEnv = {...process.env, ...env(), NO_COLOR: '1'}
    delete childEnv.PIPE_STORE
    delete childEnv.OPENAI_API_KEY
    const child = spawn(process.execPath, [bin, 'run', file, '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: childEnv, stdio: 'ignore'})
    const exited = new Promise((resolve) => child.on('exit', resolve))
    await server.waitForRequests(2)
    child.kill('SIGKILL')
    await exited
    // The killed run, the store's only one.
    const [runId] = (await readdir(path.join(repo, '.pipe', 'runs'))).filter((n) => n.startsWith('R-'))
    expect(runId, 'the killed run is recorded').to.be.a('string')
    // pipe resume's session in this process, with the endpoint its process would have (the kill above is a real process's).
    const resumed = await resumeHere(repo, runId!, env())
    expect(resumed.code, JSON.stringify(resumed.error)).to.equal(0)
    const text = await readFile(path.join(repo, 'calc.js'), 'utf8')
    expect(text.match(/\/\/ checked/g)).to.have.length(1)
    // Turn 1 was not asked again: the resumed request carries the edit's result.
    expect(server.count()).to.equal(3)
    expect(toolResults(server.requests[2]!)['e1']).to.contain('"applied":true')
    const [snap] = await snapshots(runId!)
    expect(snap!.tool_calls!.filter((c) => c.name === 'apply_edit_blocks')).to.have.length(1)
  })
})
