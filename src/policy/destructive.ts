/**
 * The built-in list of destructive commands (seed 000: deleting, executing elsewhere and pushing
 * wait for confirmation). Being allowed by allowed_commands is not being pre-approved: a step that
 * would run one of these waits for a person unless tools_preapproved names the command or the
 * policy says confirm.destructive: allow. This is the one place the list lives; docs/policy.md
 * shows it.
 *
 * A match is judged on the parsed argument vector, never on a substring of the line: `echo rm` is
 * not `rm`, while the ways to reach the same program are followed: a path (`/bin/rm`), the wrappers
 * that run their arguments as a command (`command`, `env`, `sudo`, `nice`, `timeout`, `xargs`, ...),
 * a shell's `-c` line (parsed as pipe parses a command line) and `find -exec`/`-delete`.
 */
import path from 'node:path'
import {splitCommandLine} from './shell-line.js'

interface Entry {
  /** How docs and messages name it. */
  pattern: string
  program: readonly string[]
  /** The arguments after the program (after git's own options, for git); absent: any. */
  args?: (args: readonly string[]) => boolean
}

const flag =
  (short: string, long?: string) =>
  (args: readonly string[]): boolean =>
    args.some((a) => a === long || (/^-[a-zA-Z]+$/.test(a) && a.includes(short)))
const sub =
  (...names: string[]) =>
  (args: readonly string[]): boolean =>
    names.includes(args[0] ?? '')

export const DESTRUCTIVE: readonly Entry[] = [
  {pattern: 'rm', program: ['rm']},
  {pattern: 'rmdir', program: ['rmdir']},
  {pattern: 'unlink', program: ['unlink']},
  {pattern: 'shred', program: ['shred']},
  {pattern: 'truncate', program: ['truncate']},
  {pattern: 'dd', program: ['dd']},
  {pattern: 'mkfs', program: ['mkfs', 'mke2fs', 'mkswap', 'wipefs']},
  {pattern: 'chmod -R', program: ['chmod'], args: flag('R', '--recursive')},
  {pattern: 'chown -R', program: ['chown', 'chgrp'], args: flag('R', '--recursive')},
  {pattern: 'find -delete', program: ['find'], args: (a) => a.includes('-delete')},
  {pattern: 'git push', program: ['git'], args: sub('push')},
  {pattern: 'git reset --hard', program: ['git'], args: (a) => a[0] === 'reset' && a.includes('--hard')},
  {pattern: 'git clean', program: ['git'], args: sub('clean')},
  {pattern: 'git checkout --', program: ['git'], args: (a) => a[0] === 'checkout' && a.some((x) => x === '--' || x === '.' || x === '-f' || x === '--force')},
  {pattern: 'git restore', program: ['git'], args: sub('restore')},
  {pattern: 'git rm', program: ['git'], args: sub('rm')},
  {pattern: 'git branch -D', program: ['git'], args: (a) => a[0] === 'branch' && a.some((x) => x === '-D' || x === '--delete' || x === '-d')},
  {pattern: 'curl', program: ['curl']},
  {pattern: 'wget', program: ['wget']},
  {pattern: 'ssh', program: ['ssh']},
  {pattern: 'scp', program: ['scp', 'sftp', 'ftp']},
  {pattern: 'rsync', program: ['rsync']},
  {pattern: 'nc', program: ['nc', 'ncat', 'netcat', 'telnet', 'socat']},
  {pattern: 'npm publish', program: ['npm', 'pnpm', 'yarn'], args: sub('publish', 'unpublish')},
  {pattern: 'cargo publish', program: ['cargo'], args: sub('publish')},
  {pattern: 'twine upload', program: ['twine'], args: sub('upload')},
  {pattern: 'gem push', program: ['gem'], args: sub('push')},
  {pattern: 'docker push', program: ['docker', 'podman'], args: sub('push')},
]

/** Programs that run their arguments as a command: the options each takes before that command (those with a value). */
const WRAPPERS: Readonly<Record<string, {valued: readonly string[]; first?: 'duration'}>> = {
  command: {valued: []},
  exec: {valued: ['-a']},
  env: {valued: ['-u', '--unset', '-C', '--chdir', '-S', '--split-string']},
  sudo: {valued: ['-u', '-g', '-C', '-D', '-h', '-p', '-r', '-t', '-U', '--user', '--group', '--chdir']},
  doas: {valued: ['-u', '-C']},
  nice: {valued: ['-n', '--adjustment']},
  ionice: {valued: ['-c', '-n', '-p', '--class', '--classdata']},
  nohup: {valued: []},
  setsid: {valued: []},
  time: {valued: ['-f', '-o', '--format', '--output']},
  stdbuf: {valued: ['-i', '-o', '-e']},
  timeout: {valued: ['-s', '-k', '--signal', '--kill-after'], first: 'duration'},
  xargs: {valued: ['-a', '-d', '-E', '-I', '-L', '-n', '-P', '-s', '--arg-file', '--delimiter', '--max-args', '--max-procs', '--max-lines']},
  busybox: {valued: []},
}
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'ash', 'mksh', 'fish'])
/** git's own options that take a value as the next argument (git -C DIR push). */
const GIT_VALUED = new Set(['-C', '-c', '--git-dir', '--work-tree', '--namespace', '--exec-path', '--config-env'])

export interface DestructiveMatch {
  /** The list's name for it ("git push"). */
  pattern: string
  /** The argument vector that matched, as the program would get it (after a wrapper or a shell line). */
  argv: string[]
}

/** The destructive command `argv` would run, or null. */
export function destructiveMatch(argv: readonly string[], depth = 0): DestructiveMatch | null {
  // A wrapper of a wrapper of ...: past a few levels nobody writes that honestly; judge it destructive.
  if (depth > 8) return {pattern: 'nested wrappers', argv: [...argv]}
  if (argv.length === 0) return null
  // mkfs.ext4, mkfs.vfat, ...: one program family.
  const program = path.posix.basename(argv[0]!).replace(/^mkfs\..*/, 'mkfs')
  const rest = argv.slice(1)
  const wrapper = WRAPPERS[program]
  if (wrapper) {
    const inner = unwrap(program, rest, wrapper)
    return inner.length > 0 ? destructiveMatch(inner, depth + 1) : null
  }
  if (SHELLS.has(program)) return shellLine(rest, depth)
  if (program === 'find') {
    const exec = rest.findIndex((a) => a === '-exec' || a === '-execdir' || a === '-ok' || a === '-okdir')
    if (exec >= 0) {
      const end = rest.findIndex((a, i) => i > exec && (a === ';' || a === '+'))
      const inner = destructiveMatch(rest.slice(exec + 1, end < 0 ? undefined : end), depth + 1)
      if (inner) return inner
    }
  }
  const args = program === 'git' ? gitCommand(rest) : rest
  const entry = DESTRUCTIVE.find((e) => e.program.includes(program) && (e.args === undefined || e.args(args)))
  return entry ? {pattern: entry.pattern, argv: [program, ...rest]} : null
}

function unwrap(program: string, args: readonly string[], wrapper: {valued: readonly string[]; first?: 'duration'}): string[] {
  let i = 0
  for (; i < args.length; i++) {
    const a = args[i]!
    if (a === '--') {
      i++
      break
    }
    if (program === 'env' && /^[A-Za-z_][A-Za-z0-9_]*=/.test(a)) continue
    if (!a.startsWith('-') || a === '-') break
    if (wrapper.valued.includes(a)) i++
  }
  if (wrapper.first === 'duration' && i < args.length) i++
  return args.slice(i)
}

/** `sh -c LINE`: each command of the line, as pipe parses one, or roughly (looseCommands) where pipe's parser refuses the line. */
function shellLine(args: readonly string[], depth: number): DestructiveMatch | null {
  const c = args.findIndex((a) => /^-[a-zA-Z]*c[a-zA-Z]*$/.test(a))
  // A script file or stdin: what it runs is not on the command line, as with node -e or python -c (docs/policy.md says so).
  if (c < 0 || c + 1 >= args.length) return null
  const parsed = splitCommandLine(args[c + 1]!)
  const segments = parsed.ok ? parsed.segments.map((s) => s.argv) : looseCommands(args[c + 1]!)
  for (const argv of segments) {
    const inner = destructiveMatch(argv, depth + 1)
    if (inner) return inner
  }
  return null
}

/** git's subcommand and its arguments, past git's own options. */
function gitCommand(args: readonly string[]): readonly string[] {
  let i = 0
  while (i < args.length && args[i]!.startsWith('-')) i += GIT_VALUED.has(args[i]!) ? 2 : 1
  return args.slice(i)
}

const KEYWORDS = new Set(['if', 'then', 'else', 'elif', 'fi', 'do', 'done', 'while', 'until', 'for', 'case', 'esac', '!', 'time', 'in'])

/**
 * The commands of a shell line pipe's own parser refuses ($(…), subshells, &, redirections, loops):
 * cut at every operator and substitution, each piece's words taken as a command after its
 * keywords and assignments. Rough on purpose: it finds a command where a shell would run one
 * (`(rm x) &`, `$(curl …)`, `do rm $f; done`); a word that merely names one (`echo rm`) stays an argument.
 */
function looseCommands(line: string): string[][] {
  return line
    .split(/\$\(|`|\(|\)|\{|\}|&&|\|\||[;&|\n]/)
    .map((piece) =>
      piece
        .replace(/["']/g, '')
        .replace(/[<>]+\s*\S*/g, ' ')
        .trim()
        .split(/\s+/)
        .filter(Boolean),
    )
    .map((words) => {
      let i = 0
      while (i < words.length && (KEYWORDS.has(words[i]!) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]!))) i++
      return words.slice(i)
    })
    .filter((argv) => argv.length > 0)
}
