/**
 * What a user sees is honest and quiet (issue 30 item 8, 9; issue 29 items 3, 7): failures marked
 * as failures, the daily log in pipe's own folder, help that speaks to users, every error carrying
 * a trace id that finds it in the log and the run's records, and `yes`/`ok`/`no` as decisions.
 *
 * Each behaviour is seen once from a real `pipe` process (the first command of each, or the one that
 * is the test's subject); the commands around it run in this process (test/helpers/pipe-here.ts: the
 * CLI's path from argv, its output and exit code). The terminal prompt reads stdin: a process.
 */
import {expect} from 'chai'
import {readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {snapshotsIn} from '../helpers/stores.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-output-'))
})
afterEach(async () => cleanup())

async function file(name: string, text: string): Promise<string> {
  const full = path.join(dir, name)
  await writeFile(full, text)
  return full
}

async function logsIn(folder: string): Promise<string> {
  const names = await readdir(folder).catch(() => [] as string[])
  return (await Promise.all(names.map((n) => readFile(path.join(folder, n), 'utf8')))).join('')
}

describe("the daily log lives in pipe's own folder (CLI)", function () {
  this.timeout(60000)

  it('writes to ~/.local/state/pipe/logs without PIPE_HOME or XDG_STATE_HOME, and says so', async () => {
    const r = await pipe(['runs', 'show', 'R-20260101-0001', '--store', path.join(dir, 'store-one')], {
      env: {PIPE_HOME: undefined, XDG_STATE_HOME: undefined, HOME: dir},
    })
    expect(r.code).to.not.equal(0)
    const logs = path.join(dir, '.local', 'state', 'pipe', 'logs')
    const names = await readdir(logs)
    expect(names).to.have.length(1)
    expect(names[0]).to.match(/^orchestrator-\d{8}\.log$/)
    expect(r.stderr).to.include(`Log: ${path.join(logs, names[0]!)}`)
    expect(await logsIn(logs)).to.include('store-one')
    expect(await readdir(dir)).to.not.include('.canonical')
  })

  it('writes to $XDG_STATE_HOME/pipe/logs when set, and PIPE_HOME still wins over it', async () => {
    const state = path.join(dir, 'state')
    // (~/.local/state as a process sees it: the test before; XDG_STATE_HOME and PIPE_HOME here.)
    await pipeHere(['runs', 'show', 'R-20260101-0001', '--store', path.join(dir, 'store-one')], {env: {PIPE_HOME: undefined, XDG_STATE_HOME: state, HOME: dir}})
    expect(await logsIn(path.join(state, 'pipe', 'logs'))).to.include('store-one')
    const home = path.join(dir, 'home')
    await pipeHere(['runs', 'show', 'R-20260101-0001', '--store', path.join(dir, 'store-two')], {env: {PIPE_HOME: home, XDG_STATE_HOME: state, HOME: dir}})
    expect(await logsIn(path.join(home, 'logs'))).to.include('store-two')
    expect(await logsIn(path.join(state, 'pipe', 'logs'))).to.not.include('store-two')
  })

  it('pipe --help says where the log is and lists every variable pipe reads', async () => {
    const r = await pipe(['--help'])
    expect(r.code).to.equal(0)
    const env = r.stdout.slice(r.stdout.indexOf('ENVIRONMENT'))
    expect(env).to.include('~/.local/state/pipe/logs')
    expect(env).to.not.include('.canonical')
    for (const name of [
      'PIPE_STORE',
      'PIPE_CEILING_DIRECTORIES',
      'PIPE_HOME',
      'XDG_STATE_HOME',
      'OPENAI_API_KEY',
      'OPENAI_BASE_URL',
      'PIPE_INTERACTIVE',
      'PIPE_AUDIT_KEY',
      'PIPE_SIGNAL_GRACE_MS',
      'PIPE_BWRAP',
      'PIPE_DEBUG',
    ]) {
      expect(env, name).to.match(new RegExp(`^ +${name} `, 'm'))
    }
    const doc = json<{environment: Array<{name: string}>}>(await pipeHere(['--json']))
    expect(doc.environment.map((e) => e.name)).to.include.members(['PIPE_INTERACTIVE', 'PIPE_AUDIT_KEY', 'PIPE_SIGNAL_GRACE_MS'])
  })
})

const POLICY =
  'version: 1\nallowed_commands:\n  - [node, -e, "process.exit(0)"]\n  - [node, -e, "process.exit(2)"]\nforbidden_paths: [".git/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 30000}\n'

describe('stats and export speak of runs and steps unless a run has tasks (CLI)', function () {
  this.timeout(120000)

  it('a run of commands alone has steps, not a coding task', async () => {
    const home = path.join(dir, 'home')
    const policy = await file('policy.yaml', POLICY)
    const p = await file(
      'review.yaml',
      'version: 1\nname: review\nsteps:\n  - {id: diff, kind: command, run: [node, -e, "process.exit(0)"], next: lint}\n  - {id: lint, kind: command, run: [node, -e, "process.exit(2)"], on: {failure: done}}\n  - {id: done, kind: end, status: succeeded, reason: reviewed}\n',
    )
    const run = json<{run_id: string; status: string}>(
      await pipeHere(['run', p, '--policy', policy, '--text', 'x', '--json'], {cwd: dir, env: {PIPE_HOME: home}}),
    )
    expect(run.status).to.equal('succeeded')
    // stats as a process prints it; its --json and export in this process.
    const stats = await pipe(['stats'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(stats.code).to.equal(0)
    expect(stats.stdout).to.include('steps: 3, 1 failed')
    expect(stats.stdout).to.not.match(/task/i)
    const doc = json<{totals: Record<string, unknown>}>(await pipeHere(['stats', '--json'], {cwd: dir, env: {PIPE_HOME: home}}))
    expect(doc.totals).to.deep.include({runs: 1, steps: 3, failed_steps: 1, tasks: 0})
    const exported = json<{files: string[]}>(await pipeHere(['export', run.run_id, '--dir', 'art', '--json'], {cwd: dir, env: {PIPE_HOME: home}}))
    const mine = exported.files.map((f) => f.split(path.sep).join('/').replace(run.run_id, 'RUN'))
    expect(mine).to.have.members([
      'runs/RUN/state.json',
      'runs/RUN/timeline.md',
      'runs/RUN/steps/01_diff/qa_step_01_diff.log',
      'runs/RUN/steps/02_lint/qa_step_01_lint.log',
    ])
    const state = JSON.parse(await readFile(path.join(dir, 'art', 'runs', run.run_id, 'state.json'), 'utf8')) as Record<string, unknown>
    expect(state).to.deep.include({current_task_id: null, attempts_by_task: {}})
  })

  it('help for stats and export speaks to users, not of seed documents', async () => {
    for (const command of ['stats', 'export']) {
      const r = await pipeHere([command, '--help'])
      expect(r.stdout, command).to.not.match(/seed/i)
    }
    // (The root's help from a process: the test before.)
    const root = await pipeHere(['--help'])
    expect(root.stdout).to.not.match(/seed/i)
  })
})

describe('progress marks failures as failures (CLI)', function () {
  this.timeout(120000)

  it('marks a failure outcome ✗ whether the pipeline routes it or not, in a child run too', async () => {
    const home = path.join(dir, 'home')
    const policy = await file('policy.yaml', POLICY)
    await file(
      'item.yaml',
      'version: 1\nname: item\ninputs:\n  ok: {type: boolean}\nsteps:\n  - {id: pick, kind: choice, choices: [{when: "${{ inputs.ok }}", next: fine}], default: stat}\n  - {id: fine, kind: command, run: [node, -e, "process.exit(0)"]}\n  - {id: stat, kind: command, run: [node, -e, "process.exit(2)"], on: {failure: done}}\n  - {id: done, kind: end, status: succeeded, reason: noted}\n',
    )
    const p = await file(
      'main.yaml',
      'version: 1\nname: main\nsteps:\n  - {id: each, kind: foreach, items: "${{ [true, false] }}", as: ok, pipeline: ./item.yaml, with: {ok: "${{ ok }}"}, concurrency: 1, next: lint}\n  - {id: lint, kind: command, run: [node, -e, "process.exit(2)"]}\n',
    )
    const r = await pipe(['run', p, '--policy', policy, '--text', 'x'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(r.code, r.stderr).to.equal(1)
    const lines = r.stderr.split('\n')
    const line = (pattern: RegExp): string => lines.find((l) => pattern.test(l)) ?? `(no line matching ${pattern})`
    expect(line(/each\[0\] #2 fine success/)).to.match(/^\s+✓ /)
    expect(line(/each\[1\] #2 stat failure/)).to.match(/^\s+✗ /)
    expect(line(/each\[1\] #3 done succeeded/)).to.match(/^\s+✓ /)
    expect(line(/ #2 lint failure/)).to.match(/^ {2}✗ /)
  })

  // (Progress from a process: the test before.)
  it('marks a step that ended blocked or partial ! (neither done nor failed), not ✓', async () => {
    const home = path.join(dir, 'home')
    const policy = await file('policy.yaml', POLICY)
    await file(
      'item.yaml',
      'version: 1\nname: item\ninputs:\n  code: {type: integer}\nsteps:\n  - {id: work, kind: command, run: [node, -e, "process.exit(${{ inputs.code }})"]}\n',
    )
    const p = await file(
      'main.yaml',
      'version: 1\nname: main\nsteps:\n  - {id: each, kind: foreach, items: "${{ [0, 3] }}", as: code, pipeline: ./item.yaml, with: {code: "${{ code }}"}, on: {partial: done}}\n  - {id: done, kind: end, status: succeeded, reason: noted}\n',
    )
    const r = await pipeHere(['run', p, '--policy', policy, '--text', 'x'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(r.code, r.stderr).to.equal(0)
    const lines = r.stderr.split('\n')
    expect(lines.find((l) => / #1 each partial/.test(l)) ?? r.stderr).to.match(/^ {2}! /)
    expect(lines.find((l) => / #2 done succeeded/.test(l)) ?? r.stderr).to.match(/^ {2}✓ /)
  })
})

describe('--dry-run speaks of a review only for a pipeline that has one (CLI)', function () {
  this.timeout(60000)

  it('says nothing of a review or answers for a pipeline without such steps, and names the step that pauses for the default', async () => {
    const home = path.join(dir, 'home')
    const p = await file('tiny.yaml', 'version: 1\nname: tiny\nsteps:\n  - {id: a, kind: noop}\n')
    const tiny = await pipe(['run', p, '--text', 'x', '--dry-run'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(tiny.code, tiny.stderr).to.equal(0)
    expect(tiny.stdout).to.not.match(/review|answers|pause/)
    const given = await pipeHere(['run', p, '--text', 'x', '--dry-run', '--decision', 'go'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(given.stdout).to.include('review decision go (no step of this pipeline takes one)')
    const full = await pipeHere(['run', path.join(repoRoot, 'pipelines', 'default.yaml'), '--text', 'x', '--dry-run'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(full.stdout).to.include('review decision none given (the run will pause at manual_review)')
    expect(json<{waits: unknown}>(await pipeHere(['run', p, '--text', 'x', '--dry-run', '--json'], {cwd: dir, env: {PIPE_HOME: home}})).waits).to.deep.equal([])
  })
})

describe('yes, ok and no as review decisions (CLI)', function () {
  this.timeout(180000)
  const prd = path.join(repoRoot, 'examples', 'full-prd.md')
  const defaultPipeline = path.join(repoRoot, 'pipelines', 'default.yaml')

  async function reviewOutcome(runId: string): Promise<{decision: string; review_decision: unknown}> {
    // What `pipe snapshot show RUN --step manual_review --json` prints, read in-process.
    const review = (await snapshotsIn(dir, runId)).filter((s) => s.step.name === 'manual_review').at(-1)!
    return {decision: review.decisions.at(-1)!.decision, review_decision: (review.outputs as {review_decision?: unknown}).review_decision}
  }

  it('--decision takes YES, ok and y as go and no as drop, in any case; the record keeps the canonical value', async () => {
    const env = {PIPE_HOME: path.join(dir, 'home')}
    for (const [word, status] of [
      ['YES', 'succeeded'],
      ['Ok', 'succeeded'],
      ['y', 'succeeded'],
      ['Go', 'succeeded'],
      ['No', 'cancelled'],
    ] as const) {
      // The first word from a process, the others in this process.
      const r = await (word === 'YES' ? pipe : pipeHere)(['run', defaultPipeline, '--input', prd, '--decision', word, '--json'], {cwd: dir, env})
      const body = json<{run_id: string; status: string}>(r)
      expect(body.status, word).to.equal(status)
      expect((await reviewOutcome(body.run_id)).decision, word).to.equal(status === 'succeeded' ? 'go' : 'drop')
    }
    const bad = await pipeHere(['run', defaultPipeline, '--input', prd, '--decision', 'maybe', '--json'], {cwd: dir, env})
    expect(bad.code).to.equal(2)
    expect(json<{error: {code: string; message: string}}>(bad).error).to.deep.include({code: 'E_INVALID_ARGS', message: '--decision "maybe" is not a decision'})
    const paused = json<{run_id: string; status: string}>(await pipeHere(['run', defaultPipeline, '--input', prd, '--json'], {cwd: dir, env}))
    expect(paused.status).to.equal('awaiting_input')
    const reviewed = json<{status: string}>(await pipeHere(['review', paused.run_id, '--decision', 'OK', '--json'], {cwd: dir, env}))
    expect(reviewed.status).to.equal('succeeded')
    expect(await reviewOutcome(paused.run_id)).to.deep.equal({decision: 'go', review_decision: 'go'})
  })

  it('the terminal prompt takes Yes as go after refusing a word that is no decision', async () => {
    const env = {PIPE_HOME: path.join(dir, 'home')}
    const paused = json<{run_id: string}>(await pipeHere(['run', defaultPipeline, '--input', prd, '--json'], {cwd: dir, env}))
    // The prompt reads stdin: a process.
    const r = await pipe(['review', paused.run_id], {cwd: dir, env: {...env, PIPE_INTERACTIVE: '1'}, input: 'perhaps\nYes\nlooks right\n'})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stderr).to.include('"perhaps" is not go (yes, ok), hold or drop (no).')
    expect(await reviewOutcome(paused.run_id)).to.deep.equal({decision: 'go', review_decision: 'go'})
  })
})

describe('a long error is printed once (CLI)', function () {
  this.timeout(120000)

  it("a cassette miss's diff appears once on the terminal; progress and the result refer to it", async () => {
    const home = path.join(dir, 'home')
    const r = await pipe(
      [
        'run',
        path.join(repoRoot, 'pipelines', 'default.yaml'),
        '--provider',
        'openai',
        '--replay',
        path.join(repoRoot, 'pipelines', 'cassettes', 'default-openai.jsonl'),
        '--text',
        'something else entirely',
      ],
      {cwd: dir, env: {PIPE_HOME: home}},
    )
    expect(r.code, r.stderr).to.equal(1)
    const seen = `${r.stdout}\n${r.stderr}`
    const count = (needle: string): number => seen.split(needle).length - 1
    expect(count('+something else entirely'), seen).to.equal(1)
    expect(count('messages differ:')).to.equal(1)
    expect(r.stderr).to.match(/^Error \[E_MODEL\]: .*\nmessages differ:\n/m)
    expect(r.stderr).to.match(/✗ #2 compile error .*\[…\d+ more line\(s\): pipe snapshot show R-\d{8}-\d{4} --step compile\]/)
    expect(r.stderr).to.match(/^run R-\d{8}-\d{4} failed: .*\[…\d+ more line\(s\): the error below\]$/m)
    expect(r.stdout).to.match(/^reason: .*\[…\d+ more line\(s\): the error on stderr\]$/m)
    // The records keep it whole.
    const runId = /run (R-\d{8}-\d{4})/.exec(r.stdout)![1]!
    const [snapshot] = (await snapshotsIn(dir, runId)).filter((s) => s.step.name === 'compile')
    expect(snapshot!.errors.at(-1)!.message).to.include('+something else entirely')
  })
})

describe('every error carries a trace id that finds it in the log and the records (CLI)', function () {
  this.timeout(120000)
  const TRACE = /^Trace: (tr-[0-9a-f]{16})$/m

  it("a failed run's trace id is on stderr, in --json, in the log entry, in the failing step's snapshot and in the run's failed event", async () => {
    const home = path.join(dir, 'home')
    const policy = await file('policy.yaml', POLICY)
    const p = await file('fail.yaml', 'version: 1\nname: fail\nsteps:\n  - {id: lint, kind: command, run: [node, -e, "process.exit(2)"]}\n')
    const r = await pipe(['run', p, '--policy', policy, '--text', 'x', '--json'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(r.code).to.equal(1)
    const trace = TRACE.exec(r.stderr)?.[1]
    expect(trace, r.stderr).to.be.a('string')
    const body = json<{run_id: string; error: {code: string; trace_id: string}}>(r)
    expect(body.error).to.deep.include({code: 'E_BUILD_FAIL', trace_id: trace})
    const log = await logsIn(path.join(home, 'logs'))
    expect(log.split('\n').filter((l) => l.includes(`trace=${trace!} `))).to.have.length(1)
    expect(log).to.match(new RegExp(`ERROR pid=\\d+ trace=${trace!} \\[E_BUILD_FAIL\\] run ${body.run_id} failed`))
    const [snapshot] = (await snapshotsIn(dir, body.run_id)).filter((s) => s.step.name === 'lint')
    expect(snapshot!.errors.at(-1)).to.deep.include({code: 'E_BUILD_FAIL', trace_id: trace})
    const events = (await readFile(path.join(dir, '.pipe', 'runs', body.run_id, 'events.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as {event: string; trace_id?: string})
    expect(events.filter((e) => e.trace_id === trace).map((e) => e.event)).to.deep.equal(['failed'])
    const record = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', body.run_id, 'run.json'), 'utf8')) as {error: {trace_id?: string}}
    expect(record.error.trace_id).to.equal(trace)
    // The text views show it where they show the error (these in this process; the run above a process).
    expect((await pipeHere(['runs', 'show', body.run_id], {cwd: dir, env: {PIPE_HOME: home}})).stdout).to.include(`(trace ${trace!})`)
    expect((await pipeHere(['snapshot', 'show', body.run_id, '--step', 'lint'], {cwd: dir, env: {PIPE_HOME: home}})).stdout).to.include(`trace: ${trace!}`)
    // Another occurrence is another id.
    const again = await pipeHere(['run', p, '--policy', policy, '--text', 'x'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(TRACE.exec(again.stderr)?.[1]).to.be.a('string').and.not.equal(trace)
  })

  it("a command's error, an unknown command and its --json twin each carry one id, in the log too", async () => {
    const home = path.join(dir, 'home')
    for (const [index, args] of [
      ['runs', 'show', 'R-20260101-0001', '--store', path.join(dir, 'none')],
      ['nonsense'],
      ['nonsense', '--json'],
      ['help', 'nonsense', '--json'],
      ['run', path.join(dir, 'missing.yaml'), '--text', 'x', '--json'],
    ].entries()) {
      // The first from a process, the others in this process.
      const r = await (index === 0 ? pipe : pipeHere)(args, {cwd: dir, env: {PIPE_HOME: home}})
      expect(r.code, args.join(' ')).to.not.equal(0)
      const trace = TRACE.exec(r.stderr)?.[1]
      expect(trace, `${args.join(' ')}: ${r.stderr}`).to.be.a('string')
      if (args.includes('--json')) expect(json<{error: {trace_id: string}}>(r).error.trace_id, args.join(' ')).to.equal(trace)
      expect(await logsIn(path.join(home, 'logs')), args.join(' ')).to.include(`trace=${trace!} `)
    }
  })
})

describe('foreach children are named by their item (CLI)', function () {
  this.timeout(60000)

  it("runs list and runs show name a child by its item's id, key, name or task, or the item when it is a string", async () => {
    const home = path.join(dir, 'home')
    await file('item.yaml', 'version: 1\nname: item\nsteps:\n  - {id: a, kind: noop}\n')
    const p = await file(
      'main.yaml',
      "version: 1\nname: main\nsteps:\n  - {id: each, kind: foreach, items: \"${{ [{'id': 'fix-login', 'name': 'not this'}, 'plain text', {'n': 3}, {'task': 'T-004'}, {'key': 7}] }}\", as: it, pipeline: ./item.yaml}\n",
    )
    const run = json<{run_id: string; status: string}>(await pipeHere(['run', p, '--text', 'x', '--json'], {cwd: dir, env: {PIPE_HOME: home}}))
    expect(run.status).to.equal('succeeded')
    // runs list from a process; the rest in this process.
    const list = (await pipe(['runs', 'list'], {cwd: dir, env: {PIPE_HOME: home}})).stdout
    const labels = [...list.matchAll(/item \((each\[\d\][^)]*)\)/g)].map((m) => m[1])
    expect(labels).to.deep.equal(['each[0] fix-login', 'each[1] plain text', 'each[2]', 'each[3] T-004', 'each[4] 7'])
    const show = (await pipeHere(['runs', 'show', run.run_id], {cwd: dir, env: {PIPE_HOME: home}})).stdout
    expect(show).to.match(/each #1 item 0 \(fix-login\)\n/)
    expect(show).to.match(/each #1 item 1 \(plain text\)\n/)
    expect(show).to.match(/each #1 item 2\n/)
    const children = json<{runs: Array<{run_id: string; children?: Array<{run_id: string; parent: {index: number; key?: string}}>}>}>(
      await pipeHere(['runs', 'list', '--json'], {cwd: dir, env: {PIPE_HOME: home}}),
    )
    const first = children.runs.find((r) => r.run_id === run.run_id)!.children![0]!
    expect(first.parent).to.deep.include({index: 0, key: 'fix-login'})
    expect((await pipeHere(['runs', 'show', first.run_id], {cwd: dir, env: {PIPE_HOME: home}})).stdout).to.include(
      `child of ${run.run_id} step each (#1) item 0 (fix-login)`,
    )
  })
})
