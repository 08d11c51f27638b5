/**
 * What the pipelines/coding.yaml test files (test/e2e/coding.test.ts and coding-blocked) share: a
 * real git repository holding a bug, the policy the runs work under, a scripted chat-completions
 * server on 127.0.0.1 that plays the spec steps, the architect, the task planner and the summary
 * (each test scripts the agent's turns), and the commands over them.
 */
import {execFileSync} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {pipe, repoRoot, tempDir, type CliResult} from './cli.js'
import {cannedReply, ModelServer, type ModelRequest, type Scripted} from './model-server.js'

// The task's tests run as `node calc.test.js`: node:test in one process, where `node --test` starts a
// runner and then a child per file, each QA of each attempt (CI's slowest file).
export const BUGGY = 'export function add(a, b) {\n  return a - b\n}\n'
export const TEST =
  "import {test} from 'node:test'\nimport assert from 'node:assert/strict'\nimport {add} from './calc.js'\n\ntest('add adds', () => {\n  assert.equal(add(2, 3), 5)\n})\n"
export const block = (from: string, to: string): string => `calc.js\n<<<<<<< SEARCH\n  return ${from}\n=======\n  return ${to}\n>>>>>>> REPLACE\n`

export const ARCH = {
  tech_stack: {language: 'JavaScript (Node.js 20, ES modules)', test_framework: 'node:test'},
  directory_tree: ['calc.js', 'calc.test.js', 'package.json'],
  api_specs: [{name: 'add', signature: 'add(a: number, b: number): number'}],
  data_models: [],
  build_run_commands: {test: [['node', 'calc.test.js']]},
}
/** A task of the plan that makes add() add, under `id`. */
export const task = (id: string): Record<string, unknown> => ({
  id,
  title: 'add() adds',
  goal: 'add(a, b) returns the sum of a and b',
  type: 'modify_file',
  files_required: ['calc.js', 'calc.test.js'],
  files_touched: ['calc.js'],
  acceptance_tests: {
    static_checks: [['node', '--check', 'calc.js']],
    unit_tests: [['node', 'calc.test.js']],
    smoke_tests: [],
    expected_signals: ['add(2, 3) is 5'],
  },
})
export const TASKS = {tasks: [task('T1')]}
const SUMMARY = {
  what_changed: ['calc.js: add() adds'],
  why: 'add() subtracted',
  how_verified: ['node --test'],
  risks: [],
  rollback: 'git revert the coding_agent commit',
  blockers: [],
  manual_steps: [],
}

/** The scripted summary of a run whose task blocked (seed 000: the blockers and the manual steps). */
export const BLOCKED_SUMMARY = {
  what_changed: [],
  why: 'add() subtracts',
  how_verified: ['node --test still fails'],
  risks: ['add() is still wrong'],
  rollback: 'nothing to roll back: the task was rolled back to its checkpoint',
  blockers: [{task: 'T1', tried: 'three edits of calc.js', failed: 'node --test: add(2, 3) is not 5'}],
  manual_steps: ['fix add() in calc.js so that node --test passes, then pipe resume the run'],
}

export interface RunJson {
  run_id: string
  status: string
  reason?: string
  error?: {code: string; message: string}
}

/** A test's folder, the git repository in it, the scripted model server, and how to remove the folder. */
export interface CodingRepo {
  dir: string
  repo: string
  cleanup: () => Promise<void>
  server: ModelServer
}

/**
 * The helpers of a test file over its own state (its `dir`, `repo`, `cleanup` and `server`):
 * `state.get()` reads them as they are now; `state.set()` keeps what setup() makes, the folder and
 * its cleanup first (the file's afterEach removes the folder even when the rest of setup fails).
 */
export function codingRepo(state: {get(): CodingRepo; set(made: Partial<CodingRepo>): void}) {
  /** What the planner answers in the current test (TASKS unless a test gives other tasks). */
  let tasks: unknown = TASKS

  function codingReply(request: ModelRequest): Scripted {
    const usage = {prompt_tokens: 200, completion_tokens: 60}
    if (request.kind === 'arch') return {content: JSON.stringify(ARCH), usage}
    if (request.kind === 'tasks') return {content: JSON.stringify(tasks), usage}
    if (request.kind === 'summary') {
      const prompt = request.body.messages.find((m) => m.role === 'user')?.content ?? ''
      return {content: JSON.stringify(prompt.includes('"status": "blocked"') ? BLOCKED_SUMMARY : SUMMARY), usage}
    }
    if (request.kind === 'implement') return {status: 500, body: {error: {message: 'no scripted agent turn left'}}}
    return cannedReply(request)
  }

  async function setup(planned: unknown = TASKS, files: Record<string, string> = {}): Promise<void> {
    tasks = planned
    const made = await tempDir('pipe-coding-')
    const {dir} = made
    const repo = path.join(dir, 'repo')
    state.set({...made, repo})
    await mkdir(repo)
    await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
    await writeFile(path.join(repo, 'calc.js'), BUGGY)
    await writeFile(path.join(repo, 'calc.test.js'), TEST)
    for (const [name, text] of Object.entries(files)) await writeFile(path.join(repo, name), text)
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
confirm: []
`,
    )
    state.set({server: await ModelServer.start(codingReply)})
  }

  function git(...args: string[]): string {
    return execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', ...args], {cwd: state.get().repo, encoding: 'utf8'}).trim()
  }

  const env = (): Record<string, string> => ({OPENAI_BASE_URL: state.get().server.url, PIPE_HOME: path.join(state.get().dir, 'home')})

  function run(pipeline = path.join(repoRoot, 'pipelines', 'coding.yaml')): Promise<CliResult> {
    return pipe(
      [
        'run',
        pipeline,
        '--text',
        'add(a, b) in calc.js must return the sum of a and b; today it subtracts.',
        '--decision',
        'go',
        '--json',
        '--policy',
        path.join(state.get().dir, 'policy.yaml'),
      ],
      {
        cwd: state.get().repo,
        env: env(),
        timeoutMs: 240000,
      },
    )
  }

  /** The agent requests that start an attempt (a user message only, no tool results yet). */
  function attemptStarts(): ModelRequest[] {
    return state.get().server.requests.filter((r) => r.kind === 'implement' && !r.body.messages.some((m) => m.role === 'tool' || m.role === 'assistant'))
  }

  return {setup, git, env, run, attemptStarts}
}
