/** Runs the built CLI (bin/run.js) as a separate process, as a user would. */
import {spawn} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import {mkdtemp, rm} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {fileURLToPath} from 'node:url'

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
export const bin = path.join(repoRoot, 'bin', 'run.js')
export const defaultPipeline = path.join(repoRoot, 'pipelines', 'default.yaml')
export const examples = path.join(repoRoot, 'examples')

/**
 * `pipe run` of pipelines/coding.yaml on examples/coding-agent, answered from its cassette (no model,
 * no network), as the example's README runs it; `installed` is where the pipeline is read from (an
 * installation elsewhere), the example's files are this checkout's.
 */
export function codingExampleRun(installed: string = repoRoot): string[] {
  const example = path.join(repoRoot, 'examples', 'coding-agent')
  return [
    'run',
    path.join(installed, 'pipelines', 'coding.yaml'),
    '--input',
    path.join(example, 'requirement.md'),
    '--decision',
    'go',
    '--policy',
    path.join(example, 'policy.yaml'),
    '--replay',
    path.join(example, 'cassettes', 'coding-agent.jsonl'),
  ]
}

/**
 * PIPE_HOME (the daily error log's folder) for the CLI runs of this test process, unless a test
 * sets its own: one per process, so that test files running in parallel workers share no folder.
 * PIPE_TEST_HOME overrides it.
 */
export const testHome = process.env.PIPE_TEST_HOME ?? mkdtempSync(path.join(os.tmpdir(), 'pipe-test-home-'))
if (!process.env.PIPE_TEST_HOME) process.on('exit', () => rmSync(testHome, {recursive: true, force: true}))
// A developer's own keys (~/.config/pipe/keys) would sign every decision a test makes, in its
// processes and in this one: tests see a config folder of their own (a test that wants a key sets one).
process.env.XDG_CONFIG_HOME = path.join(testHome, 'config')
delete process.env.PIPE_SIGNING_KEY
// After Ctrl-C or SIGTERM a run has 5 s to record itself interrupted before pipe quits regardless; on
// a loaded machine recording took longer, and a test expecting exit 130 saw the signal's death. Every
// process a test starts, through these helpers or its own spawn of process.env, is given far longer
// (test/unit/signals.test.ts sets its own to test the grace itself).
process.env.PIPE_SIGNAL_GRACE_MS ??= '600000'

export interface CliResult {
  code: number | null
  stdout: string
  stderr: string
  signal: NodeJS.Signals | null
}

export interface CliOptions {
  cwd?: string
  env?: Record<string, string | undefined>
  input?: string | Buffer
  timeoutMs?: number
}

export function pipe(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return node([bin, ...args], options)
}

/**
 * The test process's own environment while a command runs in it (test/helpers/pipe-here.ts owns
 * process.env then): a process started meanwhile must not inherit that command's variables.
 */
export const ownEnv: {held?: NodeJS.ProcessEnv} = {}

/** The environment of a CLI run: the test's own without what a developer's would bring in, `env` over it. */
export function commandEnv(options: CliOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {...(ownEnv.held ?? process.env), NO_COLOR: '1', PIPE_HOME: options.env?.PIPE_HOME ?? testHome}
  delete env.PIPE_STORE
  delete env.OPENAI_API_KEY
  delete env.OPENAI_BASE_URL
  delete env.PIPE_AUDIT_KEY
  delete env.PIPE_CEILING_DIRECTORIES
  // A developer's signing key would sign every decision a test makes (a test that wants one sets it).
  delete env.PIPE_SIGNING_KEY
  // Node reads and parses every certificate of this file as it starts, whether the process ever
  // speaks TLS or not: ~100 ms of CPU a spawn with a system bundle (220 KB), a third of a short
  // command's. The tests' servers are plain HTTP on 127.0.0.1; a test that needs it sets it.
  delete env.NODE_EXTRA_CA_CERTS
  // A developer's collector must not receive every test's spans (the telemetry tests set their own).
  for (const key of Object.keys(env)) if (key.startsWith('OTEL_')) delete env[key]
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }
  return env
}

/** Runs node with `args` as pipe() runs the CLI: the same test environment, output collected. */
export function node(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = commandEnv(options)
    const child = spawn(process.execPath, args, {cwd: options.cwd ?? repoRoot, env, stdio: ['pipe', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d))
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d))
    // Only a backstop for a process that never ends: the test's own timeout says when it failed. A
    // short default decided tests on a loaded machine (a run held open while the test drove a browser).
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 300000)
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(timer)
      resolve({code, stdout, stderr, signal})
    })
    if (options.input !== undefined) child.stdin.end(options.input)
    else child.stdin.end()
  })
}

export async function tempDir(prefix = 'pipe-test-'): Promise<{dir: string; cleanup: () => Promise<void>}> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix))
  return {dir, cleanup: () => rm(dir, {recursive: true, force: true})}
}

/** `text` with what differs between two runs of the same thing put aside: their folder `dir`, times, durations and trace ids. */
export function withoutRunVariance(text: string, dir: string): string {
  return text
    .replaceAll(dir, '<dir>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
    .replace(/\b\d+ ms\b/g, '<n> ms')
    .replace(/"(\w*_ms|duration)": \d+/g, '"$1": <n>')
    .replace(/\btr-[0-9a-f]{16}\b/g, '<trace>')
}

export function json<T = unknown>(result: CliResult): T {
  try {
    return JSON.parse(result.stdout) as T
  } catch {
    throw new Error(`stdout is not one JSON document:\n${result.stdout}\n--- stderr ---\n${result.stderr}`)
  }
}
