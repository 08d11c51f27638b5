/**
 * A failure never reads as success: failure outcomes without a route end the run failed, a failed
 * or blocked run speaks on the error channel, and --json holds everywhere.
 *
 * Each behaviour is seen from a real `pipe` process once (the error channel of a failed run with and
 * without --json, a model outage, --json on an unknown command and on help, validate's warnings and
 * refusals, a denied dry run, graph); the commands around it, and the variants of a behaviour a
 * process showed, run in this process (test/helpers/pipe-here.ts: the CLI's path from argv, its
 * output and exit code).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp, readFile, readdir, writeFile} from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

interface RunJson {
  run_id: string
  status: string
  error?: {code: string; message: string; step?: string; hint?: string; exit_code?: number; log?: string}
}

let dir: string
let home: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-outcomes-'))
  home = path.join(dir, 'home')
})
afterEach(async () => cleanup())

async function file(name: string, text: string): Promise<string> {
  const full = path.join(dir, name)
  await writeFile(full, text)
  return full
}

const policy = (): Promise<string> =>
  file(
    'policy.yaml',
    'version: 1\nallowed_commands:\n  - [node, -e, "process.exit(2)"]\n  - [node, -e, "process.exit(0)"]\nforbidden_paths: [".git/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 30000}\n',
  )

async function logText(): Promise<string> {
  const logs = path.join(home, 'logs')
  const names = await readdir(logs).catch(() => [] as string[])
  const texts = await Promise.all(names.map((n) => readFile(path.join(logs, n), 'utf8')))
  return texts.join('')
}

async function runJson(runId: string): Promise<{status: string; error?: {code: string; step?: string; hint?: string}}> {
  return JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', runId, 'run.json'), 'utf8')) as {status: string; error?: {code: string}}
}

describe('failure outcomes end the run failed (CLI)', function () {
  this.timeout(120000)

  it('ends a run failed with E_BUILD_FAIL when a command exits 2 and nothing routes failure, on stderr, in the log and in --json', async () => {
    const p = await file(
      'cmd.yaml',
      'version: 1\nname: cmd\nsteps:\n  - {id: build, kind: command, run: [node, -e, "process.exit(2)"], next: after}\n  - {id: after, kind: noop}\n',
    )
    const r = await pipe(['run', p, '--policy', await policy(), '--text', 'build it', '--json'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(r.code, r.stderr).to.equal(1)
    const body = json<RunJson>(r)
    expect(body.status).to.equal('failed')
    expect(body.error).to.include({code: 'E_BUILD_FAIL', step: 'build', exit_code: 1})
    expect(body.error?.hint).to.contain(`pipe snapshot show ${body.run_id} --step build`)
    expect(body.error?.log).to.match(/orchestrator-\d{8}\.log$/)
    expect(r.stderr).to.match(/^Error \[E_BUILD_FAIL\]: step build ended with the failure outcome "failure"/m)
    expect(r.stderr).to.match(/^Try this: .*pipe snapshot show/m)
    expect(r.stderr).to.match(new RegExp(`^Log: ${home.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/logs/orchestrator-\\d{8}\\.log$`, 'm'))
    expect(await logText()).to.contain(`[E_BUILD_FAIL] run ${body.run_id} failed at step build`)
    const record = await runJson(body.run_id)
    expect(record.status).to.equal('failed')
    expect(record.error).to.include({code: 'E_BUILD_FAIL', step: 'build'})
    // next: is the way on after success; the failure did not take it.
    const snaps = await readdir(path.join(dir, '.pipe', 'runs', body.run_id, 'snapshots'))
    expect(snaps).to.have.length(1)
  })

  it('prints the error channel without --json too, and a succeeding command still succeeds', async () => {
    const p = await file('cmd.yaml', 'version: 1\nname: cmd\nsteps:\n  - {id: build, kind: command, run: [node, -e, "process.exit(2)"]}\n')
    const r = await pipe(['run', p, '--policy', await policy(), '--text', 'build it'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(r.code).to.equal(1)
    expect(r.stderr).to.match(/^Error \[E_BUILD_FAIL\]: /m)
    expect(r.stdout).to.match(/^run R-\S+ {2}failed/m)
    const ok = await file('ok.yaml', 'version: 1\nname: ok\nsteps:\n  - {id: build, kind: command, run: [node, -e, "process.exit(0)"]}\n')
    const fine = await pipeHere(['run', ok, '--policy', await policy(), '--text', 'build it'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(fine.code, fine.stderr).to.equal(0)
    expect(fine.stderr).not.to.contain('Error [')
  })

  it('ends a run failed when a gate fails with no route (E_GATE_FAIL)', async () => {
    const p = await file(
      'gate.yaml',
      'version: 1\nname: g\ngates:\n  g: {rules: [{path: goal, min_length: 100000}]}\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: check}\n  - {id: check, kind: gate, gates: [g], on: {pass: done}}\n  - {id: done, kind: noop}\n',
    )
    // (The error channel of a failed run from a process: the tests before.)
    const r = await pipeHere(['run', p, '--text', 'Users must be able to export their monthly report as a PDF file.', '--provider', 'offline', '--json'], {
      cwd: dir,
      env: {PIPE_HOME: home},
    })
    expect(r.code, r.stderr).to.equal(1)
    const body = json<RunJson>(r)
    expect(body.error).to.include({code: 'E_GATE_FAIL', step: 'check'})
    expect(r.stderr).to.match(/^Error \[E_GATE_FAIL\]: /m)
  })

  it("ends examples/coding's break path failed: QA failed and was only rolled back", async () => {
    const coding = path.join(repoRoot, 'examples', 'coding')
    const repo = path.join(dir, 'scratch')
    await cp(path.join(coding, 'scratch'), repo, {recursive: true})
    const git = (...args: string[]): string =>
      execFileSync('git', args, {
        cwd: repo,
        encoding: 'utf8',
        env: {...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t'},
      }).trim()
    git('init', '-q', '-b', 'main')
    git('add', '-A')
    git('commit', '-qm', 'init')
    // Files a pipeline names must lie beside it: the pipeline and its blocks go together.
    await cp(path.join(coding, 'break.blocks'), path.join(dir, 'break.blocks'))
    const broken = (await readFile(path.join(coding, 'pipeline.yaml'), 'utf8')).replace('fix.blocks', 'break.blocks')
    const p = await file('break.yaml', broken)
    const r = await pipeHere(['run', p, '--policy', path.join(coding, 'policy.yaml'), '--json'], {cwd: repo, env: {PIPE_HOME: home}})
    expect(r.code, r.stderr).to.equal(1)
    const body = json<RunJson>(r)
    expect(body.status).to.equal('failed')
    expect(body.error).to.include({code: 'E_BUILD_FAIL', step: 'rollback'})
    expect(body.error?.message).to.contain('step qa ended "fail"')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a * b')
  })
})

describe('the error channel beyond commands (CLI)', function () {
  this.timeout(60000)

  it('tells what to do after a model outage: check the endpoint, then pipe resume RUN', async () => {
    // A port that was just free: connections to it are refused.
    const server = net.createServer()
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const {port} = server.address() as net.AddressInfo
    await new Promise((resolve) => server.close(resolve))
    const r = await pipe(['run', 'pipelines/default.yaml', '--text', 'Users must export reports as PDF', '--store', path.join(dir, '.pipe'), '--json'], {
      env: {PIPE_HOME: home, OPENAI_BASE_URL: `http://127.0.0.1:${port}/v1`, OPENAI_API_KEY: 'sk-test'},
    })
    expect(r.code, r.stderr).to.equal(1)
    const body = json<RunJson>(r)
    expect(body.error).to.include({code: 'E_MODEL', step: 'compile', exit_code: 1})
    expect(body.error?.hint).to.match(new RegExp(`OPENAI_BASE_URL.*Then continue it with: pipe resume ${body.run_id} --store `))
    expect(r.stderr).to.match(/^Error \[E_MODEL\]: cannot reach the model endpoint/m)
    expect(r.stderr).to.match(new RegExp(`^Try this: .*pipe resume ${body.run_id}`, 'm'))
    expect(await logText()).to.contain(`[E_MODEL] run ${body.run_id} failed at step compile`)
  })

  it('honours --json on an unknown command', async () => {
    const r = await pipe(['valdate', '--json'], {env: {PIPE_HOME: home}})
    expect(r.code).to.equal(2)
    const body = json<{error: {code: string; message: string; hint: string; exit_code: number; log: string}}>(r)
    expect(body.error).to.include({code: 'E_INVALID_ARGS', exit_code: 2})
    expect(body.error.message).to.contain('unknown command "valdate"')
    expect(body.error.hint).to.be.a('string')
    expect(body.error.log).to.match(/orchestrator-\d{8}\.log$/)
    expect(r.stderr).to.match(/^Error \[E_INVALID_ARGS\]: /m)
  })

  it('honours --json on bare pipe and on pipe help', async () => {
    for (const args of [['--json'], ['help', '--json']]) {
      // The first from a process, the second in this process.
      const r = await (args[0] === '--json' ? pipe : pipeHere)(args, {env: {PIPE_HOME: home}})
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0)
      const body = json<{name: string; version: string; commands: Array<{id: string; summary: string}>; exit_codes: Array<{code: number; name: string}>}>(r)
      expect(body.name).to.equal('pipe')
      expect(body.commands.map((c) => c.id)).to.include.members(['run', 'validate', 'snapshot show'])
      expect(body.exit_codes.map((c) => c.code)).to.include.members([0, 1, 2, 10, 130])
    }
  })

  it("honours --json on a command's --help, a topic, --version and help for an unknown command", async () => {
    const cases: Array<{args: string[]; code: number; key: string}> = [
      {args: ['run', '--help', '--json'], code: 0, key: 'flags'},
      {args: ['help', 'runs', 'list', '--json'], code: 0, key: 'flags'},
      {args: ['runs', '--json'], code: 0, key: 'commands'},
      {args: ['audit', '--json'], code: 0, key: 'commands'},
      {args: ['--version', '--json'], code: 0, key: 'version'},
      {args: ['help', 'nonsense', '--json'], code: 2, key: 'error'},
    ]
    for (const [index, {args, code, key}] of cases.entries()) {
      // The first from a process, the others in this process.
      const r = await (index === 0 ? pipe : pipeHere)(args, {env: {PIPE_HOME: home}})
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(code)
      expect(json<Record<string, unknown>>(r), args.join(' ')).to.have.property(key)
      if (code !== 0) expect(r.stderr).to.match(/^Error \[E_INVALID_ARGS\]: unknown command "nonsense"\nTry this: .*\nLog: /m)
    }
  })
})

describe('checked before running (CLI)', function () {
  this.timeout(60000)

  it('warns about failure outcomes with no route, and still exits 0', async () => {
    const p = await file(
      'warn.yaml',
      'version: 1\nname: w\nsteps:\n  - {id: build, kind: command, run: [node, -e, "process.exit(2)"], next: after}\n  - {id: after, kind: noop}\n',
    )
    const r = await pipe(['validate', p], {env: {PIPE_HOME: home}})
    expect(r.code, r.stdout).to.equal(0)
    expect(r.stdout).to.contain(`${p}:4:10  steps[0].id  warning: failure outcome "failure" of step "build" has no route`)
    const j = json<{valid: boolean; warning_count: number; files: Array<{warnings: Array<{rule: string; severity: string}>}>}>(
      await pipeHere(['validate', p, '--json'], {env: {PIPE_HOME: home}}),
    )
    expect(j.valid).to.equal(true)
    // (A policy-denied warning may join it: the policy a run from here would use is judged too.)
    const unrouted = j.files[0]!.warnings.filter((w) => w.rule === 'unrouted-failure')
    expect(unrouted).to.have.length(1)
    expect(unrouted[0]).to.include({rule: 'unrouted-failure', severity: 'warning'})
  })

  it('warns about a step between a checkpoint and its rollback whose error has no route (the working tree would keep the changes)', async () => {
    const p = await file(
      'rollback.yaml',
      'version: 1\nname: r\nsteps:\n  - {id: checkpoint, kind: git, action: checkpoint, next: qa}\n  - {id: qa, kind: qa, stages: {tests: [[node, --test]]}, on: {pass: commit, fail: rollback}}\n  - {id: commit, kind: git, action: checkpoint, allow_dirty: true, on: {error: rollback}, next: done}\n  - {id: done, kind: end, status: succeeded}\n  - {id: rollback, kind: git, action: rollback, to: checkpoint, on: {error: stuck}, next: stuck}\n  - {id: stuck, kind: end, status: blocked}\n',
    )
    // (validate's warnings from a process: the test before.)
    const r = await pipeHere(['validate', p, '--json'], {env: {PIPE_HOME: home}})
    expect(r.code, r.stdout).to.equal(0)
    const warnings = json<{files: Array<{warnings: Array<{rule: string; path: string; message: string}>}>}>(r).files[0]!.warnings.filter(
      (w) => w.rule === 'unrouted-error-before-rollback',
    )
    expect(warnings.map((w) => [w.path, w.message])).to.deep.equal([
      [
        'steps[1].id',
        'step "qa" runs after checkpoint "checkpoint" with changes its rollback "rollback" would undo, but its error has no route: the run would end with them neither committed nor rolled back; add on: {error: rollback}',
      ],
    ])
  })

  it('reports a command or QA argv the policy will deny, given --policy or a policy file among the files', async () => {
    const p = await file(
      'denied.yaml',
      'version: 1\nname: d\ninputs: {script: {type: string, default: a.js}}\nsteps:\n  - {id: ok, kind: command, run: [node, -e, "process.exit(0)"], on: {success: qa, failure: qa}}\n  - id: qa\n    kind: qa\n    stages:\n      tests: [[rm, -rf, build]]\n    on: {pass: later, fail: later}\n  - {id: later, kind: command, run: [node, "${{ inputs.script }}"], on: {success: end, failure: end}}\n  - {id: end, kind: noop}\n',
    )
    const pol = await policy()
    const r = await pipe(['validate', p, '--policy', pol], {env: {PIPE_HOME: home}})
    expect(r.code).to.equal(2)
    expect(r.stdout).to.match(
      new RegExp(`^${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:9:15  steps\\[1\\]\\.stages\\.tests\\[0\\]  .*denies \\["rm","-rf","build"\\]`, 'm'),
    )
    expect(r.stdout).not.to.contain('process.exit(0)')
    // An expression may be any one argument: [node, X] matches no entry of the policy, whatever X is.
    expect(r.stdout).to.match(/:11:37 {2}steps\[2\]\.run {2}.*denies \["node","\$\{\{ inputs\.script \}\}"\].*whatever its expressions give/)
    const together = await pipeHere(['validate', p, pol, '--json'], {env: {PIPE_HOME: home}})
    expect(together.code).to.equal(2)
    expect(json<{files: Array<{diagnostics: Array<{rule: string; path: string}>}>}>(together).files[0]!.diagnostics.map((d) => [d.rule, d.path])).to.deep.equal(
      [
        ['policy-denied', 'steps[1].stages.tests[0]'],
        ['policy-denied', 'steps[2].run'],
      ],
    )
    expect((await pipeHere(['validate', p], {env: {PIPE_HOME: home}})).code).to.equal(0)
  })

  it('refuses a dry run whose commands the policy denies (exit 3), listing them in the plan', async () => {
    const p = await file(
      'denied.yaml',
      'version: 1\nname: d\nsteps:\n  - {id: wipe, kind: command, run: [rm, -rf, build], on: {success: end, failure: end}}\n  - {id: end, kind: noop}\n',
    )
    const r = await pipe(['run', p, '--policy', await policy(), '--text', 'x', '--dry-run', '--json'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(r.code, r.stderr).to.equal(3)
    const plan = json<{denied: Array<{path: string; rule: string}>}>(r)
    expect(plan.denied).to.have.length(1)
    expect(plan.denied[0]).to.include({path: 'steps[0].run', rule: 'policy-denied'})
    expect(r.stderr).to.match(/^Error \[E_POLICY_DENIED\]: /m)
    const text = await pipeHere(['run', p, '--policy', await policy(), '--text', 'x', '--dry-run'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(text.code).to.equal(3)
    expect(text.stdout).to.contain('denies ["rm","-rf","build"]')
  })

  it('reports a gate or review placed where no spec can exist yet: an error on every path, a warning on some', async () => {
    const early = await file(
      'early.yaml',
      'version: 1\nname: e\ngates:\n  g: {rules: [{path: goal, required: true}]}\nsteps:\n  - {id: in, kind: ingest, next: check}\n  - {id: check, kind: gate, gates: [g], on: {pass: ok, fail: ok}}\n  - {id: ok, kind: review}\n',
    )
    // (validate's refusals and warnings from a process: the tests before.)
    const r = await pipeHere(['validate', early], {env: {PIPE_HOME: home}})
    expect(r.code).to.equal(2)
    expect(r.stdout).to.contain(`${early}:7:10  steps[1].id  a gate step needs a spec, but no step before "check" writes one on any path`)
    const some = await file(
      'some.yaml',
      'version: 1\nname: s\nsteps:\n  - {id: in, kind: ingest, on: {success: c, error: r}}\n  - {id: c, kind: compile, next: r}\n  - {id: r, kind: review}\n',
    )
    const w = await pipeHere(['validate', some], {env: {PIPE_HOME: home}})
    expect(w.code, w.stdout).to.equal(0)
    expect(w.stdout).to.contain('steps[2].id  warning: a review step needs a spec, but on some path from the start no step before "r" writes one')
    const dry = await pipeHere(['run', some, '--text', 'x', '--dry-run', '--json'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(dry.code, dry.stderr).to.equal(0)
    expect(json<{warnings: Array<{rule: string}>}>(dry).warnings.map((d) => d.rule)).to.deep.equal(['spec-before-use'])
  })
})

describe('review outcomes hold and drop (CLI)', function () {
  this.timeout(60000)

  it('are declared: graph, dry-run and validate show them', async () => {
    const graph = json<{steps: Array<{id: string; outcomes: string[]}>; stops: Array<{from: string; outcome: string; effect: string}>}>(
      await pipe(['graph', 'pipelines/default.yaml', '--json']),
    )
    expect(graph.steps.find((s) => s.id === 'manual_review')!.outcomes).to.deep.equal(['go', 'hold', 'drop', 'error'])
    expect(graph.stops).to.deep.include({from: 'manual_review', outcome: 'drop', effect: 'cancelled'})
    expect(graph.stops).to.deep.include({from: 'manual_review', outcome: 'hold', effect: 'awaiting_input'})
    const mermaid = await pipeHere(['graph', 'pipelines/default.yaml'])
    expect(mermaid.stdout).to.contain('manual_review -.->|"drop"| __cancelled__')

    const dry = await pipeHere(['run', 'pipelines/default.yaml', '--input', 'examples/full-prd.md', '--dry-run', '--json'], {cwd: repoRoot})
    const review = json<{steps: Array<{id: string; outcomes: string[]; unrouted: Record<string, string>}>}>(dry).steps.find((s) => s.id === 'manual_review')!
    expect(review.outcomes).to.deep.equal(['go', 'hold', 'drop', 'error'])
    expect(review.unrouted).to.include({hold: 'awaiting_input', drop: 'cancelled'})

    const routed = await file(
      'routed.yaml',
      'version: 1\nname: r\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: r}\n  - {id: r, kind: review, on: {go: done, drop: done}}\n  - {id: done, kind: noop}\n',
    )
    const v = await pipeHere(['validate', routed], {env: {PIPE_HOME: home}})
    expect(v.code).to.equal(2)
    expect(v.stdout).to.contain('outcome "drop" of a review step cancels the run; it takes no route')
  })
})
