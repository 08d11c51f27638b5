/**
 * Authoring conventions (issue 30, items 4-6): a policy file states what differs from the built-in
 * policy; the store and policy.yaml are found from a subfolder like git finds .git; and commands
 * are judged against the policy before a run, also without --policy and after --dry-run resolved them.
 *
 * Each behaviour is seen from a real `pipe` process once (a test's first command or its subject, the
 * one that reads the folder or the variable at stake); the commands around it, and a variant of a
 * behaviour a test before saw from a process, run in this process (test/helpers/pipe-here.ts: the
 * CLI's path from argv, in the folder and environment a process would have).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let cleanup: () => Promise<void>
beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-policydefaults-'))
  // A repository root: discovery stops here, whatever lies above the temp folder.
  execFileSync('git', ['init', '-q', dir])
})
afterEach(async () => cleanup())

async function file(name: string, text: string): Promise<string> {
  const full = path.join(dir, name)
  await mkdir(path.dirname(full), {recursive: true})
  await writeFile(full, text)
  return full
}

const STATUS_PIPELINE = 'version: 1\nname: status\nsteps:\n  - {id: status, kind: command, run: [git, status, --porcelain]}\n'

describe('a policy file states what differs from the built-in policy', function () {
  this.timeout(120000)

  it("accepts a two-line policy and runs under it, recording the effective policy's version", async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    const check = await pipe(['policy', 'check', 'policy.yaml', '--json'], {cwd: dir})
    expect(check.code, check.stdout + check.stderr).to.equal(0)
    const body = json<{
      valid: boolean
      policy_version: string
      policy: {max_patch_lines: number; forbidden_paths: string[]; resource_limits: {command_timeout_ms: number}}
    }>(check)
    expect(body.valid).to.equal(true)
    expect(body.policy.max_patch_lines, 'the built-in value').to.equal(500)
    expect(body.policy.forbidden_paths).to.include('.git/**')
    expect(body.policy.resource_limits.command_timeout_ms).to.equal(300000)
    const p = await file('status.yaml', STATUS_PIPELINE)
    const run = await pipeHere(['run', p, '--json'], {cwd: dir})
    expect(run.code, run.stdout + run.stderr).to.equal(0)
    const result = json<{status: string; run_id: string}>(run)
    expect(result.status).to.equal('succeeded')
    const record = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', result.run_id, 'run.json'), 'utf8')) as {policy_version: string}
    expect(record.policy_version).to.equal(body.policy_version)
  })

  it('a run says which policy it is under, the one found beside it or the built-in one, not only in --json', async () => {
    const plain = await file('plain.yaml', 'version: 1\nname: plain\nsteps:\n  - {id: done, kind: end, status: succeeded}\n')
    const builtIn = await pipe(['run', plain], {cwd: dir})
    expect(builtIn.code, builtIn.stdout + builtIn.stderr).to.equal(0)
    expect(builtIn.stdout).to.match(/^policy: the built-in default/m)
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    await mkdir(path.join(dir, 'sub'))
    const found = await pipeHere(['run', plain], {cwd: path.join(dir, 'sub')})
    expect(found.code, found.stdout + found.stderr).to.equal(0)
    expect(found.stdout).to.match(/^policy: \.\.\/policy\.yaml$/m)
  })

  it('refuses a command timeout longer than a timer can hold (2^31-1 ms), which would kill every command at once', async () => {
    // A step's deadline re-arms its timer (test/e2e/perf-attack.test.ts); a command's is one timer.
    await file('policy.yaml', 'version: 1\nresource_limits: {command_timeout_ms: 3000000000, step_timeout_ms: 3000000000}\n')
    const r = await pipe(['policy', 'check', 'policy.yaml'], {cwd: dir})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(r.stdout + r.stderr).to.match(/policy\.yaml:2:39 {2}resource_limits\.command_timeout_ms {2}must be <= 2147483647, found 3000000000/)
    expect(r.stdout + r.stderr).to.not.contain('step_timeout_ms')
    await file('policy.yaml', 'version: 1\nresource_limits: {command_timeout_ms: 2147483647}\n')
    expect((await pipeHere(['policy', 'check', 'policy.yaml'], {cwd: dir})).code, 'the longest timer is allowed').to.equal(0)
  })

  it("refuses a command step's command_timeout_ms longer than a timer can hold, at validate", async () => {
    const p = await file('t.yaml', 'version: 1\nname: t\nsteps:\n  - {id: c, kind: command, run: [node, -e, "0"], command_timeout_ms: 3000000000}\n')
    // (validate's refusal from a process: 'an argv with an expression is denied ...' below.)
    const r = await pipeHere(['validate', p], {cwd: dir})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(r.stdout).to.match(/t\.yaml:4:.*command_timeout_ms.*must be <= 2147483647/)
  })

  it("prints the effective policy with --effective: the file's values over the built-in ones", async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status]]\nforbidden_paths: [secrets/**]\nresource_limits: {command_timeout_ms: 1000}\n')
    // (policy check's text from a process: the tests before and after.)
    const r = await pipeHere(['policy', 'check', '--effective'], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    const yaml = r.stdout.split('\n').slice(2).join('\n')
    expect(yaml).to.contain('allowed_commands:\n  - [git, status]\n')
    expect(yaml).to.contain('forbidden_paths: [secrets/**, .git/**, .env, .env.*, "**/*.{pem,key}", "**/id_rsa*"]\n')
    expect(yaml).to.contain('resource_limits:\n  command_timeout_ms: 1000\n  step_timeout_ms: 600000\n')
    expect(yaml).to.contain('max_patch_lines: 500\n')
    expect(yaml).to.contain('confirm: [dangerous]\n')
  })

  it('pipe policy init writes a commented starter that pipe policy check accepts, and never overwrites it', async () => {
    const init = await pipe(['policy', 'init'], {cwd: dir})
    expect(init.code, init.stderr).to.equal(0)
    const text = await readFile(path.join(dir, 'policy.yaml'), 'utf8')
    expect(text).to.match(/^# yaml-language-server: \$schema=\S+policy\.schema\.json\n/)
    expect(text).to.contain('# max_patch_lines: 500')
    const check = await pipeHere(['policy', 'check', '--json'], {cwd: dir})
    expect(check.code, check.stdout + check.stderr).to.equal(0)
    expect(json<{policy: {allowed_commands: string[][]}}>(check).policy.allowed_commands).to.deep.equal([['git', 'status']])
    const again = await pipeHere(['policy', 'init'], {cwd: dir})
    expect(again.code).to.not.equal(0)
    expect(again.stderr).to.contain('E_CONFLICT')
    expect(await readFile(path.join(dir, 'policy.yaml'), 'utf8')).to.equal(text)
  })

  it('with no policy.yaml, pipe policy check says the built-in policy applies and what it allows', async () => {
    const r = await pipe(['policy', 'check'], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stdout).to.contain('the built-in policy applies')
    expect(r.stdout).to.contain('no commands allowed (allowed_commands is empty)')
    expect(r.stdout).to.contain('forbidden path(s): .git/**, .env')
    expect(r.stderr).to.not.contain('not a valid policy')
    const body = json<{file: string | null; builtin: boolean}>(await pipeHere(['policy', 'check', '--json'], {cwd: dir}))
    expect(body).to.include({file: null, builtin: true})
  })

  it('still refuses a bad value in a partial policy at its line', async () => {
    await file('policy.yaml', 'version: 1\nresource_limits: {memory_mb: 2}\n')
    // (A refusal of policy check from a process: the command timeout's above.)
    const r = await pipeHere(['policy', 'check'], {cwd: dir})
    expect(r.code).to.not.equal(0)
    expect(r.stdout).to.match(/policy\.yaml:2:\d+ +resource_limits\.memory_mb/)
    expect(existsSync(path.join(dir, '.pipe'))).to.equal(false)
  })
})

describe('the store and policy.yaml are found from a subfolder, like git finds .git', function () {
  this.timeout(120000)

  it('pipe runs list and pipe policy explain work from a subfolder of the project', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    const p = await file('status.yaml', STATUS_PIPELINE)
    const run = await pipeHere(['run', p, '--json'], {cwd: dir})
    expect(run.code, run.stderr).to.equal(0)
    const runId = json<{run_id: string}>(run).run_id
    const sub = path.join(dir, 'src', 'deep')
    await mkdir(sub, {recursive: true})
    // runs list from a process started in the subfolder; explain in this process.
    const list = await pipe(['runs', 'list', '--json'], {cwd: sub})
    expect(list.code, list.stderr).to.equal(0)
    expect(json<{runs: Array<{run_id: string}>}>(list).runs.map((r) => r.run_id)).to.deep.equal([runId])
    const explain = await pipeHere(['policy', 'explain', '--json', '--', 'git', 'status', '--porcelain'], {cwd: sub})
    expect(explain.code, explain.stderr).to.equal(0)
    expect(json<{allowed: boolean; policy: string}>(explain)).to.include({allowed: true, policy: path.join(await realDir(), 'policy.yaml')})
  })

  it('a first run in a subfolder of a repository creates the store at the repository root', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[node, -e, "0"]]\n')
    const p = await file('tools/zero.yaml', 'version: 1\nname: zero\nsteps:\n  - {id: zero, kind: command, run: [node, -e, "0"]}\n')
    // (Found upward from a process's folder: the test before.)
    const run = await pipeHere(['run', p, '--json'], {cwd: path.dirname(p)})
    expect(run.code, run.stderr).to.equal(0)
    expect(existsSync(path.join(dir, '.pipe', 'runs')), 'the store at the repository root').to.equal(true)
    expect(existsSync(path.join(dir, 'tools', '.pipe')), 'no store in the subfolder').to.equal(false)
  })

  it("stops at the repository root: a store above it is not this project's", async () => {
    const inner = path.join(dir, 'inner')
    execFileSync('git', ['init', '-q', inner])
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    expect((await pipeHere(['run', await file('status.yaml', STATUS_PIPELINE), '--json'], {cwd: dir})).code).to.equal(0)
    // runs list from a process in the inner repository; policy check in this process.
    const list = await pipe(['runs', 'list', '--json'], {cwd: inner})
    expect(list.code, list.stderr).to.equal(0)
    expect(json<{runs: unknown[]}>(list).runs).to.deep.equal([])
    const check = json<{builtin: boolean}>(await pipeHere(['policy', 'check', '--json'], {cwd: inner}))
    expect(check.builtin, "the outer policy.yaml is not the inner repository's").to.equal(true)
  })

  it('pipe runs list (and spec list, ledger list) where there is no store say there is nothing and exit 0', async () => {
    const list = await pipe(['runs', 'list'], {cwd: dir})
    expect(list.code, list.stderr).to.equal(0)
    expect(list.stdout).to.equal('no runs\n')
    expect((await pipeHere(['spec', 'list'], {cwd: dir})).code).to.equal(0)
    expect((await pipeHere(['ledger', 'list'], {cwd: dir})).code).to.equal(0)
    expect(existsSync(path.join(dir, '.pipe')), 'listing creates no store').to.equal(false)
  })

  it("a policy.yaml above the working directory owned by another user is refused, not used (git's dubious-ownership rule)", async function () {
    if (process.getuid?.() !== 0) this.skip() // giving a file to another user needs root
    const planted = await file('policy.yaml', 'version: 1\nallowed_commands: [[sh, -c, ...]]\n')
    execFileSync('chown', ['65534:65534', planted])
    const sub = path.join(dir, 'src')
    await mkdir(sub, {recursive: true})
    const r = await pipe(['policy', 'explain', '--json', '--', 'sh', '-c', 'id'], {cwd: sub})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    const error = json<{error: {code: string; message: string; hint: string}}>(r).error
    expect(error.code).to.equal('E_CONFIG')
    expect(error.message).to.contain('owned by another user')
    expect(error.hint).to.contain('PIPE_CEILING_DIRECTORIES')
    // In its own folder the person chose it: used as before.
    const here = await pipeHere(['policy', 'explain', '--json', '--', 'sh', '-c', 'id'], {cwd: dir})
    expect(json<{allowed: boolean}>(here).allowed).to.equal(true)
  })

  it('PIPE_CEILING_DIRECTORIES stops the search below a folder, like GIT_CEILING_DIRECTORIES', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    const sub = path.join(dir, 'a', 'b')
    await mkdir(sub, {recursive: true})
    const found = json<{builtin: boolean}>(await pipeHere(['policy', 'check', '--json'], {cwd: sub}))
    expect(found.builtin, 'found upward without a ceiling').to.equal(false)
    // The variable as a process is given it; the folder that is its own ceiling in this process.
    const stopped = json<{builtin: boolean}>(
      await pipe(['policy', 'check', '--json'], {cwd: sub, env: {PIPE_CEILING_DIRECTORIES: `relative${path.delimiter}${path.join(dir, 'a')}`}}),
    )
    expect(stopped.builtin, 'the walk never climbs into the ceiling folder').to.equal(true)
    const inCeiling = json<{builtin: boolean}>(await pipeHere(['policy', 'check', '--json'], {cwd: dir, env: {PIPE_CEILING_DIRECTORIES: dir}}))
    expect(inCeiling.builtin, 'the working directory itself is always looked in').to.equal(false)
  })

  it('--store and PIPE_STORE still win over the store found upward', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    expect((await pipeHere(['run', await file('status.yaml', STATUS_PIPELINE), '--json'], {cwd: dir})).code).to.equal(0)
    const other = path.join(dir, 'other-store')
    expect(json<{runs: unknown[]}>(await pipeHere(['runs', 'list', '--json', '--store', other], {cwd: dir})).runs).to.deep.equal([])
    // PIPE_STORE as a process is given it.
    expect(json<{runs: unknown[]}>(await pipe(['runs', 'list', '--json'], {cwd: dir, env: {PIPE_STORE: other}})).runs).to.deep.equal([])
  })
})

describe('commands are judged against the policy before a run, also without --policy', function () {
  this.timeout(120000)

  it('pipe validate without --policy reports a command the built-in policy denies, at its line, as a warning', async () => {
    const p = await file('status.yaml', STATUS_PIPELINE)
    const r = await pipe(['validate', 'status.yaml'], {cwd: dir})
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    expect(r.stdout).to.contain('status.yaml:4:38  steps[0].run  warning: the built-in policy denies ["git","status","--porcelain"]')
    expect(r.stdout).to.contain('(a run from here without --policy uses this policy)')
    // What it warns about is what a run meets.
    const run = await pipeHere(['run', p, '--json'], {cwd: dir})
    expect(run.code).to.equal(3)
    expect(run.stdout + run.stderr).to.contain('E_POLICY_DENIED')
    // Under the policy.yaml a run from here finds, the warning goes.
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    const allowed = await pipeHere(['validate', 'status.yaml'], {cwd: dir})
    expect(allowed.stdout).to.not.contain('denies')
  })

  it('an argv with an expression is denied when no value of it could be allowed', async () => {
    await file(
      'p.yaml',
      'version: 1\nname: p\ninputs:\n  what: {type: string, default: x}\nsteps:\n  - {id: a, kind: command, run: [rm, -rf, "${{ inputs.what }}"]}\n',
    )
    const r = await pipe(['validate', 'p.yaml', '--policy', await file('policy.yaml', 'version: 1\nallowed_commands: [[git, log, "{arg}"]]\n')], {cwd: dir})
    expect(r.code).to.not.equal(0)
    expect(r.stdout).to.contain('p.yaml:6:33  steps[0].run  ')
    expect(r.stdout).to.contain('whatever its expressions give')
  })

  it('the dry run judges an argv by the values it resolved from the inputs', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, log, --oneline]]\n')
    await file(
      'p.yaml',
      'version: 1\nname: p\ninputs:\n  flag: {type: string, default: --oneline}\nsteps:\n  - {id: a, kind: command, run: [git, log, "${{ inputs.flag }}"]}\n',
    )
    const ok = await pipeHere(['run', 'p.yaml', '--dry-run', '--json'], {cwd: dir})
    expect(ok.code, ok.stdout + ok.stderr).to.equal(0)
    expect(json<{denied: unknown[]}>(ok).denied).to.deep.equal([])
    // The refusal from a process.
    const denied = await pipe(['run', 'p.yaml', '--dry-run', '-i', 'flag=--output=/tmp/x', '--json'], {cwd: dir})
    expect(denied.code).to.equal(3)
    const plan = json<{denied: Array<{message: string; line: number; col: number}>}>(denied)
    expect(plan.denied.map((d) => [d.line, d.col])).to.deep.equal([[6, 33]])
    expect(plan.denied[0]!.message).to.contain('denies ["git","log","--output=/tmp/x"]')
  })
})

async function realDir(): Promise<string> {
  const {realpath} = await import('node:fs/promises')
  return realpath(dir)
}

describe('pipe test stays hermetic', function () {
  this.timeout(120000)

  it('a test that names no policy gets the built-in one, never a policy.yaml above its temporary workspace', async () => {
    const tmp = path.join(dir, 'tmp')
    await file('tmp/policy.yaml', 'version: 1\nallowed_commands: [[node, -e, "0"]]\n')
    await file('suite/zero.yaml', 'version: 1\nname: zero\nsteps:\n  - {id: zero, kind: command, run: [node, -e, "0"]}\n')
    await file(
      'suite/zero.pipe-test.yaml',
      'version: 1\npipeline: zero.yaml\ntests:\n  - name: the built-in policy denies node\n    expect: {code: E_POLICY_DENIED}\n',
    )
    const r = await pipe(['test', 'suite', '--json'], {cwd: dir, env: {TMPDIR: tmp}})
    expect(r.code, r.stdout + r.stderr).to.equal(0)
  })
})
