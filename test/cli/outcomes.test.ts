/**
 * A failure never reads as success: failure outcomes without a route end the run failed, a failed
 * or blocked run speaks on the error channel, and --json holds everywhere.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'

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
  file('policy.yaml', 'version: 1\nallowed_commands:\n  - [node, -e, "process.exit(2)"]\n  - [node, -e, "process.exit(0)"]\nforbidden_paths: [".git/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 30000}\n')

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
    const p = await file('cmd.yaml', 'version: 1\nname: cmd\nsteps:\n  - {id: build, kind: command, run: [node, -e, "process.exit(2)"], next: after}\n  - {id: after, kind: noop}\n')
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
    const fine = await pipe(['run', ok, '--policy', await policy(), '--text', 'build it'], {cwd: dir, env: {PIPE_HOME: home}})
    expect(fine.code, fine.stderr).to.equal(0)
    expect(fine.stderr).not.to.contain('Error [')
  })

  it('ends a run failed when a gate fails with no route (E_GATE_FAIL)', async () => {
    const p = await file('gate.yaml', 'version: 1\nname: g\ngates:\n  g: {rules: [{path: goal, min_length: 100000}]}\nsteps:\n  - {id: in, kind: ingest, next: c}\n  - {id: c, kind: compile, next: check}\n  - {id: check, kind: gate, gates: [g], on: {pass: done}}\n  - {id: done, kind: noop}\n')
    const r = await pipe(['run', p, '--text', 'Users must be able to export their monthly report as a PDF file.', '--provider', 'offline', '--json'], {cwd: dir, env: {PIPE_HOME: home}})
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
      execFileSync('git', args, {cwd: repo, encoding: 'utf8', env: {...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t'}}).trim()
    git('init', '-q', '-b', 'main')
    git('add', '-A')
    git('commit', '-qm', 'init')
    const broken = (await readFile(path.join(coding, 'pipeline.yaml'), 'utf8')).replace('fix.blocks', path.join(coding, 'break.blocks'))
    const p = await file('break.yaml', broken)
    const r = await pipe(['run', p, '--policy', path.join(coding, 'policy.yaml'), '--json'], {cwd: repo, env: {PIPE_HOME: home}})
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
      const r = await pipe(args, {env: {PIPE_HOME: home}})
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0)
      const body = json<{name: string; version: string; commands: Array<{id: string; summary: string}>; exit_codes: Array<{code: number; name: string}>}>(r)
      expect(body.name).to.equal('pipe')
      expect(body.commands.map((c) => c.id)).to.include.members(['run', 'validate', 'snapshot show'])
      expect(body.exit_codes.map((c) => c.code)).to.include.members([0, 1, 2, 10, 130])
    }
  })
})
