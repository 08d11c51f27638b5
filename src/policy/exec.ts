/**
 * Running a command the way the policy demands: an argv with no shell, only when allowed, inside
 * the repository root and its sandbox (see sandbox.ts), with a filtered environment, output
 * captured and capped (head and tail), and a timeout that kills the whole process tree: the
 * command (bwrap, when contained) runs in its own process group and the group is killed; inside
 * bwrap that ends its PID namespace, so even a grandchild that left the group with setsid dies.
 */
import {lstatSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {acquireLock} from '../util/lock.js'
import {redact, redactBetween} from '../util/redact.js'
import type {LoadedPolicy} from './policy.js'
import {assertCommand, assertEnv, assertPath} from './rules.js'
import {resolveProgram, sandboxed, type SandboxRecord} from './sandbox.js'
import {killGroup} from '../util/process-group.js'
import {makeDirs} from '../util/fs.js'
import {childProcess} from '../util/fs-async.js'

export interface CapturedStream {
  head: string
  tail: string
  /** Bytes dropped between head and tail. */
  omitted_bytes: number
  total_bytes: number
}

export interface CommandResult {
  argv: string[]
  cwd: string
  exit_code: number | null
  signal: string | null
  timed_out: boolean
  duration_ms: number
  stdout: CapturedStream
  stderr: CapturedStream
  /** Set when the program could not be started (not found, not executable). */
  spawn_error?: string
  /** How it was contained; a warning when less than the policy asks. */
  sandbox: SandboxRecord
  /** Set when the output streams stayed open after the command ended (an uncontained process kept them) and were cut. */
  output_cut?: boolean
}

export interface CommandOptions {
  argv: string[]
  /** Working directory relative to the repository root. */
  cwd?: string
  env?: Record<string, string>
  timeoutMs?: number
  signal?: AbortSignal
  /** A directory shared by every pipe process on the store: max_concurrent_commands holds across them. */
  slotsDir?: string
}

const PASSED_ENV = /^(PATH|HOME|USER|LOGNAME|LANG|LANGUAGE|LC_[A-Z]+|TZ|TMPDIR|TMP|TEMP|TERM|CI|NO_COLOR|FORCE_COLOR|SHELL|NODE_ENV)$/

/** The environment a command sees: the basics from ours (never keys or tokens), plus the step's own. */
export function commandEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && PASSED_ENV.test(name)) env[name] = value
  return {...env, ...extra}
}

/**
 * The bytes beyond each cut kept in view (not in the record) so that a secret the cut falls inside is
 * redacted whole: a token, a URL, a key's base64, most of a private key block.
 */
const CUT_MARGIN = 4096

/** Keeps the first and last halves of what a stream writes, never more than `limit` bytes. */
class Capture {
  private readonly headChunks: Buffer[] = []
  private headBytes = 0
  /** The first bytes after the head, and the tail with the bytes before it (CUT_MARGIN each). */
  private afterHead = Buffer.alloc(0)
  private tailBuffer = Buffer.alloc(0)
  total = 0

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.total += chunk.length
    const half = Math.floor(this.limit / 2)
    if (this.headBytes < half) {
      const take = chunk.subarray(0, half - this.headBytes)
      this.headChunks.push(take)
      this.headBytes += take.length
      chunk = chunk.subarray(take.length)
    }
    if (chunk.length > 0) {
      if (this.afterHead.length < CUT_MARGIN) this.afterHead = Buffer.concat([this.afterHead, chunk.subarray(0, CUT_MARGIN - this.afterHead.length)])
      const joined = Buffer.concat([this.tailBuffer, chunk])
      this.tailBuffer = joined.subarray(Math.max(0, joined.length - (this.limit - half) - CUT_MARGIN))
    }
  }

  result(): CapturedStream {
    const head = Buffer.concat(this.headChunks)
    const tail = this.tailBuffer.subarray(Math.max(0, this.tailBuffer.length - (this.limit - Math.floor(this.limit / 2))))
    let before = this.tailBuffer.subarray(0, this.tailBuffer.length - tail.length)
    // Nothing dropped between the head and the tail: the head's end is what comes before the tail.
    if (this.total - head.length === this.tailBuffer.length) before = Buffer.concat([head.subarray(-CUT_MARGIN), before])
    const omitted = this.total - head.length - tail.length
    const text = (bytes: Buffer): string => bytes.toString('utf8')
    return {
      head: redactBetween('', text(head), text(this.afterHead)),
      tail: redactBetween(text(before), text(tail), ''),
      omitted_bytes: omitted,
      total_bytes: this.total,
    }
  }
}

/**
 * One of `limit` command slots: lock files in `dir`, so the limit holds across every process that
 * shares the store (a slot whose process died is taken over). Without a directory, slots are
 * counted in this process only.
 */
async function slot(limit: number, dir: string | undefined, signal: AbortSignal | undefined): Promise<() => Promise<void>> {
  if (!dir) {
    while (running >= limit) await new Promise<void>((resolve) => waiting.push(resolve))
    running++
    return async () => {
      running--
      waiting.shift()?.()
    }
  }
  makeDirs(dir)
  for (;;) {
    for (let i = 0; i < limit; i++) {
      try {
        return await acquireLock(path.join(dir, `command-${i}.lock`), {busy: () => 'busy', hint: ''})
      } catch (error) {
        if (!(error instanceof PipeError) || error.code !== 'E_CONFLICT') throw error
      }
    }
    if (signal?.aborted)
      throw new PipeError('E_TOOL_TIMEOUT', 'stopped while waiting for a free command slot', {
        hint: 'Raise resource_limits.max_concurrent_commands, or run fewer pipelines at once.',
      })
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

/** Whether anything (a folder, a file, a symlink) is at `file`. */
function present(file: string): boolean {
  try {
    lstatSync(file)
    return true
  } catch {
    return false
  }
}

let running = 0
const waiting: Array<() => void> = []

/**
 * The process groups of the commands running now: if pipe exits while one runs (an error, a
 * signal it exits on), the group is killed rather than left running unowned. One listener for all.
 */
const liveGroups = new Set<number>()
let killOnExit = false
function watchExit(): void {
  if (killOnExit) return
  killOnExit = true
  process.on('exit', () => {
    for (const pid of liveGroups) killGroup(pid, 'SIGKILL')
  })
}

/** How long output may keep flowing after the command's process group is gone, before it is cut. */
const DRAIN_MS = 2000

export async function runCommand(policy: LoadedPolicy, root: string, options: CommandOptions): Promise<CommandResult> {
  const cwd = assertPath(policy, root, options.cwd ?? '.').resolved
  assertCommand(policy, options.argv, {root, ...(options.cwd ? {cwd: options.cwd} : {})})
  const limits = policy.policy.resource_limits
  const timeoutMs = options.timeoutMs ?? limits.command_timeout_ms ?? 300000
  const outputLimit = limits.max_output_bytes ?? 65536
  assertEnv(Object.keys(options.env ?? {}), options.argv)
  const env = commandEnv(options.env)
  // The program is found on pipe's own PATH, never one the step sets.
  const program = resolveProgram(options.argv[0]!, cwd, commandEnv())
  const release = await slot(limits.max_concurrent_commands ?? 2, options.slotsDir, options.signal)
  const started = Date.now()
  const stdout = new Capture(outputLimit)
  const stderr = new Capture(outputLimit)
  let timedOut = false
  let cut = false
  let cleanup = async (): Promise<void> => undefined
  // A .git the command creates where none was is not protected by the sandbox (see sandbox.ts):
  // it is found when the command ends, and the command is refused.
  const dotGit = path.join(path.resolve(root), '.git')
  const hadGit = present(dotGit)
  try {
    // Sandboxing (or refusing to run uncontained) is decided before anything starts.
    const wrapped = await sandboxed(policy, root, cwd, [program ?? options.argv[0]!, ...options.argv.slice(1)], env)
    cleanup = wrapped.cleanup
    if (!program) {
      return {
        argv: options.argv,
        cwd,
        exit_code: null,
        signal: null,
        timed_out: false,
        duration_ms: 0,
        stdout: stdout.result(),
        stderr: stderr.result(),
        spawn_error: redact(`${options.argv[0]!}: not found, or not executable (PATH=${env.PATH ?? ''})`),
        sandbox: wrapped.record,
      }
    }
    const child = childProcess().spawn(wrapped.file, wrapped.args, {
      cwd,
      env: wrapped.env,
      shell: false,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      windowsHide: true,
    })
    const pid = child.pid
    if (pid !== undefined) liveGroups.add(pid)
    watchExit()
    child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk))
    const stop = (): void => {
      killGroup(pid, 'SIGTERM')
      setTimeout(() => killGroup(pid, 'SIGKILL'), 2000).unref()
    }
    const timer = setTimeout(() => {
      timedOut = true
      stop()
    }, timeoutMs)
    const onAbort = (): void => stop()
    options.signal?.addEventListener('abort', onAbort, {once: true})
    // A step stopped while its command was being set up gets no 'abort' event: it is stopped now.
    if (options.signal?.aborted) stop()
    // Once the command has exited, whatever its group left running goes too. An uncontained
    // process that left the group (setsid) may still hold the pipes: cut them rather than wait.
    let drain: NodeJS.Timeout | undefined
    child.once('exit', () => {
      killGroup(pid, 'SIGKILL')
      drain = setTimeout(() => {
        cut = true
        child.stdout.destroy()
        child.stderr.destroy()
      }, DRAIN_MS)
    })
    const ended = new Promise<{code: number | null; signal: NodeJS.Signals | null; error?: Error}>((resolve) => {
      // A program that could not start reports 'error' (and perhaps 'close' after it); a started
      // one's later errors (a failed kill) change nothing: its 'close' is the end.
      child.on('error', (error) => {
        if (child.pid === undefined) resolve({code: null, signal: null, error})
      })
      child.once('close', (code, signal) => resolve({code, signal}))
    })
    try {
      const result = await ended
      const spawnError = result.error && !timedOut && !cut ? result.error.message : undefined
      const done: CommandResult = {
        argv: options.argv,
        cwd,
        exit_code: result.code,
        signal: result.signal,
        timed_out: timedOut,
        duration_ms: Date.now() - started,
        stdout: stdout.result(),
        stderr: stderr.result(),
        ...(spawnError ? {spawn_error: redact(spawnError)} : {}),
        sandbox: wrapped.record,
        ...(cut ? {output_cut: true} : {}),
      }
      if (!hadGit && present(dotGit)) {
        throw new PipeError(
          'E_POLICY_DENIED',
          `${JSON.stringify(options.argv)} created ${dotGit}: a repository a command makes in the workspace can hold hooks and config that git would run as you, so the command is refused`,
          {
            hint: `Look at ${dotGit} (hooks/, config) before you run any git command in ${root}, and remove it; pipe's git steps refuse it for the rest of the run. Create the repository before pipe run if the workspace should have one.`,
            details: {rule: 'git', path: dotGit, command: done},
          },
        )
      }
      return done
    } finally {
      clearTimeout(timer)
      clearTimeout(drain)
      if (pid !== undefined) liveGroups.delete(pid)
      options.signal?.removeEventListener('abort', onAbort)
    }
  } catch (error) {
    if (error instanceof PipeError) throw error
    throw new PipeError('E_IO', `could not run ${JSON.stringify(options.argv)}: ${(error as Error).message}`, {
      hint: 'Check that the program is installed and on PATH.',
    })
  } finally {
    await cleanup()
    await release()
  }
}
