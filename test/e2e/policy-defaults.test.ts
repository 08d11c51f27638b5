/**
 * Authoring conventions (issue 30, items 4-6): a policy file states what differs from the built-in
 * policy; the store and policy.yaml are found from a subfolder like git finds .git; and commands
 * are judged against the policy before a run, also without --policy and after --dry-run resolved them.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {existsSync} from 'node:fs'
import path from 'node:path'
import {json, pipe, tempDir} from '../helpers/cli.js'

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

  it('accepts a two-line policy and runs under it, recording the effective policy\'s version', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status, --porcelain]]\n')
    const check = await pipe(['policy', 'check', 'policy.yaml', '--json'], {cwd: dir})
    expect(check.code, check.stdout + check.stderr).to.equal(0)
    const body = json<{valid: boolean; policy_version: string; policy: {max_patch_lines: number; forbidden_paths: string[]; resource_limits: {command_timeout_ms: number}}}>(check)
    expect(body.valid).to.equal(true)
    expect(body.policy.max_patch_lines, 'the built-in value').to.equal(500)
    expect(body.policy.forbidden_paths).to.include('.git/**')
    expect(body.policy.resource_limits.command_timeout_ms).to.equal(300000)
    const p = await file('status.yaml', STATUS_PIPELINE)
    const run = await pipe(['run', p, '--json'], {cwd: dir})
    expect(run.code, run.stdout + run.stderr).to.equal(0)
    const result = json<{status: string; run_id: string}>(run)
    expect(result.status).to.equal('succeeded')
    const record = JSON.parse(await readFile(path.join(dir, '.pipe', 'runs', result.run_id, 'run.json'), 'utf8')) as {policy_version: string}
    expect(record.policy_version).to.equal(body.policy_version)
  })

  it('prints the effective policy with --effective: the file\'s values over the built-in ones', async () => {
    await file('policy.yaml', 'version: 1\nallowed_commands: [[git, status]]\nforbidden_paths: [secrets/**]\nresource_limits: {command_timeout_ms: 1000}\n')
    const r = await pipe(['policy', 'check', '--effective'], {cwd: dir})
    expect(r.code, r.stderr).to.equal(0)
    const yaml = r.stdout.split('\n').slice(2).join('\n')
    expect(yaml).to.contain('allowed_commands:\n  - [git, status]\n')
    expect(yaml).to.contain('forbidden_paths: [.git/**, .env, .env.*, "**/*.{pem,key}", "**/id_rsa*", secrets/**]\n')
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
    const check = await pipe(['policy', 'check', '--json'], {cwd: dir})
    expect(check.code, check.stdout + check.stderr).to.equal(0)
    expect(json<{policy: {allowed_commands: string[][]}}>(check).policy.allowed_commands).to.deep.equal([['git', 'status']])
    const again = await pipe(['policy', 'init'], {cwd: dir})
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
    const body = json<{file: string | null; builtin: boolean}>(await pipe(['policy', 'check', '--json'], {cwd: dir}))
    expect(body).to.include({file: null, builtin: true})
  })

  it('still refuses a bad value in a partial policy at its line', async () => {
    await file('policy.yaml', 'version: 1\nresource_limits: {memory_mb: 2}\n')
    const r = await pipe(['policy', 'check'], {cwd: dir})
    expect(r.code).to.not.equal(0)
    expect(r.stdout).to.match(/policy\.yaml:2:\d+ +resource_limits\.memory_mb/)
    expect(existsSync(path.join(dir, '.pipe'))).to.equal(false)
  })
})
