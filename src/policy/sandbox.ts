/**
 * The sandbox a command runs in: bubblewrap with a read-only view of the whole file system, only
 * the repository writable (pipe's store inside it stays read-only), an empty private /tmp, no
 * network unless the policy allows it, no capabilities, and its own user, PID, IPC and UTS
 * namespaces, so killing bwrap kills every process the command started, however it detached.
 * prlimit sets the policy's resource limits. The kernel never applies RLIMIT_NPROC to uid 0, so
 * when pipe runs as root the process limit is a pids cgroup instead, where one can be created.
 */
import type {SpawnSyncReturns} from 'node:child_process'
import {accessSync, constants, existsSync, readFileSync, realpathSync} from 'node:fs'
import {childProcess, mkdir, rmdir, writeFile} from '../util/fs-async.js'
import path from 'node:path'
import {PipeError} from '../errors.js'
import type {LoadedPolicy} from './policy.js'
import {visible} from '../util/terminal-text.js'
import {gitDirOf} from '../util/git-dir.js'

/** What a snapshot records about how a command was contained. */
export interface SandboxRecord {
  mode: 'required' | 'auto' | 'off'
  /** Whether it ran inside bubblewrap. */
  contained: boolean
  network: boolean
  limits: {memory_mb?: number; cpu_seconds?: number; max_processes?: number; max_file_bytes?: number}
  /** How max_processes was enforced: RLIMIT_NPROC in the sandbox's user namespace, a pids cgroup, or not at all. */
  processes_by?: 'rlimit' | 'cgroup' | 'none'
  /** Why the command ran less contained than the policy asks. */
  warning?: string
}

export interface Wrapped {
  file: string
  args: string[]
  env: Record<string, string>
  record: SandboxRecord
  /** Removes what was set up for this command (a cgroup); never throws. */
  cleanup: () => Promise<void>
}

function onPath(name: string, env: Record<string, string | undefined>): string | null {
  if (name.includes('/')) return null
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue
    const candidate = path.join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not here.
    }
  }
  return null
}

/** The bubblewrap binary: PIPE_BWRAP if set (a path, or empty for none), else bwrap on PATH. */
export function findBwrap(): string | null {
  const given = process.env.PIPE_BWRAP
  if (given !== undefined) {
    if (given === '') return null
    try {
      accessSync(given, constants.X_OK)
      return given
    } catch {
      return null
    }
  }
  return onPath('bwrap', process.env)
}

/** Where the program of an argv lives, looked up as execvp would; null when it cannot be run. */
export function resolveProgram(program: string, cwd: string, env: Record<string, string>): string | null {
  if (program.includes('/')) {
    const full = path.resolve(cwd, program)
    try {
      accessSync(full, constants.X_OK)
      return full
    } catch {
      return null
    }
  }
  return onPath(program, env)
}

const NAMESPACES = ['--die-with-parent', '--new-session', '--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try']

const probes = new Map<string, string | null>()

/** Runs a probe of bwrap to its end (its text output), ten seconds at most. */
function probeBwrap(file: string, args: string[]): SpawnSyncReturns<string> {
  const {spawnSync} = childProcess()
  // In the environment commands get (no LD_PRELOAD and the like from ours): the probe asks whether their sandbox can start.
  return spawnSync(file, args, {encoding: 'utf8', timeout: 10000, env: process.env.PATH === undefined ? {} : {PATH: process.env.PATH}})
}

/**
 * Why bwrap cannot make its namespaces here (a container that forbids user namespaces), or null
 * when it can; tried once per binary and process.
 */
function bwrapBroken(bwrap: string): string | null {
  let answer = probes.get(bwrap)
  if (answer === undefined) {
    const probe = probeBwrap(bwrap, [...NAMESPACES, '--unshare-net', '--cap-drop', 'ALL', '--ro-bind', '/', '/', '--', 'true'])
    answer = probe.status === 0 ? null : (probe.stderr.trim() || probe.error?.message || `exit ${probe.status ?? probe.signal}`).split('\n')[0]!
    probes.set(bwrap, answer)
  }
  return answer
}

const sizes = new Map<string, boolean>()

/** Whether this bwrap can bound a tmpfs (`--size`, bubblewrap 0.8 and later). */
function bwrapSizes(bwrap: string): boolean {
  let answer = sizes.get(bwrap)
  if (answer === undefined) {
    answer = probeBwrap(bwrap, ['--help']).stdout?.includes('--size') ?? false
    sizes.set(bwrap, answer)
  }
  return answer
}

const warned = new Set<string>()

/** Says a warning once per process on stderr; the snapshot records it every time. */
export function warnOnce(text: string): void {
  if (warned.has(text)) return
  warned.add(text)
  process.stderr.write(`Warning: ${visible(text)}\n`)
}

let cgroupCounter = 0

/** A pids cgroup limiting its members to `max` processes, or null where none can be made. */
async function pidsCgroup(max: number): Promise<string | null> {
  const v2 = '/sys/fs/cgroup'
  const roots = ['/sys/fs/cgroup/pids']
  try {
    if (readFileSync(path.join(v2, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('pids')) roots.push(v2)
  } catch {
    // No cgroup v2 root with the pids controller.
  }
  for (const root of roots) {
    if (!existsSync(path.join(root, 'cgroup.procs'))) continue
    const dir = path.join(root, `pipe-${process.pid}-${++cgroupCounter}`)
    try {
      await mkdir(dir)
      // bwrap's own two processes are members too.
      await writeFile(path.join(dir, 'pids.max'), String(max + 2))
      return dir
    } catch {
      await rmdir(dir).catch(() => undefined)
    }
  }
  return null
}

async function removeCgroup(dir: string): Promise<void> {
  // The namespace's processes are being killed; the cgroup empties a moment later.
  for (let i = 0; i < 50; i++) {
    try {
      await rmdir(dir)
      return
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return
      await new Promise((r) => setTimeout(r, 20))
    }
  }
}

/**
 * What inside the repository a command may read but never change: `.git`, and each forbidden_paths
 * entry that names a path literally (`.env`, `secrets/**` for the folder `secrets`). A glob such as
 * `**\/*.pem` cannot be bound ahead of time; the policy's path checks hold it for pipe's own steps.
 */
export function readOnlyInRepo(realRoot: string, forbidden: readonly string[]): string[] {
  const dotGit = path.join(realRoot, '.git')
  // A gitfile (`gitdir: .bare`, a worktree's) only points: the repository it names, when that lies
  // in the workspace, holds the hooks and config, and its commondir the shared ones.
  const gitDir = gitDirOf(dotGit)
  const out = [dotGit, gitDir]
  try {
    out.push(path.resolve(gitDir, readFileSync(path.join(gitDir, 'commondir'), 'utf8').trim()))
  } catch {
    // Not a linked worktree.
  }
  for (const glob of forbidden) {
    const literal = glob.replace(/\/\*\*$/, '').replace(/\/+$/, '')
    if (!literal || /[*?[\]{}()!+@\\]/.test(literal) || path.isAbsolute(literal)) continue
    const full = path.resolve(realRoot, literal)
    if (full.startsWith(`${realRoot}${path.sep}`)) out.push(full)
  }
  return [...new Set(out)]
}

/**
 * How to start `argv` (its program already resolved) under the policy's sandbox setting. Throws
 * E_POLICY_DENIED when the policy requires a sandbox that cannot be had.
 */
export async function sandboxed(policy: LoadedPolicy, root: string, cwd: string, argv: string[], env: Record<string, string>): Promise<Wrapped> {
  const p = policy.policy
  const mode = p.sandbox ?? 'auto'
  const network = p.network ?? false
  const rl = p.resource_limits
  const limits = {
    ...(rl.memory_mb !== undefined ? {memory_mb: rl.memory_mb} : {}),
    ...(rl.cpu_seconds !== undefined ? {cpu_seconds: rl.cpu_seconds} : {}),
    ...(rl.max_processes !== undefined ? {max_processes: rl.max_processes} : {}),
    ...(rl.max_file_bytes !== undefined ? {max_file_bytes: rl.max_file_bytes} : {}),
  }
  const plain = (warning?: string): Wrapped => ({
    file: argv[0]!,
    args: argv.slice(1),
    env,
    record: {mode, contained: false, network: true, limits: {}, ...(warning ? {warning} : {})},
    cleanup: async () => undefined,
  })
  if (mode === 'off') return plain()
  const bwrap = findBwrap()
  const prlimit = bwrap ? onPath('prlimit', process.env) : null
  const broken = bwrap && prlimit ? bwrapBroken(bwrap) : null
  if (!bwrap || !prlimit || broken) {
    const why = !bwrap
      ? 'bubblewrap (bwrap) is not installed'
      : !prlimit
        ? 'prlimit (util-linux) is not installed'
        : `bubblewrap cannot create its namespaces here (${broken})`
    if (mode === 'required') {
      throw new PipeError('E_POLICY_DENIED', `the policy requires a sandbox, and ${why}: ${JSON.stringify(argv)} was not started`, {
        hint: broken
          ? 'Allow user namespaces (in a container: run it with a seccomp profile that permits them), or set sandbox: auto in the policy to run commands uncontained.'
          : 'Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or set sandbox: auto in the policy to run commands uncontained.',
        details: {rule: 'sandbox', argv},
      })
    }
    const warning = `${why}, so commands run uncontained: no read-only root, no private /tmp, network on, no resource limits (policy sandbox: auto). Install bubblewrap to contain them.`
    warnOnce(warning)
    return plain(warning)
  }

  const realRoot = realpathSync(root)
  const args = [...NAMESPACES]
  if (!network) args.push('--unshare-net')
  args.push('--cap-drop', 'ALL', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc')
  // /tmp lives in memory, outside RLIMIT_AS: without a size a command could fill the machine's RAM there.
  if (limits.memory_mb !== undefined && bwrapSizes(bwrap)) args.push('--size', String(limits.memory_mb * 1024 * 1024))
  args.push('--tmpfs', '/tmp')
  // A network namespace does not cover Unix sockets in the file system: without this, Docker's or
  // D-Bus's socket under /run (also /var/run) would still answer a command with no network.
  if (!network) args.push('--tmpfs', '/run')
  args.push('--bind', realRoot, realRoot)
  // pipe's store may live inside the repository: commands may read it, never change it. Nor may
  // they change .git: a hook or a config entry (core.fsmonitor, core.hooksPath) written there runs
  // later outside the sandbox, in pipe's own git steps or the user's next commit. Forbidden paths
  // that name a file or folder literally are read-only too. A .git that does not exist yet is not
  // bound: bwrap would have to create the mount point, leaving an empty .git in the user's
  // workspace, and a later rmdir would unmount it under a command still running. Instead
  // runCommand refuses a command that created one, and pipe's git steps use only the repository
  // recorded when the run started (vcs/git.ts), so a planted one is never run.
  for (const dir of [...(policy.protected ?? []), ...readOnlyInRepo(realRoot, p.forbidden_paths)]) {
    const real = existsSync(dir) ? realpathSync(dir) : null
    if (real && (real === realRoot || real.startsWith(`${realRoot}${path.sep}`))) args.push('--ro-bind', real, real)
  }
  args.push('--chdir', cwd, '--', prlimit)
  if (limits.memory_mb !== undefined) args.push(`--as=${limits.memory_mb * 1024 * 1024}`)
  if (limits.cpu_seconds !== undefined) args.push(`--cpu=${limits.cpu_seconds}`)
  if (limits.max_file_bytes !== undefined) args.push(`--fsize=${limits.max_file_bytes}`)
  let processesBy: SandboxRecord['processes_by']
  let cgroup: string | null = null
  let warning: string | undefined
  if (limits.max_processes !== undefined) {
    // bwrap's init process in the namespace counts as one.
    args.push(`--nproc=${limits.max_processes + 1}`)
    processesBy = 'rlimit'
    if (process.getuid?.() === 0) {
      cgroup = await pidsCgroup(limits.max_processes)
      processesBy = cgroup ? 'cgroup' : 'none'
      if (!cgroup) {
        warning = 'max_processes is not enforced: pipe runs as root, whom the kernel exempts from RLIMIT_NPROC, and no pids cgroup could be created'
        warnOnce(warning)
      }
    }
  }
  args.push('--', ...argv)
  const record: SandboxRecord = {mode, contained: true, network, limits, ...(processesBy ? {processes_by: processesBy} : {}), ...(warning ? {warning} : {})}
  const inner = {...env, TMPDIR: '/tmp', TMP: '/tmp', TEMP: '/tmp'}
  if (cgroup) {
    // Join the cgroup before bwrap starts, so every process of the command is born inside it.
    return {
      file: '/bin/sh',
      args: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup, bwrap, ...args],
      env: inner,
      record,
      cleanup: () => removeCgroup(cgroup),
    }
  }
  return {file: bwrap, args, env: inner, record, cleanup: async () => undefined}
}
