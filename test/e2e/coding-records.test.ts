/**
 * Seed 004's records of the coding pipeline kept exact (issue 37, items 9-12): the live artifacts
 * under STORE/artifacts/ are what `pipe export --dir` writes at that moment, after every command of a
 * scenario (a run paused for a person and finished by pipe confirm included). Real processes (the
 * built CLI), real git, a scripted chat-completions server on 127.0.0.1.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdir, readFile, readdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {json, pipe, repoRoot, tempDir, type CliResult} from '../helpers/cli.js'
import {exportRun} from '../../src/engine/export.js'
import {readIn, runRecordIn} from '../helpers/stores.js'
import {ARCH, BUGGY, TEST, block, task} from '../helpers/coding-repo.js'
import {statsIn} from '../helpers/stats-in.js'
import {cannedReply, ModelServer, type ModelRequest, type Scripted} from '../helpers/model-server.js'

const SUMMARY = {
  what_changed: ['calc.js'],
  why: 'add() subtracted',
  how_verified: ['node --test'],
  risks: [],
  rollback: 'git revert',
  blockers: [],
  manual_steps: [],
}

let tasks: unknown = {tasks: [task('T1')]}
function reply(request: ModelRequest): Scripted {
  const usage = {prompt_tokens: 200, completion_tokens: 60}
  if (request.kind === 'arch') return {content: JSON.stringify(ARCH), usage}
  if (request.kind === 'tasks') return {content: JSON.stringify(tasks), usage}
  if (request.kind === 'summary') return {content: JSON.stringify(SUMMARY), usage}
  if (request.kind === 'implement') return {status: 500, body: {error: {message: 'no scripted agent turn left'}}}
  return cannedReply(request)
}

let dir: string
let repo: string
let cleanup: () => Promise<void>
let server: ModelServer

async function setup(planned: unknown, confirm = '[]'): Promise<void> {
  tasks = planned
  ;({dir, cleanup} = await tempDir('pipe-records-'))
  repo = path.join(dir, 'repo')
  await mkdir(repo)
  await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
  await writeFile(path.join(repo, 'calc.js'), BUGGY)
  await writeFile(path.join(repo, 'calc.test.js'), TEST)
  git('init', '-q')
  git('add', '-A')
  git('commit', '-qm', 'start')
  await writeFile(
    path.join(dir, 'policy.yaml'),
    `version: 1
allowed_commands:
  - [node, calc.test.js]
  - [node, --check, "{path}"]
forbidden_paths: [".git/**", ".env"]
max_patch_lines: 200
max_retries_default: 2
resource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576}
sandbox: auto
tool_versions: {node: "20"}
confirm: ${confirm}
`,
  )
  server = await ModelServer.start(reply)
}

function git(...args: string[]): string {
  return execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], {cwd: repo, encoding: 'utf8'}).trim()
}

const env = (): Record<string, string> => ({OPENAI_BASE_URL: server.url, PIPE_HOME: path.join(dir, 'home')})
const cli = (args: string[]): Promise<CliResult> => pipe(args, {cwd: repo, env: env(), timeoutMs: 240000})

function run(): Promise<CliResult> {
  const text = 'add(a, b) in calc.js must return the sum of a and b; today it subtracts.'
  return cli(['run', path.join(repoRoot, 'pipelines', 'coding.yaml'), '--text', text, '--decision', 'go', '--json', '--policy', path.join(dir, 'policy.yaml')])
}

/** Every file under a folder, relative to it, with its text. */
async function tree(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  const walk = async (sub: string): Promise<void> => {
    for (const entry of await readdir(path.join(root, sub), {withFileTypes: true})) {
      const rel = path.join(sub, entry.name)
      if (entry.isDirectory()) await walk(rel)
      else out[rel.split(path.sep).join('/')] = await readFile(path.join(root, rel), 'utf8')
    }
  }
  await walk('')
  return out
}

let exports = 0
const exported = new Set<string>()
/**
 * The live artifacts equal, file for file and byte for byte, what pipe export --dir writes now. The
 * command runs once per run of the first test; after that (and in a test that passes `inProcess`) its
 * code runs in this process, as `pipe export` calls it (a process each time was most of this file's minutes).
 */
async function expectLiveIsExport(runId: string, inProcess = false): Promise<Record<string, string>> {
  const out = path.join(dir, `export-${++exports}`)
  if (inProcess || exported.has(runId)) await readIn(path.join(repo, '.pipe'), (store) => exportRun(store, runId, out))
  else {
    const result = await cli(['export', runId, '--dir', out])
    expect(result.code, result.stderr).to.equal(0)
    exported.add(runId)
  }
  const live = await tree(path.join(repo, '.pipe', 'artifacts'))
  expect(live).to.deep.equal(await tree(out))
  return live
}

afterEach(async () => {
  await server?.close()
  await cleanup?.()
})

describe('coding records (seed 004 artifacts, state.json, timeline.md, stats)', function () {
  this.timeout(300000)

  it('keeps artifacts/ equal to pipe export --dir after each command, a child finished through pipe confirm included', async () => {
    await setup({tasks: [task('T1'), {...task('T2'), depends_on: ['T1']}]}, '{levels: [dangerous], kinds: [qa]}')
    server.script(
      'implement',
      {tool_calls: [{id: 'e1', name: 'apply_edit_blocks', arguments: {blocks: block('a - b', 'a + b')}}]},
      {content: JSON.stringify({summary: 'add() adds', plan: ['fix the operator']})},
      {content: JSON.stringify({summary: 'nothing left to do', plan: []})},
    )
    const first = await run()
    const runId = json<{run_id: string}>(first).run_id
    expect(first.stdout + first.stderr).to.contain('awaiting_input')
    await expectLiveIsExport(runId)
    // Each task's QA waits for a person: pipe confirm of the child finishes it, pipe resume of the parent goes on.
    for (let round = 0; round < 3; round++) {
      const state = JSON.parse(await readFile(path.join(repo, '.pipe', 'artifacts', 'runs', runId, 'state.json'), 'utf8')) as {
        phase: string
        child_runs?: string[]
      }
      if (state.phase === 'succeeded') break
      for (const child of state.child_runs ?? []) {
        // The status `pipe runs show CHILD --json` gives, read in this process.
        if ((await runRecordIn(repo, child)).status !== 'awaiting_input') continue
        const confirmed = await cli(['confirm', child, '--yes', '--json'])
        expect(confirmed.code, confirmed.stderr + confirmed.stdout).to.equal(0)
        await expectLiveIsExport(runId)
      }
      const resumed = await cli(['resume', runId, '--json'])
      expect([0, 6], resumed.stderr + resumed.stdout).to.include(resumed.code)
      await expectLiveIsExport(runId)
    }
    const live = await expectLiveIsExport(runId)
    const parent = JSON.parse(live[`runs/${runId}/state.json`]!) as {phase: string; child_runs: string[]}
    expect(parent.phase).to.equal('succeeded')
    for (const child of parent.child_runs) {
      expect(JSON.parse(live[`runs/${child}/state.json`]!)).to.include({phase: 'succeeded'})
    }
    expect(Object.keys(live).some((f) => f.includes('/task_T2/attempt_01/verdict.json'))).to.equal(true)
    // The parent's state.json speaks for its children (seed 004's example fields); a child names the tools as measured.
    const top = JSON.parse(live[`runs/${runId}/state.json`]!) as Record<string, unknown>
    expect(top).to.deep.include({attempts_by_task: {T1: 1, T2: 1}, last_commit_hash: git('rev-parse', 'HEAD'), current_task_id: 'T2'})
    const measured = (top['tool_versions'] as {node?: {actual?: unknown}}).node
    expect(measured?.actual).to.be.a('string')
    for (const child of parent.child_runs) expect(JSON.parse(live[`runs/${child}/state.json`]!).tool_versions).to.deep.equal(top['tool_versions'])
    const childTimeline = live[`runs/${parent.child_runs[0]}/timeline.md`]!
    expect(childTimeline).to.match(/`implement` \(agent\) task T1 attempt 1: /)
    // Each task once, however many child runs it took.
    const stats = await statsIn(repo)
    expect(stats.totals).to.deep.include({tasks: 2, tasks_passed: 2, tasks_fixed_by_person: 0, attempts: 2})
    expect(existsSync(path.join(repo, '.pipe', 'artifacts', 'runs', runId))).to.equal(true)
  })

  it('files a failed edit under its task with a patch_apply_fail verdict, and a QA that errors with an env_fail verdict', async () => {
    // One run holds both: the edit (task T-8) fails and is routed on to the QA (task T-9), which cannot run.
    // The export is compared in this process: the command itself is the first test's.
    await setup({tasks: []})
    const failing = 'calc.js\n<<<<<<< SEARCH\nno such line\n=======\nx\n>>>>>>> REPLACE\n'
    const pipeline = path.join(dir, 'step.yaml')
    await writeFile(
      pipeline,
      `version: 1\nname: t9\nartifacts: true\nsteps:\n  - id: e\n    task: T-8\n    kind: edit\n    blocks: ${JSON.stringify(failing)}\n    on: {error: q}\n` +
        `  - id: q\n    task: T-9\n    kind: qa\n    stages: {tests: [[node, --no-such-flag]]}\n`,
    )
    const result = await cli(['run', pipeline, '--json', '--policy', path.join(dir, 'policy.yaml')])
    expect(result.code, result.stderr + result.stdout).not.to.equal(0)
    const runId = json<{run_id: string}>(result).run_id
    const live = await expectLiveIsExport(runId, true)
    expect(Object.keys(live).filter((f) => f.includes('task_main'))).to.deep.equal([])
    for (const [task, category] of [
      ['T-8', 'patch_apply_fail'],
      ['T-9', 'env_fail'],
    ] as const) {
      const verdict = JSON.parse(live[`runs/${runId}/task_${task}/attempt_01/verdict.json`] ?? 'null') as Record<string, unknown> | null
      expect(verdict, `${task}: ${category}`).to.include({status: 'fail', error_category: category})
    }
    expect((await statsIn(repo)).totals.failure_categories).to.deep.equal({patch_apply_fail: 1, env_fail: 1})
  })
})
