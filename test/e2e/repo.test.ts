import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {cp, mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import {createReadStream, existsSync} from 'node:fs'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {json, pipe, repoRoot, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {runRecordIn, snapshotsIn, storeIn} from '../helpers/stores.js'

// A real `pipe` process stays for the first use of each command (the coding example's run, rollback,
// policy explain), the timeout's tree kill (the test looks for the command's leftover children) and
// the three runs at once; the other commands run in this process (test/helpers/pipe-here.ts: the same
// command and output).

interface RunJson {
  run_id: string
  status: string
  error?: {code: string; message: string}
}

const coding = path.join(repoRoot, 'examples', 'coding')
let dir: string
let repo: string
let cleanup: () => Promise<void>

function git(...args: string[]): string {
  return execFileSync('git', args, {
    cwd: repo,
    encoding: 'utf8',
    env: {...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t'},
  }).trim()
}

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-repo-'))
  repo = path.join(dir, 'scratch')
  await cp(path.join(coding, 'scratch'), repo, {recursive: true})
  git('init', '-q', '-b', 'main')
})
afterEach(async () => cleanup())

async function pipelineFile(name: string, yaml: string): Promise<string> {
  const file = path.join(dir, name)
  await writeFile(file, `version: 1\nname: ${name.replace(/\.yaml$/, '')}\n${yaml}`)
  return file
}

async function policyFile(extra = ''): Promise<string> {
  const file = path.join(dir, 'policy.yaml')
  await writeFile(
    file,
    `version: 1\nallowed_commands:\n  - [node, --test, "..."]\n  - [node, --check, "{path}"]\n  - [bash, -c, "{arg}"]\n  - [echo, "..."]\n  - [printf, "..."]\n  - [git, status]\nforbidden_paths: [".git/**", "secrets/**"]\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {max_output_bytes: 1024, command_timeout_ms: 30000}\n${extra}`,
  )
  return file
}

/** `pipe run PIPELINE --policy POLICY --json` in the repository, in this process or (`command` pipe) a process. */
async function run(
  pipeline: string,
  policy?: string,
  env: Record<string, string> = {},
  command: typeof pipeHere = pipeHere,
): Promise<{result: RunJson; code: number | null; stderr: string}> {
  const r = await command(['run', pipeline, '--policy', policy ?? (await policyFile()), '--json'], {cwd: repo, env})
  return {result: json<RunJson>(r), code: r.code, stderr: r.stderr}
}

/** What `pipe snapshot show RUN --json` prints, read in this process (helpers/stores.ts). */
async function snapshots(runId: string): Promise<Snapshot[]> {
  return snapshotsIn(repo, runId)
}

describe('the coding example on a real git repository', function () {
  this.timeout(60000)

  it('edits, passes QA under the policy and commits a checkpoint', async () => {
    git('add', '-A')
    git('commit', '-qm', 'init')
    const r = await pipe(['run', path.join(coding, 'pipeline.yaml'), '--policy', path.join(coding, 'policy.yaml'), '--json'], {cwd: repo})
    expect(r.code, r.stderr).to.equal(0)
    const body = json<RunJson>(r)
    expect((await snapshots(body.run_id)).map((s) => `${s.step.name}:${s.decisions[0]!.decision}`)).to.deep.equal([
      'baseline:success',
      'fix:success',
      'qa:pass',
      'commit:success',
    ])
    expect(git('log', '--format=%s')).to.equal('T-001: add() adds\npipe: baseline before the edit\ninit')
    expect(git('status', '--porcelain')).to.equal('')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a + b')

    const exported = await pipeHere(['export', body.run_id, '--dir', path.join(dir, 'artifacts'), '--json'], {cwd: repo})
    expect(exported.code, exported.stderr).to.equal(0)
    const base = `runs/${body.run_id}`
    expect(json<{files: string[]}>(exported).files).to.include.members([
      `${base}/state.json`,
      `${base}/timeline.md`,
      `${base}/verdict.json`,
      `${base}/task_T-001/attempt_01/plan.json`,
      `${base}/task_T-001/attempt_01/patch.diff`,
      `${base}/task_T-001/attempt_01/patch_apply.json`,
      `${base}/task_T-001/attempt_01/qa_step_01_static.log`,
      `${base}/task_T-001/attempt_01/qa_step_02_tests.log`,
      `${base}/task_T-001/attempt_01/verdict.json`,
    ])
    const state = JSON.parse(await readFile(path.join(dir, 'artifacts', base, 'state.json'), 'utf8')) as Record<string, unknown>
    expect(state).to.include({run_id: body.run_id, phase: 'succeeded', last_commit_hash: git('rev-parse', 'HEAD')})
    const patch = path.join(dir, 'artifacts', base, 'task_T-001/attempt_01/patch.diff')
    expect(await readFile(patch, 'utf8')).to.contain('+  return a + b')
    // The exported patch is a real unified diff: it applies to the commit the edit started from.
    git('checkout', '-q', git('rev-list', '--max-parents=0', 'HEAD'))
    git('apply', '--check', patch)
    git('apply', patch)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a + b')
  })

  it('rolls the repository back when the tests fail', async () => {
    git('add', '-A')
    git('commit', '-qm', 'init')
    const head = git('rev-parse', 'HEAD')
    // Files a pipeline names lie beside it: the blocks go into the new pipeline's directory.
    await cp(path.join(coding, 'break.blocks'), path.join(dir, 'break.blocks'))
    const broken = (await readFile(path.join(coding, 'pipeline.yaml'), 'utf8')).replace('fix.blocks', 'break.blocks')
    const file = path.join(dir, 'break.yaml')
    await writeFile(file, broken)
    const r = await pipeHere(['run', file, '--policy', path.join(coding, 'policy.yaml'), '--json'], {cwd: repo})
    const body = json<RunJson>(r)
    const list = await snapshots(body.run_id)
    expect(list.map((s) => `${s.step.name}:${s.decisions[0]!.decision}`)).to.deep.equal(['baseline:success', 'fix:success', 'qa:fail', 'rollback:success'])
    const verdict = (list[2]!.outputs as {verdict: Record<string, unknown>}).verdict
    expect(verdict).to.include({status: 'fail', failed_stage: 'tests', error_category: 'test_fail'})
    expect((verdict.top_errors as string[]).join('\n')).to.contain('mul multiplies')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a * b')
    expect(git('status', '--porcelain')).to.equal('')
    expect(git('rev-parse', 'HEAD~1')).to.equal(head)
    expect((list[3]!.outputs as {rollback: {files: string[]}}).rollback.files).to.deep.equal(['calc.js'])
    // The store survived the rollback's clean.
    expect(existsSync(path.join(repo, '.pipe', 'runs', body.run_id, 'run.json'))).to.equal(true)
  })
})

describe('command, git and edit steps under the policy', function () {
  this.timeout(60000)

  it('never starts a denied command, and passes shell syntax as plain arguments', async () => {
    const marker = path.join(dir, 'marker')
    const denied = await pipelineFile('denied.yaml', `steps:\n  - {id: touch, kind: command, run: [touch, ${marker}]}\n`)
    const out = await run(denied)
    expect(out.code).to.equal(3)
    expect(out.result.error?.code).to.equal('E_POLICY_DENIED')
    expect(out.result.error?.message).to.contain('is not allowed (allowed_commands)')
    expect(existsSync(marker)).to.equal(false)

    const literal = await pipelineFile(
      'literal.yaml',
      "steps:\n  - {id: say, kind: command, run: [echo, 'a; touch x', '$(touch y)', '`touch z`', '| cat', '&& rm -rf .']}\n",
    )
    const said = await run(literal)
    expect(said.code, said.stderr).to.equal(0)
    const snap = (await snapshots(said.result.run_id))[0]!
    expect((snap.outputs as {command: {stdout: {head: string}}}).command.stdout.head).to.equal('a; touch x $(touch y) `touch z` | cat && rm -rf .\n')
    for (const f of ['x', 'y', 'z']) expect(existsSync(path.join(repo, f))).to.equal(false)
    expect(await readdir(repo)).to.include('calc.js')
  })

  it('kills the whole process tree on timeout, leaving no process behind', async () => {
    // Both processes carry a tag of this test's own, so processes of other test runs on the machine never count.
    const tag = `pipe-timeout-${process.pid}-${Date.now()}`
    // Both hold a fifo open for writing: its reader sees the end once the last of them is dead.
    const fifo = path.join(repo, 'alive.fifo')
    execFileSync('mkfifo', [fifo])
    const allDead = new Promise<void>((resolve, reject) =>
      createReadStream(fifo)
        .on('data', () => undefined)
        .on('end', resolve)
        .on('error', reject),
    )
    const p = await pipelineFile(
      'slow.yaml',
      `steps:\n  - {id: slow, kind: command, run: [bash, -c, 'exec 3>${fifo}; (exec -a ${tag}-bg sleep 300) & echo started; exec -a ${tag} sleep 301'], command_timeout_ms: 1000}\n`,
    )
    // A process: the test looks for the command's leftover children.
    const out = await run(p, undefined, {}, pipe)
    expect(out.code).to.equal(1)
    expect(out.result.error?.code).to.equal('E_TOOL_TIMEOUT')
    const snap = (await snapshots(out.result.run_id))[0]!
    expect((snap.errors[0]!.details as {command: {stdout: {head: string}; timed_out: boolean}}).command).to.deep.include({timed_out: true})
    // A killed process dies asynchronously: wait for the fifo's end, then no tagged process is left.
    await allDead
    const tagged = execFileSync('ps', ['-eo', 'args'], {encoding: 'utf8'})
      .split('\n')
      .filter((l) => l.includes(tag))
    expect(tagged).to.deep.equal([])
  })

  it('keeps the head and the tail of a long output, within max_output_bytes', async () => {
    const p = await pipelineFile('long.yaml', "steps:\n  - {id: long, kind: command, run: [bash, -c, 'for i in $(seq 1 5000); do echo line $i; done']}\n")
    const out = await run(p)
    const command = (
      (await snapshots(out.result.run_id))[0]!.outputs as {command: {stdout: {head: string; tail: string; omitted_bytes: number; total_bytes: number}}}
    ).command
    expect(command.stdout.head.startsWith('line 1\nline 2\n')).to.equal(true)
    expect(command.stdout.tail.endsWith('line 5000\n')).to.equal(true)
    expect(command.stdout.head.length + command.stdout.tail.length).to.be.at.most(1024)
    expect(command.stdout.total_bytes).to.be.greaterThan(40000)
    expect(command.stdout.omitted_bytes).to.equal(command.stdout.total_bytes - Buffer.byteLength(command.stdout.head) - Buffer.byteLength(command.stdout.tail))
  })

  it('holds max_concurrent_commands across processes sharing the store', async () => {
    // Inside the repository: the sandbox lets commands write nowhere else.
    const log = path.join(repo, 'intervals.log')
    const policy = await policyFile()
    await writeFile(policy, (await readFile(policy, 'utf8')).replace('max_output_bytes: 1024', 'max_output_bytes: 1024, max_concurrent_commands: 1'))
    const p = await pipelineFile(
      'slot.yaml',
      `steps:\n  - {id: busy, kind: command, run: [bash, -c, 'echo "start $(date +%s%N)" >> ${log}; sleep 0.4; echo "end $(date +%s%N)" >> ${log}']}\n`,
    )
    const runs = await Promise.all([0, 1, 2].map(() => pipe(['run', p, '--policy', policy, '--json'], {cwd: repo})))
    for (const r of runs) expect(r.code, r.stderr).to.equal(0)
    const events = (await readFile(log, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => l.split(' ')[0])
    // One command at a time: every start is followed by its end before the next start.
    expect(events).to.deep.equal(['start', 'end', 'start', 'end', 'start', 'end'])
  })

  it('routes by exit code: success and failure', async () => {
    const p = await pipelineFile(
      'exit.yaml',
      "steps:\n  - {id: check, kind: command, run: [bash, -c, 'exit 3'], on: {success: good, failure: bad}}\n  - {id: good, kind: noop}\n  - {id: bad, kind: noop}\n",
    )
    const out = await run(p)
    const list = await snapshots(out.result.run_id)
    expect(list.map((s) => s.step.name)).to.deep.equal(['check', 'bad'])
    expect((list[0]!.outputs as {command: {exit_code: number}}).command.exit_code).to.equal(3)
  })

  it('denies edits through .., an absolute path, a symlink and a forbidden glob, with the rule', async () => {
    const {symlink, mkdir} = await import('node:fs/promises')
    await mkdir(path.join(dir, 'outside'))
    await symlink(path.join(dir, 'outside'), path.join(repo, 'link'))
    const cases: Array<[string, string]> = [
      ['../escape.txt', 'sandbox'],
      [path.join(dir, 'abs.txt'), 'sandbox'],
      ['link/through.txt', 'sandbox'],
      ['secrets/key.txt', 'forbidden_paths[1] "secrets/**"'],
    ]
    for (const [target, rule] of cases) {
      const p = await pipelineFile(
        'deny.yaml',
        `steps:\n  - id: e\n    kind: edit\n    blocks: |\n      ${target}\n      <<<<<<< SEARCH\n      =======\n      pwned\n      >>>>>>> REPLACE\n`,
      )
      const out = await run(p)
      expect(out.code, target).to.equal(3)
      expect(out.result.error?.code).to.equal('E_POLICY_DENIED')
      expect(out.result.error?.message).to.contain(`(${rule})`)
    }
    expect(await readdir(path.join(dir, 'outside'))).to.deep.equal([])
    expect(existsSync(path.join(dir, 'escape.txt'))).to.equal(false)
  })

  it('leaves every file byte-identical when the last of several blocks fails, and records the nearest lines', async () => {
    const before = {calc: await readFile(path.join(repo, 'calc.js'), 'utf8'), test: await readFile(path.join(repo, 'calc.test.js'), 'utf8')}
    const p = await pipelineFile(
      'multi.yaml',
      'steps:\n  - id: e\n    kind: edit\n    blocks: |\n      calc.js\n      <<<<<<< SEARCH\n        return a - b\n      =======\n        return a + b\n      >>>>>>> REPLACE\n      calc.test.js\n      <<<<<<< SEARCH\n      no such line\n      =======\n      x\n      >>>>>>> REPLACE\n',
    )
    const out = await run(p)
    expect(out.result.error?.code).to.equal('E_CONFLICT')
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(before.calc)
    expect(await readFile(path.join(repo, 'calc.test.js'), 'utf8')).to.equal(before.test)
    const snap = (await snapshots(out.result.run_id))[0]!
    const failures = (snap.errors[0]!.details as {failures: Array<{block: number; nearest?: {text: string}}>}).failures
    expect(failures.map((f) => f.block)).to.deep.equal([2])
    expect(failures[0]!.nearest?.text).to.be.a('string').and.not.equal('')
  })

  it('checkpoints a repository with no commits, refuses a dirty tree unless allowed, and rolls back files and git state', async () => {
    const p = await pipelineFile(
      'git.yaml',
      'steps:\n  - {id: first, kind: git, action: checkpoint, allow_dirty: true, message: first, next: change}\n  - id: change\n    kind: edit\n    blocks: |\n      calc.js\n      <<<<<<< SEARCH\n        return a - b\n      =======\n        return 42\n      >>>>>>> REPLACE\n      notes.txt\n      <<<<<<< SEARCH\n      =======\n      new file\n      >>>>>>> REPLACE\n    next: second\n  - {id: second, kind: git, action: checkpoint, allow_dirty: true, message: second, next: back}\n  - {id: back, kind: git, action: rollback, to: first}\n',
    )
    // Nobody configured anywhere (a fresh CI box): pipe commits as itself. The second checkpoint's
    // repository names a person, as whom it commits.
    const nobody = path.join(dir, 'nobody')
    await mkdir(nobody)
    const out = await run(p, undefined, {HOME: nobody, XDG_CONFIG_HOME: nobody, GIT_CONFIG_NOSYSTEM: '1'})
    expect(out.code, out.stderr).to.equal(0)
    const list = await snapshots(out.result.run_id)
    const first = (list[0]!.outputs as {checkpoint: {commit: string; parent: string | null; files: string[]; branch: string}}).checkpoint
    expect(first.parent).to.equal(null)
    expect(first.branch, 'the branch of a first commit').to.equal('main')
    expect(git('log', '-1', '--format=%an <%ae>', first.commit)).to.equal('pipe <pipe@localhost>')
    expect(first.files).to.include.members(['calc.js', 'calc.test.js', 'package.json'])
    expect(first.files.some((f) => f.startsWith('.pipe'))).to.equal(false)
    const back = (list[3]!.outputs as {rollback: {from: string; to: string}}).rollback
    expect(back.to).to.equal(first.commit)
    expect(git('rev-parse', 'HEAD')).to.equal(first.commit)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('return a - b')
    expect(existsSync(path.join(repo, 'notes.txt'))).to.equal(false)
    expect(git('status', '--porcelain')).to.equal('')
    git('config', 'user.name', 'Someone')
    git('config', 'user.email', 'someone@example.com')
    const again = await run(await pipelineFile('again.yaml', 'steps:\n  - {id: cp, kind: git, action: checkpoint, message: again}\n'), undefined, {
      HOME: nobody,
      XDG_CONFIG_HOME: nobody,
      GIT_CONFIG_NOSYSTEM: '1',
    })
    expect(again.code, again.stderr).to.equal(0)
    expect(git('log', '-1', '--format=%an <%ae> %s')).to.equal('Someone <someone@example.com> again')

    await writeFile(path.join(repo, 'calc.js'), 'dirty\n')
    const strict = await pipelineFile('strict.yaml', 'steps:\n  - {id: cp, kind: git, action: checkpoint}\n')
    const refused = await run(strict)
    expect(refused.result.error?.code).to.equal('E_CONFLICT')
    expect(refused.result.error?.message).to.contain('uncommitted change(s): calc.js')
  })

  it('undoes an edit step by hand with pipe rollback', async () => {
    const p = await pipelineFile(
      'undo.yaml',
      'steps:\n  - id: fix\n    kind: edit\n    blocks: |\n      calc.js\n      <<<<<<< SEARCH\n        return a - b\n      =======\n        return a + b\n      >>>>>>> REPLACE\n',
    )
    const out = await run(p)
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('a + b')
    const undo = await pipe(['rollback', out.result.run_id, '--step', 'fix', '--json'], {cwd: repo})
    expect(undo.code, undo.stderr).to.equal(0)
    expect(json<{files: Array<{path: string; restored: string}>}>(undo).files).to.deep.equal([{path: 'calc.js', restored: 'reverted'}])
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.contain('a - b')
    const twice = await pipeHere(['rollback', out.result.run_id, '--step', 'fix'], {cwd: repo})
    expect(twice.code).to.equal(2)
    expect(twice.stderr).to.contain('was already undone')
    const events = await (await storeIn(repo)).readEvents(out.result.run_id)
    expect(
      events.map((e) => e.event),
      "the undo is in the run's history",
    ).to.include('edit_reverted')
  })

  it('records the policy version with the run and every snapshot', async () => {
    const p = await pipelineFile('v.yaml', 'steps:\n  - {id: a, kind: noop}\n')
    const policy = await policyFile()
    const version = json<{policy_version: string}>(await pipeHere(['policy', 'check', policy, '--json'], {cwd: repo})).policy_version
    const out = await run(p, policy)
    const list = await snapshots(out.result.run_id)
    expect(list[0]!.meta.policy_version).to.equal(version)
    expect((await runRecordIn(repo, out.result.run_id)).run.policy_version).to.equal(version)
  })

  it('explains the policy from the command line', async () => {
    const policy = await policyFile()
    const allowed = await pipe(['policy', 'explain', '--policy', policy, '--', 'node', '--test', ';', 'rm', '-rf', '/'], {cwd: repo})
    expect(allowed.code).to.equal(0)
    expect(allowed.stdout).to.contain('allowed').and.contain('allowed_commands[0] ["node","--test","..."]')
    // One line each: the agent's line ends where the policy's begins (no escaped \n between them).
    expect(allowed.stdout).to.match(/\n {2}agent run_command: level \w+, confirmation [^\n]+\n {2}policy: /)
    expect(allowed.stdout).to.not.contain('\\n')
    const denied = await pipeHere(['policy', 'explain', '--policy', policy, '--json', '--', 'curl', 'http://x'], {cwd: repo})
    expect(denied.code).to.equal(3)
    expect(json<{allowed: boolean; rule: string}>(denied)).to.include({allowed: false, rule: 'allowed_commands'})
    const pathDenied = await pipeHere(['policy', 'explain', '--policy', policy, '--path', 'secrets/a'], {cwd: repo})
    expect(pathDenied.code).to.equal(3)
    expect(pathDenied.stdout).to.contain('forbidden_paths[1] "secrets/**"')
  })
})
