/**
 * Attacks on the trust promises (issue 10) across the seams between its parts: each test is a
 * reproduction that broke a promise once.
 *
 * The command each test is about runs as a `pipe` process (a denied run, the first validate refusal,
 * a redrive, policy check, audit verify's finding, a refused publish, a refused resume, a run whose
 * task id would climb out); the runs that set it up, the read-backs and the further variants run in
 * this process (test/helpers/pipe-here.ts: the same command from argv, its output and exit code).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {chmod, mkdir, readFile, readdir, rm, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'

let dir: string
let repo: string
let store: string
let home: string
let cleanup: () => Promise<void>

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-attack-'))
  repo = path.join(dir, 'repo')
  store = path.join(dir, 'store')
  home = path.join(dir, 'home')
  await mkdir(repo)
})
afterEach(async () => cleanup())

const POLICY = `version: 1
allowed_commands:
  - [git, status]
  - [node, "{path}"]
forbidden_paths: [".git/**"]
max_patch_lines: 50
max_retries_default: 0
sandbox: off
resource_limits: {command_timeout_ms: 60000, max_output_bytes: 4096, max_concurrent_commands: 1}
`

async function files(pipeline: string, policy = POLICY): Promise<{pipeline: string; policy: string}> {
  await writeFile(path.join(dir, 'p.yaml'), `version: 1\nname: attack\nsteps:\n${pipeline}`)
  await writeFile(path.join(dir, 'policy.yaml'), policy)
  return {pipeline: path.join(dir, 'p.yaml'), policy: path.join(dir, 'policy.yaml')}
}

function run(args: string[]): ReturnType<typeof pipe> {
  return pipe([...args, '--store', store], {cwd: repo, env: {PIPE_HOME: home}, timeoutMs: 120000})
}

/** `run`'s command in this process. */
function here(args: string[]): ReturnType<typeof pipe> {
  return pipeHere([...args, '--store', store], {cwd: repo, env: {PIPE_HOME: home}})
}

describe('attacks on the trust promises', function () {
  this.timeout(180000)

  it("a step's env cannot change which program an allowed argv runs (PATH, NODE_OPTIONS, LD_PRELOAD, GIT_CONFIG_*)", async () => {
    execFileSync('git', ['init', '-q'], {cwd: repo})
    const marker = path.join(dir, 'evil-ran')
    await mkdir(path.join(repo, 'bin'))
    await writeFile(path.join(repo, 'bin', 'git'), `#!/bin/sh\ntouch ${marker}\n`)
    await chmod(path.join(repo, 'bin', 'git'), 0o755)
    const f = await files(`  - {id: status, kind: command, run: [git, status], env: {PATH: "${path.join(repo, 'bin')}:/usr/bin:/bin"}}\n`)
    const r = await run(['run', f.pipeline, '--policy', f.policy, '--json'])
    expect(r.code, r.stderr).to.equal(3)
    expect(json<{error: {code: string}}>(r).error.code).to.equal('E_POLICY_DENIED')
    expect(existsSync(marker), 'the repository\'s own "git" never ran').to.equal(false)

    for (const name of ['NODE_OPTIONS', 'LD_PRELOAD', 'GIT_CONFIG_COUNT']) {
      const g = await files(`  - {id: status, kind: command, run: [git, status], env: {${name}: "x"}}\n`)
      // (The first refusal from a process, the others in this process.)
      const checked = await (name === 'NODE_OPTIONS' ? pipe : pipeHere)(['validate', g.pipeline, '--policy', g.policy, '--json'], {
        cwd: repo,
        env: {PIPE_HOME: home},
      })
      expect(checked.code, `${name}: ${checked.stdout}`).to.not.equal(0)
      expect(checked.stdout).to.contain(name).and.contain('policy-denied')
    }
    // A harmless variable is still fine.
    const ok = await files('  - {id: status, kind: command, run: [git, status], env: {npm_config_cache: /tmp/npm-cache}}\n')
    const fine = await here(['run', ok.pipeline, '--policy', ok.policy, '--json'])
    expect(fine.code, fine.stderr).to.equal(0)
  })

  it('records where each status change came from: failed -> running on a redrive, not pending -> running', async () => {
    await writeFile(path.join(repo, 'step.js'), 'process.exit(2)\n')
    const f = await files('  - {id: build, kind: command, run: [node, step.js]}\n')
    const first = await here(['run', f.pipeline, '--policy', f.policy, '--json'])
    expect(first.code, first.stderr).to.equal(1)
    const runId = json<{run_id: string}>(first).run_id
    await writeFile(path.join(repo, 'step.js'), 'process.exit(0)\n')
    const again = await run(['resume', runId, '--json'])
    expect(again.code, again.stderr).to.equal(0)
    const events = (await readFile(path.join(store, 'runs', runId, 'events.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as {event: string; from?: string; to?: string})
    const moves = events.filter((e) => e.to && e.event !== 'created').map((e) => `${e.event}: ${e.from} -> ${e.to}`)
    expect(moves).to.deep.equal(['started: pending -> running', 'failed: running -> failed', 'redriven: failed -> running', 'succeeded: running -> succeeded'])
    const verified = await here(['audit', 'verify', '--json'])
    expect(verified.code, verified.stdout).to.equal(0)
  })

  it('pipe policy check --json on an invalid policy prints exactly one JSON document', async () => {
    await writeFile(path.join(dir, 'bad.yaml'), 'version: 1\nallowed_commands: nope\n')
    const r = await pipe(['policy', 'check', path.join(dir, 'bad.yaml'), '--json'], {cwd: repo, env: {PIPE_HOME: home}})
    expect(r.code).to.equal(2)
    expect(json<{error: {code: string}}>(r).error.code).to.equal('E_CONFIG')
    expect(r.stderr).to.contain('allowed_commands')
  })

  it('audit verify sees a delivery whose ledger entry and ledger log were deleted, though the publish snapshot names it', async () => {
    const r = await here(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'])
    expect(r.code, r.stderr).to.equal(0)
    const entries = await readdir(path.join(store, 'ledger'))
    expect(entries).to.have.length(1)
    await rm(path.join(store, 'ledger', entries[0]!))
    await rm(path.join(store, 'audit', 'ledger.jsonl'))
    const verified = await run(['audit', 'verify'])
    expect(verified.code, verified.stdout + verified.stderr).to.equal(4)
    expect(verified.stdout)
      .to.contain(entries[0]!.replace(/\.json$/, ''))
      .and.contain('ledger entry is missing')
  })

  it('the file publish target never writes through a symlink a command planted in the workspace', async () => {
    const outside = path.join(dir, 'outside')
    await mkdir(outside)
    await mkdir(path.join(repo, 'published'))
    // The store is named "store", so the default pipeline's file target writes under published/store/.
    await symlink(outside, path.join(repo, 'published', 'store'))
    const r = await run(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'])
    expect(r.code, r.stderr).to.equal(6)
    expect(json<{status: string; error: {code: string; message: string}}>(r).error).to.include({code: 'E_POLICY_DENIED'})
    expect(await readdir(outside), 'nothing written outside the workspace').to.deep.equal([])
  })

  it('the file publish target creates nothing through a symlink above its directory either (published/ itself planted)', async () => {
    const outside = path.join(dir, 'outside')
    await mkdir(outside)
    await symlink(outside, path.join(repo, 'published'))
    // (The refused publish from a process: the test before.)
    const r = await here(['run', defaultPipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json'])
    expect(r.code, r.stderr).to.equal(6)
    expect(json<{status: string; error: {code: string; message: string}}>(r).error).to.include({code: 'E_POLICY_DENIED'})
    expect(await readdir(outside), 'not even a directory made outside the workspace').to.deep.equal([])
  })

  it('a failure the pipeline handled and ended on is not offered for redrive, and resume says why instead of repeating the handler', async () => {
    await writeFile(path.join(repo, 'step.js'), 'process.exit(2)\n')
    const f = await files('  - {id: build, kind: command, run: [node, step.js], on: {failure: cleanup}}\n  - {id: cleanup, kind: noop}\n')
    const first = await here(['run', f.pipeline, '--policy', f.policy, '--json'])
    expect(first.code, first.stderr).to.equal(1)
    const body = json<{run_id: string; status: string; next_command?: string; error: {hint: string}}>(first)
    expect(body.status).to.equal('failed')
    expect(body.next_command).to.equal(undefined)
    expect(body.error.hint).to.not.contain('pipe resume')
    const again = await run(['resume', body.run_id, '--json'])
    expect(again.code, again.stderr).to.equal(2)
    const refused = json<{error: {code: string; message: string; hint: string}}>(again).error
    expect(refused.code).to.equal('E_STATE')
    expect(refused.hint).to.contain(`pipe replay ${body.run_id} --from build`)
    const snapshots = await readdir(path.join(store, 'runs', body.run_id, 'snapshots'))
    expect(snapshots, 'the handler did not run again').to.have.length(2)
  })

  it("a task id known only at run time (an input, a model's plan) keeps the artifacts and pipe export inside their folders", async () => {
    const outside = path.join(dir, 'outside')
    await mkdir(outside)
    execFileSync('git', ['init', '-q'], {cwd: repo})
    // The task folder is task_ID: an id that starts with a separator would climb out of the run's folder.
    const climb = `/${'../'.repeat(12)}${outside.slice(1)}/planted`
    const {pipeline, policy} = await files(`  - {id: check, kind: qa, task: "\${{ inputs.t }}", stages: {tests: [[git, status]]}}\n`)
    await writeFile(pipeline, (await readFile(pipeline, 'utf8')).replace('steps:\n', 'artifacts: true\ninputs:\n  t: {type: string}\nsteps:\n'))
    const r = await run(['run', pipeline, '--policy', policy, '-i', `t=${climb}`, '--json'])
    expect(r.code, r.stderr).to.equal(0)
    const runId = json<{run_id: string}>(r).run_id
    const exported = await here(['export', runId, '--dir', path.join(dir, 'out'), '--json'])
    expect(exported.code, exported.stderr).to.equal(0)
    expect(await readdir(outside), 'nothing written outside').to.deep.equal([])
    // The id is kept, with its separators encoded: one folder per task, inside the run's.
    for (const root of [path.join(store, 'artifacts'), path.join(dir, 'out')]) {
      const tasks = (await readdir(path.join(root, 'runs', runId))).filter((f) => f.startsWith('task_'))
      expect(tasks, root).to.deep.equal([`task_${encodeURIComponent(climb)}`])
      expect(await readdir(path.join(root, 'runs', runId, tasks[0]!)), root).to.deep.equal(['attempt_01'])
    }
    const out = path.join(dir, 'out')
    for (const f of json<{files: string[]}>(exported).files) expect(path.resolve(out, f).startsWith(`${out}${path.sep}`), f).to.equal(true)
  })
})
