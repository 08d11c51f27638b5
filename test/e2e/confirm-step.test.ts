/**
 * Issue 29 item 6: any step waits for a person before it acts (confirm: true, or the policy's
 * confirm.kinds / confirm.commands), exactly like an agent's tool call: pipe confirm --yes runs it,
 * --no gives it the outcome denied, --for step|run answers later confirmations, and a deadline
 * (confirm.timeout_s) leaves the run paused, saying so.
 *
 * The first of each command the file uses (run, confirm, validate) is a `pipe` process (`run`), and
 * so are the terminal's prompts (stdin); the other commands run in this process (`here`,
 * test/helpers/pipe-here.ts: the same command, output and exit code).
 */
import {expect} from 'chai'
import {execFileSync, spawn} from 'node:child_process'
import {existsSync} from 'node:fs'
import {readdir, readFile, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {bin, json, pipe, tempDir, testHome} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {expectAuditPasses} from '../helpers/stores.js'

interface RunJson {
  run_id: string
  status: string
  next_command?: string
  reason?: string
  pending?: {kind: string; step: string; deadline?: string; action?: {tool: string; call_id: string; rule?: string; argv?: string[][]}}
  error?: {code: string}
}
interface Snap {
  step: {name: string}
  inputs: {confirmation?: {decision: string; by: string; scope: string; rule: string; note?: string}}
  decisions: Array<{decision: string; reason: string; next_step: string | null}>
}

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-confirm-step-'))
  execFileSync('git', ['init', '-q', '-b', 'main', dir])
})
afterEach(async () => cleanup())

const env = {PIPE_INTERACTIVE: '0'}
const run = (args: string[]): ReturnType<typeof pipe> => pipe(args, {cwd: dir, env, timeoutMs: 60000})
/** `run(args)` in this process. */
const here = (args: string[]): ReturnType<typeof pipe> => pipeHere(args, {cwd: dir, env})
/** A command whose only effect is a file: it exists if and only if the command ran. */
const makes = (file: string): string[] => ['node', '-e', `require('fs').writeFileSync(${JSON.stringify(file)}, 'ran')`]

async function files(pipeline: string, policy: string): Promise<void> {
  await writeFile(path.join(dir, 'p.yaml'), pipeline)
  await writeFile(path.join(dir, 'policy.yaml'), policy)
}
const POLICY = `version: 1\nallowed_commands:\n  - [node, -e, "..."]\n  - [git, "..."]\n`

async function snapshots(runId: string): Promise<Snap[]> {
  const folder = path.join(dir, '.pipe', 'runs', runId, 'snapshots')
  const names = (await readdir(folder)).filter((n) => n.endsWith('.json')).sort()
  return Promise.all(names.map(async (n) => JSON.parse(await readFile(path.join(folder, n), 'utf8')) as Snap))
}
async function events(runId: string): Promise<Array<{event: string; reason?: string; step?: string}>> {
  const text = await readFile(path.join(dir, '.pipe', 'runs', runId, 'events.jsonl'), 'utf8')
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as {event: string; reason?: string; step?: string})
}
/** That `pipe audit verify RUN` passes, checked in this process (helpers/stores.ts). */
async function auditGreen(runId: string): Promise<void> {
  await expectAuditPasses(dir, runId)
}

const ONE_STEP = `version: 1
name: confirm-one
steps:
  - id: touch
    kind: command
    run: ${JSON.stringify(makes('made.txt'))}
    confirm: true
    on: {denied: refused, failure: refused}
    next: done
  - {id: refused, kind: end, status: succeeded, reason: the person said no}
  - {id: done, kind: end, status: succeeded, reason: it ran}
`

describe('confirmation of any step (CLI)', function () {
  this.timeout(180000)

  it('a command step with confirm: true pauses before it runs (the hint names pipe confirm); --yes runs it, recorded in its snapshot', async () => {
    await files(ONE_STEP, POLICY)
    const paused = await run(['run', 'p.yaml', '--policy', 'policy.yaml'])
    expect(paused.code, paused.stderr).to.equal(10)
    const runId = /run (R-\d{8}-\d{4})/.exec(paused.stdout)![1]!
    expect(paused.stdout).to.contain(`pipe confirm ${runId} --yes`)
    expect(paused.stdout).to.contain('The step asks to run (the step says confirm: true)')
    expect(existsSync(path.join(dir, 'made.txt')), 'the command ran before anyone confirmed it').to.equal(false)
    const record = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runId, 'run.json'), 'utf8')) as RunJson
    expect(record.status).to.equal('awaiting_input')
    expect(record.pending?.kind).to.equal('confirm')
    expect(record.pending?.action?.argv).to.deep.equal([makes('made.txt')])

    const yes = await here(['confirm', runId, '--yes', '--note', 'looked at it', '--json'])
    expect(yes.code, yes.stderr).to.equal(0)
    expect(json<RunJson>(yes).status).to.equal('succeeded')
    expect(await readFile(path.join(dir, 'made.txt'), 'utf8')).to.equal('ran')
    const [touch] = await snapshots(runId)
    expect(touch!.inputs.confirmation).to.include({decision: 'yes', scope: 'call', note: 'looked at it', rule: 'the step says confirm: true'})
    expect((await events(runId)).map((e) => e.event)).to.include.members(['paused', 'confirm_given', 'resumed'])
    await auditGreen(runId)
  })

  it('--no: the step does not run and ends with the outcome denied, which on: routes; unrouted, the run fails', async () => {
    await files(ONE_STEP, POLICY)
    const paused = json<RunJson>(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    const no = await run(['confirm', paused.run_id, '--no', '--note', 'not on a Friday', '--json'])
    expect(no.code, no.stderr).to.equal(0)
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
    const [touch, end] = await snapshots(paused.run_id)
    expect(touch!.decisions.at(-1)).to.include({decision: 'denied', next_step: 'refused'})
    expect(touch!.decisions.at(-1)!.reason).to.contain('not on a Friday')
    expect(touch!.inputs.confirmation).to.include({decision: 'no', note: 'not on a Friday'})
    expect(end!.step.name).to.equal('refused')
    await auditGreen(paused.run_id)

    // The same step with no route for denied: the refusal fails the run, never reads as success.
    await files(ONE_STEP.replace('on: {denied: refused, failure: refused}', 'on: {failure: refused}'), POLICY)
    const again = json<RunJson>(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    const failed = await here(['confirm', again.run_id, '--no', '--json'])
    expect(failed.code).to.not.equal(0)
    expect(json<RunJson>(failed)).to.deep.include({status: 'failed'})
    expect(json<RunJson>(failed).error?.code).to.equal('E_POLICY_DENIED')
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
  })

  it('a policy rule by command pattern pauses a git push (and not git status) until it is confirmed', async () => {
    const remote = path.join(dir, 'remote.git')
    execFileSync('git', ['init', '-q', '--bare', remote])
    execFileSync('git', ['-C', dir, '-c', 'user.name=t', '-c', 'user.email=t@e', 'commit', '-q', '--allow-empty', '-m', 'first'])
    await files(
      `version: 1
name: push
steps:
  - {id: status, kind: command, run: [git, status, --short], next: push}
  - {id: push, kind: command, run: [git, push, ${JSON.stringify(remote)}, "HEAD:refs/heads/main"]}
`,
      `${POLICY}confirm:\n  commands: ["git push *", "rm -rf *"]\n`,
    )
    const paused = json<RunJson>(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    expect(paused.status).to.equal('awaiting_input')
    expect(paused.pending?.step).to.equal('push')
    expect(paused.pending?.action?.rule).to.equal(`the policy's confirm.commands[0] "git push *" matches "git push ${remote} HEAD:refs/heads/main"`)
    const remoteHead = (): string | null => {
      try {
        return execFileSync('git', ['-C', remote, 'rev-parse', '--verify', '-q', 'refs/heads/main'], {encoding: 'utf8'}).trim()
      } catch {
        return null
      }
    }
    expect(remoteHead(), 'pushed before anyone confirmed it').to.equal(null)
    const [status] = await snapshots(paused.run_id)
    expect(status!.step.name).to.equal('status')
    expect(status!.inputs.confirmation).to.equal(undefined)
    const yes = await here(['confirm', paused.run_id, '--yes', '--json'])
    expect(yes.code, yes.stderr).to.equal(0)
    expect(remoteHead()).to.equal(execFileSync('git', ['-C', dir, 'rev-parse', 'HEAD'], {encoding: 'utf8'}).trim())
  })

  it('--for run: one yes confirms every later confirmation of the run, across steps, recorded as used', async () => {
    await files(
      `version: 1
name: many
steps:
  - {id: one, kind: command, run: ${JSON.stringify(makes('one.txt'))}, next: two}
  - {id: two, kind: command, run: ${JSON.stringify(makes('two.txt'))}, confirm: true, next: three}
  - {id: three, kind: command, run: ${JSON.stringify(makes('three.txt'))}}
`,
      `${POLICY}confirm:\n  kinds: [command]\n`,
    )
    const paused = json<RunJson>(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    expect(paused.pending?.step).to.equal('one')
    expect(paused.pending?.action?.rule).to.equal("the policy's confirm.kinds[0] names the kind command")
    const yes = await here(['confirm', paused.run_id, '--yes', '--for', 'run', '--json'])
    expect(yes.code, yes.stderr).to.equal(0)
    expect(json<RunJson>(yes).status).to.equal('succeeded')
    for (const f of ['one.txt', 'two.txt', 'three.txt']) expect(existsSync(path.join(dir, f)), f).to.equal(true)
    const used = (await events(paused.run_id)).filter((e) => e.event === 'confirm_used').map((e) => e.step)
    expect(used).to.deep.equal(['two', 'three'])
    expect((await snapshots(paused.run_id)).map((s) => s.inputs.confirmation?.scope)).to.deep.equal(['run', 'run', 'run'])
    await auditGreen(paused.run_id)
  })

  it('--for step: one yes covers every loop of that step in the run, and only that step', async () => {
    await files(
      `version: 1
name: loop
steps:
  - {id: again, kind: command, run: [node, -e, "require('fs').appendFileSync('loops.txt', 'x')"], confirm: true, next: again, max_iterations: 3, on_exhausted: other}
  - {id: other, kind: command, run: ${JSON.stringify(makes('other.txt'))}, confirm: true}
`,
      POLICY,
    )
    const paused = json<RunJson>(await here(['run', 'p.yaml', '--policy', 'policy.yaml', '--json']))
    expect(paused.pending?.action?.call_id).to.equal('again#1')
    const step = json<RunJson>(await here(['confirm', paused.run_id, '--yes', '--for', 'step', '--json']))
    expect(step.status).to.equal('awaiting_input')
    expect(step.pending?.step).to.equal('other')
    expect(await readFile(path.join(dir, 'loops.txt'), 'utf8')).to.equal('xxx')
    expect(existsSync(path.join(dir, 'other.txt'))).to.equal(false)
    expect((await events(paused.run_id)).filter((e) => e.event === 'confirm_used').map((e) => e.step)).to.deep.equal(['again', 'again'])
    const done = await here(['confirm', paused.run_id, '--yes', '--json'])
    expect(json<RunJson>(done).status).to.equal('succeeded')
    expect(existsSync(path.join(dir, 'other.txt'))).to.equal(true)
  })

  it('a deadline passes while a person is asked at the terminal: the run stays paused and says so; pipe confirm --yes still continues it', async () => {
    await files(ONE_STEP, `${POLICY}confirm:\n  timeout_s: 1\n`)
    // stdin stays open and nobody types: only the deadline can end the prompt.
    const child = spawn(process.execPath, [bin, 'run', 'p.yaml', '--policy', 'policy.yaml'], {
      cwd: dir,
      env: {...process.env, NO_COLOR: '1', PIPE_INTERACTIVE: '1', PIPE_HOME: testHome},
    })
    let out = ''
    let err = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d))
    const killer = setTimeout(() => child.kill('SIGKILL'), 60000)
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    clearTimeout(killer)
    expect(code, err).to.equal(10)
    expect(err).to.contain('Run it? [yes/no]')
    expect(err).to.match(/confirmation deadline passed at \S+; the run stays paused/)
    const runId = /run (R-\d{8}-\d{4})/.exec(out)![1]!
    expect(out).to.contain(`pipe confirm ${runId} --yes`)
    expect(existsSync(path.join(dir, 'made.txt'))).to.equal(false)
    const record = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runId, 'run.json'), 'utf8')) as {status: string; status_reason: string}
    expect(record.status).to.equal('awaiting_input')
    expect(record.status_reason).to.match(/^confirmation deadline passed at /)
    expect((await events(runId)).map((e) => e.event)).to.include('confirm_deadline_passed')
    const shown = await here(['runs', 'show', runId])
    expect(shown.stdout).to.contain('confirmation deadline passed at')

    const yes = await here(['confirm', runId, '--yes', '--json'])
    expect(yes.code, yes.stderr).to.equal(0)
    expect(await readFile(path.join(dir, 'made.txt'), 'utf8')).to.equal('ran')
    expect((await events(runId)).find((e) => e.event === 'confirm_given')?.reason).to.contain('after its deadline')
    await auditGreen(runId)
  })

  it('at the terminal the prompt asks, and a yes typed there runs the step', async () => {
    await files(ONE_STEP, POLICY)
    const asked = await pipe(['run', 'p.yaml', '--policy', 'policy.yaml'], {
      cwd: dir,
      env: {PIPE_INTERACTIVE: '1'},
      input: 'yes\nfine by me\n',
      timeoutMs: 60000,
    })
    expect(asked.code, asked.stderr).to.equal(0)
    expect(asked.stderr).to.contain('step: touch (command, run touch#1)')
    expect(asked.stderr).to.contain('Run it? [yes/no]')
    expect(await readFile(path.join(dir, 'made.txt'), 'utf8')).to.equal('ran')
    const runId = /run (R-\d{8}-\d{4})/.exec(asked.stdout)![1]!
    expect((await snapshots(runId))[0]!.inputs.confirmation).to.include({decision: 'yes', note: 'fine by me'})
  })

  it('--dry-run names the steps that will pause for pipe confirm, and why, judging an argv it resolved from inputs', async () => {
    await files(
      `version: 1
name: dry
inputs: {remote: {type: string, default: origin}}
steps:
  - {id: status, kind: command, run: [git, status], next: push}
  - {id: push, kind: command, run: [git, push, "\${{ inputs.remote }}"], next: wipe}
  - {id: wipe, kind: command, run: ${JSON.stringify(makes('wiped.txt'))}, confirm: true}
`,
      `${POLICY}confirm: {commands: ["git push *"]}\n`,
    )
    const text = await here(['run', 'p.yaml', '--dry-run'])
    expect(text.code, text.stderr).to.equal(0)
    expect(text.stdout).to.include('the run will pause before push for pipe confirm (the policy\'s confirm.commands[0] "git push *" matches "git push origin")')
    expect(text.stdout).to.include('the run will pause before wipe for pipe confirm (the step says confirm: true)')
    expect(text.stdout).not.to.match(/pause before status/)
    const plan = json<{waits: Array<{step: string; for: string; because?: string}>}>(await here(['run', 'p.yaml', '--dry-run', '--json']))
    expect(plan.waits.map((w) => [w.step, w.for])).to.deep.equal([
      ['push', 'confirm'],
      ['wipe', 'confirm'],
    ])
    expect(existsSync(path.join(dir, 'wiped.txt'))).to.equal(false)
    expect(existsSync(path.join(dir, '.pipe'))).to.equal(false)
  })

  it('pipe validate checks confirm: on a step and in the policy, at file:line:col', async () => {
    await files(ONE_STEP.replace('confirm: true', 'confirm: "yes"'), `version: 1\nconfirm:\n  kinds: publish\n`)
    const step = await run(['validate', 'p.yaml'])
    expect(step.code).to.not.equal(0)
    expect(step.stdout + step.stderr).to.contain('p.yaml:7:14  steps[0].confirm  must be boolean, found "yes"')
    const policy = await here(['validate', 'policy.yaml'])
    expect(policy.code).to.not.equal(0)
    expect(policy.stdout + policy.stderr).to.contain('policy.yaml:3:10  confirm.kinds  must be array, found "publish"')
    // The map form was taken: the list form's "must be array" at confirm is not said.
    expect(policy.stdout + policy.stderr).to.not.contain('confirm  must be array')
    // Routing denied is allowed on any step (a policy rule may pause it).
    await files(ONE_STEP.replace('    confirm: true\n', ''), POLICY)
    const ok = await here(['validate', 'p.yaml'])
    expect(ok.code, ok.stdout + ok.stderr).to.equal(0)
  })
})
