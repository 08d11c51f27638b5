/**
 * What the kind: agent test files (test/e2e/agent.test.ts and agent-confirm) share: a real git
 * repository holding a bug, the policy and pipeline of an agent step to fix it, a scripted
 * chat-completions server on 127.0.0.1 that plays the tool-call conversations, and the commands
 * over them.
 */
import {execFileSync} from 'node:child_process'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import type {Snapshot} from '../../src/types/snapshot.js'
import {pipe, tempDir, type CliResult} from './cli.js'
import {ModelServer, type ModelRequest} from './model-server.js'
import {snapshotsIn} from './stores.js'

export interface RunJson {
  run_id: string
  status: string
  reason?: string
  pending?: {kind: string; action?: {tool: string; argv?: string[][]; call_id: string}}
  error?: {code: string; message: string; hint?: string}
  next_command?: string
}

export const BUGGY = 'export function add(a, b) {\n  return a - b\n}\n'
const TEST = "import {add} from './calc.js'\nif (add(2, 3) !== 5) {\n  console.error('add(2, 3) is', add(2, 3))\n  process.exit(1)\n}\nconsole.log('ok')\n"
export const FIX = 'calc.js\n<<<<<<< SEARCH\n  return a - b\n=======\n  return a + b\n>>>>>>> REPLACE\n'

function policy(extra = ''): string {
  return `version: 1
allowed_commands:
  - [node, test.js]
  - [node, mark.js]
  - [node, count.js]
  - [node, --check, "{path}"]
forbidden_paths: [".git/**", ".env"]
max_patch_lines: 200
max_retries_default: 0
resource_limits: {command_timeout_ms: 60000, step_timeout_ms: 120000, max_output_bytes: 65536, max_concurrent_commands: 2, max_input_bytes: 1048576}
sandbox: auto
${extra}`
}

/** A test's folder, the git repository in it, the scripted model server, and how to remove the folder. */
export interface AgentRepo {
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
export function agentRepo(state: {get(): AgentRepo; set(made: Partial<AgentRepo>): void}) {
  async function setup(policyExtra = '', step = ''): Promise<string> {
    const made = await tempDir('pipe-agent-')
    const {dir} = made
    const repo = path.join(dir, 'repo')
    state.set({...made, repo})
    await mkdir(repo)
    await writeFile(path.join(repo, 'package.json'), '{"type": "module"}\n')
    await writeFile(path.join(repo, 'calc.js'), BUGGY)
    await writeFile(path.join(repo, 'test.js'), TEST)
    await writeFile(path.join(repo, 'mark.js'), "import {writeFileSync} from 'node:fs'\nwriteFileSync('marked.txt', 'ran')\n")
    await writeFile(path.join(repo, 'count.js'), "import {appendFileSync} from 'node:fs'\nappendFileSync('count.txt', 'ran\\n')\n")
    await writeFile(path.join(repo, '.env'), 'TOKEN=sk-secret\n')
    execFileSync('git', ['init', '-q'], {cwd: repo})
    execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'add', '-A'], {cwd: repo})
    execFileSync('git', ['-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'start'], {cwd: repo})
    const p = path.join(dir, 'p')
    await mkdir(p)
    await writeFile(path.join(p, 'task.md'), 'Fix the bug: {{task}}\n')
    await writeFile(path.join(p, 'policy.yaml'), policy(policyExtra))
    await writeFile(
      path.join(p, 'agent.yaml'),
      `version: 1
name: agent
steps:
  - id: fix
    kind: agent
    prompt: task.md
    vars:
      task: add() subtracts
    tools: [list_directory, find_files, search_text, read_file, apply_edit_blocks, run_command]
${step}`,
    )
    state.set({server: await ModelServer.start()})
    return path.join(p, 'agent.yaml')
  }

  const env = (): Record<string, string> => ({OPENAI_BASE_URL: state.get().server.url, PIPE_HOME: path.join(state.get().dir, 'home')})

  function run(file: string): Promise<CliResult> {
    const {dir, repo} = state.get()
    return pipe(['run', file, '--json', '--policy', path.join(dir, 'p', 'policy.yaml')], {cwd: repo, env: env(), timeoutMs: 120000})
  }

  /** What `pipe snapshot show RUN --json` prints, read in-process. */
  function snapshots(runId: string): Promise<Snapshot[]> {
    return snapshotsIn(state.get().repo, runId)
  }

  return {setup, env, run, snapshots}
}

/** The tool-result messages a request carried, by call id. */
export function toolResults(request: ModelRequest): Record<string, string> {
  return Object.fromEntries(request.body.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id!, m.content]))
}
