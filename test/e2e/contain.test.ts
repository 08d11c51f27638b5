/**
 * What a sandboxed command leaves in the workspace must not run, or be written through, outside
 * the sandbox: planted git repositories, hooks and config (pipe's git steps), planted symlinks
 * (the file publish target), and an edit whose syntax check could not start. The built CLI on
 * real git repositories in temp dirs, with bubblewrap.
 *
 * The file's first run and its policy check are `pipe` processes; the other runs and the read-backs
 * (snapshot show) run in this process (test/helpers/pipe-here.ts: the same command from argv, its
 * output and exit code; its commands sandboxed by the same bubblewrap).
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync, lstatSync} from 'node:fs'
import {chmod, mkdir, readdir, readFile, symlink, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {PipeError} from '../../src/errors.js'
import {defaultPolicy} from '../../src/policy/policy.js'
import {toolNamed} from '../../src/steps/agent/tools.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {defaultPipeline, examples, json, pipe, tempDir} from '../helpers/cli.js'
import {pipeHere} from '../helpers/pipe-here.js'
import {ModelServer} from '../helpers/model-server.js'
import {needs} from '../helpers/tools.js'

interface RunJson {
  run_id: string
  status: string
  error?: {code: string; message: string; hint?: string}
}

let dir: string
let cleanup: () => Promise<void>

beforeEach(async () => {
  ;({dir, cleanup} = await tempDir('pipe-contain-'))
})
afterEach(async () => cleanup())

const GIT_ENV = {...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t'}

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {cwd, encoding: 'utf8', env: GIT_ENV}).trim()
}

async function policyFile(extra = ''): Promise<string> {
  const file = path.join(dir, 'policy.yaml')
  await writeFile(
    file,
    `version: 1\nallowed_commands:\n  - [node, --test, "{path}"]\n  - [node, "{path}"]\nforbidden_paths: []\nmax_patch_lines: 50\nmax_retries_default: 0\nresource_limits: {command_timeout_ms: 60000, max_concurrent_commands: 1}\nsandbox: required\n${extra}`,
  )
  return file
}

async function run(
  cwd: string,
  steps: string,
  policy?: string,
  env: Record<string, string> = {},
  spawned = false,
): Promise<{result: RunJson; code: number | null; stderr: string}> {
  const file = path.join(dir, 'p.yaml')
  await writeFile(file, `version: 1\nname: contain\nsteps:\n${steps}`)
  const args = ['run', file, '--policy', policy ?? (await policyFile()), '--json']
  // The command in this process, or (spawned) a `pipe` process.
  const r = spawned ? await pipe(args, {cwd, env, timeoutMs: 120000}) : await pipeHere(args, {cwd, env})
  return {result: json<RunJson>(r), code: r.code, stderr: r.stderr}
}

async function snapshots(cwd: string, runId: string): Promise<Snapshot[]> {
  return json<Snapshot[]>(await pipeHere(['snapshot', 'show', runId, '--json'], {cwd}))
}

/** A hook body that leaves a file outside the repository, so that a run hook shows. */
function hook(marker: string): string {
  return `#!/bin/sh\necho ran > ${JSON.stringify(marker)}\n`
}

describe('containment: planted git repositories and config', function () {
  this.timeout(180000)

  before(function () {
    // Skipped without bwrap (said once at the start), failed under CI.
    needs(this, 'bubblewrap')
  })

  it('refuses a .git a sandboxed test planted in a monorepo package, and never runs its post-commit hook', async () => {
    const mono = path.join(dir, 'mono')
    const pkg = path.join(mono, 'pkg')
    await mkdir(pkg, {recursive: true})
    await writeFile(path.join(pkg, 'index.js'), 'export const one = 1\n')
    git(mono, 'init', '-q', '-b', 'main')
    git(mono, 'add', '-A')
    git(mono, 'commit', '-qm', 'start')
    const marker = path.join(dir, 'owned')
    // A test file the agent wrote: under bwrap it may write the package folder, so it makes a repository there.
    await writeFile(
      path.join(pkg, 'plant.test.mjs'),
      `import {test} from 'node:test'
import {execFileSync} from 'node:child_process'
import {chmodSync, writeFileSync} from 'node:fs'
test('plants', () => {
  execFileSync('git', ['init', '-q'])
  writeFileSync('.git/hooks/post-commit', ${JSON.stringify(hook(marker))})
  chmodSync('.git/hooks/post-commit', 0o755)
})
`,
    )
    const out = await run(
      pkg,
      `  - {id: qa, kind: qa, stages: {tests: [[node, --test, plant.test.mjs]]}, on: {pass: save, fail: save, error: save}}\n  - {id: save, kind: git, action: checkpoint, allow_dirty: true}\n`,
      undefined,
      {},
      true,
    )
    expect(existsSync(marker), 'the planted post-commit hook ran').to.equal(false)
    expect(out.code, out.stderr).to.not.equal(0)
    expect(out.result.status).to.equal('failed')
    // The store is at the repository root (mono/.pipe), where the run found no store and made one; pkg now holds a .git of its own.
    const [qa, save] = await snapshots(mono, out.result.run_id)
    expect(qa!.errors[0]).to.include({code: 'E_POLICY_DENIED'})
    expect(qa!.errors[0]!.message).to.contain(`created ${path.join(pkg, '.git')}`)
    expect(save!.errors[0]).to.include({code: 'E_POLICY_DENIED'})
    expect(save!.errors[0]!.message).to.contain(`${path.join(pkg, '.git')} appeared during the run`)
    // The monorepo got no commit either.
    expect(git(mono, 'rev-list', '--count', 'HEAD')).to.equal('1')
  })

  it('refuses a .git planted in a workspace that had no repository at all', async () => {
    const ws = path.join(dir, 'ws')
    await mkdir(ws)
    const marker = path.join(dir, 'owned')
    await writeFile(
      path.join(ws, 'plant.mjs'),
      `import {execFileSync} from 'node:child_process'\nimport {chmodSync, writeFileSync} from 'node:fs'\nexecFileSync('git', ['init', '-q'])\nwriteFileSync('.git/hooks/post-commit', ${JSON.stringify(hook(marker))})\nchmodSync('.git/hooks/post-commit', 0o755)\n`,
    )
    const out = await run(
      ws,
      `  - {id: plant, kind: command, run: [node, plant.mjs], on: {success: save, failure: save, error: save}}\n  - {id: save, kind: git, action: checkpoint, allow_dirty: true}\n`,
    )
    expect(existsSync(marker), 'the planted post-commit hook ran').to.equal(false)
    expect(out.result.status).to.equal('failed')
    const [plant, save] = await snapshots(ws, out.result.run_id)
    expect(plant!.errors[0]).to.include({code: 'E_POLICY_DENIED'})
    expect(save!.errors[0]!.message).to.contain('it had no repository when the run started')
  })

  it('runs no hook, hooksPath, fsmonitor or pager the repository config names, and still commits', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(path.join(repo, 'myhooks'), {recursive: true})
    await writeFile(path.join(repo, 'a.txt'), 'a\n')
    git(repo, 'init', '-q', '-b', 'main')
    git(repo, 'add', '-A')
    git(repo, 'commit', '-qm', 'start')
    // As a command could leave them where the sandbox is off (sandbox: auto without bwrap).
    const script = async (file: string, marker: string): Promise<void> => {
      await writeFile(file, hook(marker))
      await chmod(file, 0o755)
    }
    await script(path.join(repo, '.git', 'hooks', 'post-commit'), path.join(dir, 'post-commit'))
    await script(path.join(repo, '.git', 'hooks', 'pre-commit'), path.join(dir, 'pre-commit'))
    await script(path.join(repo, 'myhooks', 'post-commit'), path.join(dir, 'hooks-path'))
    await script(path.join(dir, 'monitor'), path.join(dir, 'fsmonitor'))
    await script(path.join(dir, 'pager'), path.join(dir, 'pager-ran'))
    git(repo, 'config', 'core.fsmonitor', path.join(dir, 'monitor'))
    git(repo, 'config', 'core.pager', path.join(dir, 'pager'))
    await writeFile(path.join(repo, 'a.txt'), 'b\n')
    const out = await run(repo, '  - {id: save, kind: git, action: checkpoint, allow_dirty: true}\n', await policyFile(), {})
    expect(out.code, out.stderr).to.equal(0)
    expect(git(repo, 'rev-list', '--count', 'HEAD')).to.equal('2')
    for (const ran of ['post-commit', 'pre-commit', 'fsmonitor', 'pager-ran']) expect(existsSync(path.join(dir, ran)), `${ran} ran`).to.equal(false)
    git(repo, 'config', 'core.hooksPath', 'myhooks')
    await writeFile(path.join(repo, 'a.txt'), 'c\n')
    const again = await run(repo, '  - {id: save, kind: git, action: checkpoint, allow_dirty: true}\n')
    expect(again.code, again.stderr).to.equal(0)
    expect(existsSync(path.join(dir, 'hooks-path')), 'core.hooksPath was followed').to.equal(false)
  })

  it('refuses a repository whose own config names a filter program, and runs none', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    await writeFile(path.join(repo, 'a.txt'), 'a\n')
    git(repo, 'init', '-q', '-b', 'main')
    git(repo, 'add', '-A')
    git(repo, 'commit', '-qm', 'start')
    await writeFile(path.join(dir, 'clean'), `#!/bin/sh\necho ran > ${JSON.stringify(path.join(dir, 'filtered'))}\ncat\n`)
    await chmod(path.join(dir, 'clean'), 0o755)
    git(repo, 'config', 'filter.planted.clean', path.join(dir, 'clean'))
    await writeFile(path.join(repo, '.gitattributes'), '*.txt filter=planted\n')
    await writeFile(path.join(repo, 'a.txt'), 'b\n')
    const out = await run(repo, '  - {id: save, kind: git, action: checkpoint, allow_dirty: true}\n')
    expect(existsSync(path.join(dir, 'filtered')), 'the filter ran').to.equal(false)
    expect(out.result.error?.code).to.equal('E_POLICY_DENIED')
    expect(out.result.error?.message).to.contain('filter.planted.clean')
    expect(git(repo, 'rev-list', '--count', 'HEAD')).to.equal('1')
  })
})

/** Everything below `root`, as relative paths, sorted. */
async function tree(root: string): Promise<string[]> {
  if (!existsSync(root)) return []
  return (await readdir(root, {recursive: true})).map(String).sort()
}

describe('containment: the file publish target and planted symlinks', function () {
  this.timeout(180000)

  for (const [label, into] of [
    ['.git', '.git'],
    ['the store', '.pipe/ledger'],
  ] as const) {
    it(`refuses to publish through published -> ${into} that a command planted, writing nothing in ${label}`, async () => {
      const repo = path.join(dir, 'repo')
      await mkdir(repo)
      git(repo, 'init', '-q', '-b', 'main')
      await writeFile(path.join(repo, 'plant.mjs'), `import {symlinkSync} from 'node:fs'\nsymlinkSync(${JSON.stringify(into)}, 'published')\n`)
      const pipeline = path.join(dir, 'planted.yaml')
      await writeFile(
        pipeline,
        `version: 1\nname: planted\nextends: ${JSON.stringify(defaultPipeline)}\noverlay:\n  - {insert_before: publish, step: {id: plant, kind: command, run: [node, plant.mjs]}}\n`,
      )
      // The store exists before the command runs, as it does in any run.
      const before = {git: await tree(path.join(repo, '.git')), store: await tree(path.join(repo, '.pipe', 'ledger'))}
      const args = ['run', pipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--policy', await policyFile(), '--json']
      const r = await pipeHere(args, {cwd: repo})
      expect(lstatSync(path.join(repo, 'published')).isSymbolicLink(), 'the command planted the link').to.equal(true)
      expect(r.code, r.stderr).to.not.equal(0)
      const error = json<RunJson>(r).error!
      expect(error.code).to.equal('E_POLICY_DENIED')
      expect(error.message).to.contain(`symlink published -> ${into}`)
      expect(
        (await tree(path.join(repo, '.git'))).filter((f) => f.includes('F-')),
        'nothing published into .git',
      ).to.deep.equal([])
      // The ledger's own records are files F-...+target+S-....json; a published feature would be a folder F-....
      expect(
        (await tree(path.join(repo, '.pipe', 'ledger'))).filter((f) => /^F-\d{4}-\d+($|\/)/.test(f)),
        'nothing published into the store',
      ).to.deep.equal([])
      expect(before.git.filter((f) => f.includes('F-'))).to.deep.equal([])
    })
  }

  it('refuses a target dir that is inside .git or the store even without a link', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    git(repo, 'init', '-q', '-b', 'main')
    for (const target of ['.git/published', '.pipe/published']) {
      const pipeline = path.join(dir, 'inside.yaml')
      await writeFile(
        pipeline,
        `version: 1\nname: inside\nextends: ${JSON.stringify(defaultPipeline)}\noverlay:\n  - {replace: publish, step: {id: publish, kind: publish, targets: [{name: local, type: file, dir: ${target}}]}}\n`,
      )
      const args = ['run', pipeline, '--input', path.join(examples, 'full-prd.md'), '--decision', 'go', '--json']
      const r = await pipeHere(args, {cwd: repo})
      const error = json<RunJson>(r).error
      expect(error?.code, r.stderr).to.equal('E_POLICY_DENIED')
      expect(existsSync(path.join(repo, target)), `${target} was created`).to.equal(false)
    }
  })
})

const BUGGY = 'export function add(a, b) {\n  return a - b\n}\n'
const FIX = 'calc.js\n<<<<<<< SEARCH\n  return a - b\n=======\n  return a + b\n>>>>>>> REPLACE\n'
const CHECKED =
  'version: 1\nallowed_commands:\n  - [node, --check, "{path}"]\nforbidden_paths: []\nmax_patch_lines: 50\nmax_retries_default: 0\nconfirm: []\nresource_limits: {command_timeout_ms: 60000}\n'

describe('containment: edits', function () {
  this.timeout(180000)

  it('refuses an edit that reaches .git through a symlink, whatever forbidden_paths says', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    git(repo, 'init', '-q', '-b', 'main')
    await symlink('.git', path.join(repo, 'meta'))
    const blocks = 'meta/hooks/post-commit\n<<<<<<< SEARCH\n=======\n#!/bin/sh\necho ran\n>>>>>>> REPLACE\n'
    const out = await run(repo, `  - {id: plant, kind: edit, blocks: ${JSON.stringify(blocks)}}\n`)
    expect(out.result.error?.code, out.stderr).to.equal('E_POLICY_DENIED')
    expect(out.result.error?.message).to.contain('(git)')
    expect(existsSync(path.join(repo, '.git', 'hooks', 'post-commit'))).to.equal(false)
  })

  it('rolls the edit back and records why when the syntax checker cannot start (sandbox: required, no bwrap)', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
    await writeFile(path.join(repo, 'calc.js'), BUGGY)
    await writeFile(path.join(dir, 'task.md'), 'Fix add().\n')
    const policy = path.join(dir, 'policy.yaml')
    await writeFile(policy, `${CHECKED}sandbox: required\nsyntax_checks: {".js": [node, --check, "{path}"]}\n`)
    const server = await ModelServer.start()
    try {
      server.script('fix', {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: FIX}}]}, {content: 'fixed'})
      const file = path.join(dir, 'p.yaml')
      await writeFile(file, 'version: 1\nname: fix\nsteps:\n  - {id: fix, kind: agent, prompt: task.md, tools: [apply_edit_blocks]}\n')
      const r = await pipeHere(['run', file, '--policy', policy, '--json'], {cwd: repo, env: {OPENAI_BASE_URL: server.url, PIPE_BWRAP: ''}})
      const result = json<RunJson>(r)
      expect(result.error?.code, r.stderr).to.equal('E_POLICY_DENIED')
      expect(result.error?.message).to.contain('could not start').and.contain('rolled back (calc.js reverted)')
      expect(await readFile(path.join(repo, 'calc.js'), 'utf8'), 'the unchecked edit stayed on disk').to.equal(BUGGY)
      const [snap] = await snapshots(repo, result.run_id)
      const details = snap!.errors[0]!.details as {rolled_back: unknown; syntax_check: {started: boolean; argv: string[]}}
      expect(details.rolled_back).to.deep.equal([{path: 'calc.js', restored: 'reverted'}])
      expect(details.syntax_check).to.include({started: false})
      expect(details.syntax_check.argv).to.deep.equal(['node', '--check', 'calc.js'])
    } finally {
      await server.close()
    }
  })

  it('rolls the edit back when the allow-list refuses the checker (a policy built in code, past pipe policy check)', async () => {
    const repo = path.join(dir, 'repo')
    await mkdir(repo)
    await writeFile(path.join(repo, 'calc.js'), BUGGY)
    const base = defaultPolicy()
    const policy = {...base, policy: {...base.policy, sandbox: 'off' as const, syntax_checks: {'.js': ['node', '--check', '{path}'] as [string, ...string[]]}}}
    const place = {policy, root: repo, signal: new AbortController().signal, slotsDir: path.join(dir, 'slots')}
    const error = await toolNamed('apply_edit_blocks')!
      .run({blocks: FIX}, place)
      .then(
        () => null,
        (e: unknown) => e,
      )
    expect(error).to.be.instanceOf(PipeError)
    expect((error as PipeError).code).to.equal('E_POLICY_DENIED')
    expect((error as PipeError).details).to.deep.include({rolled_back: [{path: 'calc.js', restored: 'reverted'}]})
    expect(await readFile(path.join(repo, 'calc.js'), 'utf8')).to.equal(BUGGY)
  })

  it('pipe policy check flags a syntax checker the allow-list forbids', async () => {
    const policy = path.join(dir, 'policy.yaml')
    await writeFile(policy, `${CHECKED}syntax_checks:\n  ".js": [node, --check, "{path}"]\n  ".py": [python3, -m, py_compile, "{path}"]\n`)
    const r = await pipe(['policy', 'check', policy], {cwd: dir})
    expect(r.code, r.stdout + r.stderr).to.equal(2)
    expect(r.stdout).to.contain('syntax_checks..py').and.contain('not allowed by allowed_commands').and.not.contain('syntax_checks..js')
  })
})
