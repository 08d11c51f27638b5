/**
 * Git checkpoints (seed 001) through simple-git: commit the workspace at a named point, and
 * return to such a point. Works in a repository with no commits yet: the first checkpoint there
 * commits the working tree as the repository's first commit.
 *
 * pipe runs git outside the sandbox, as the user who runs pipe, in a workspace that sandboxed
 * commands write to. So git must run nothing that a command could have put there: no hook, no
 * program named by repository config, no repository that appeared while the run went on. Every
 * invocation therefore
 * - goes to the repository the run found when it started (GIT_DIR and GIT_WORK_TREE pinned to
 *   it), and is refused when a `.git` has appeared in the workspace since (see `dotGitOf`);
 * - disables hooks (core.hooksPath=/dev/null: `--no-verify` does not skip post-commit) and sets
 *   every fixed-name key that can start a program to a value that starts none (`-c` beats every
 *   config file), with no pager, editor, askpass or terminal prompt;
 * - is refused when the repository's own config (local or worktree scope, includes followed)
 *   names a filter driver (filter.*.clean/smudge/process), whose name no `-c` can foresee;
 * - never enters submodules, whose config lives in folders a command may have written.
 * The system and global config stay read: they lie outside the workspace, read-only inside the
 * sandbox, and hold the user's identity and LFS filters; their program keys are overridden too.
 */
import path from 'node:path'
import type {SimpleGit} from 'simple-git'
import {PipeError} from '../errors.js'
import {dotGitOf} from '../util/git-dir.js'

const AUTHOR = {name: 'pipe', email: 'pipe@localhost'}

/** Config that would otherwise run a program, each set to a value that runs none. */
export const SAFE_GIT_CONFIG = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.pager=cat',
  'core.editor=true',
  'sequence.editor=true',
  'core.askPass=',
  'core.sshCommand=false',
  'credential.helper=',
  'diff.external=',
  'commit.gpgSign=false',
  'tag.gpgSign=false',
  'submodule.recurse=false',
  'gc.auto=0',
  'maintenance.auto=false',
]

/** Repository config whose name no override can foresee and that runs a program in checkpoint or rollback. */
const PROGRAM_KEYS = /^filter\..+\.(clean|smudge|process)$/i

/** Our environment minus what would point git elsewhere or start a program (GIT_DIR, GIT_CONFIG_*, GIT_SSH, PAGER...). */
export function gitEnv(pinned: {gitDir: string; workTree: string} | null): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (value === undefined || /^(GIT_(?!AUTHOR_|COMMITTER_)\w*|PAGER|EDITOR|VISUAL|SSH_ASKPASS|PREFIX)$/i.test(name)) continue
    env[name] = value
  }
  env.GIT_TERMINAL_PROMPT = '0'
  if (pinned) {
    env.GIT_DIR = pinned.gitDir
    env.GIT_WORK_TREE = pinned.workTree
  }
  return env
}

/**
 * The repository a run may use: the `.git` it found when it started (`recorded`; undefined for a
 * run recorded before pipe kept it, which then finds it now). A `.git` that is nearer now was
 * planted during the run, by a command or by hand; pipe refuses to run git in it.
 */
function pinnedRepository(root: string, recorded: string | null | undefined): {gitDir: string; workTree: string} | null {
  const now = dotGitOf(root)
  if (recorded === undefined) return null
  if (now !== null && now !== recorded) {
    const started = recorded === null ? 'it had no repository when the run started' : `the run started in the repository at ${path.dirname(recorded)}`
    throw new PipeError(
      'E_POLICY_DENIED',
      `${now} appeared during the run (${started}): pipe runs no git in a repository that may have been planted with hooks or config`,
      {
        hint: `Look at ${now} (its hooks/ and config) before you run any git command there, remove it if you did not make it, and start a new run.`,
        details: {rule: 'git', path: now, recorded},
      },
    )
  }
  if (recorded === null) {
    throw new PipeError('E_STATE', `${root} is not inside a git repository`, {
      hint: `Run git init in ${root} before pipe run, or run pipe from inside the repository.`,
    })
  }
  return {gitDir: recorded, workTree: path.dirname(recorded)}
}

/** A repository opened for pipe's own commands: its git, and who pipe's commits there are made as (see identity). */
interface Opened {
  git: SimpleGit
  /** `-c` options naming pipe as the author where the repository's config names nobody; else none. */
  who: string[]
}

async function open(root: string, recorded: string | null | undefined): Promise<Opened> {
  const pinned = pinnedRepository(root, recorded)
  const {simpleGit} = await import('simple-git')
  const git = simpleGit({
    baseDir: root,
    binary: 'git',
    maxConcurrentProcesses: 1,
    trimmed: true,
    config: SAFE_GIT_CONFIG,
    // simple-git refuses these keys outright, since a caller's value could start a program; pipe
    // sets each only to a value that starts none, which is the point of setting them.
    unsafe: {
      allowUnsafeHooksPath: true,
      allowUnsafeFsMonitor: true,
      allowUnsafePager: true,
      allowUnsafeEditor: true,
      allowUnsafeAskPass: true,
      allowUnsafeSshCommand: true,
      allowUnsafeCredentialHelper: true,
      allowUnsafeDiffExternal: true,
    },
  }).env(gitEnv(pinned))
  try {
    await git.revparse(['--show-toplevel'])
  } catch {
    throw new PipeError('E_STATE', `${root} is not inside a git repository`, {hint: `Run git init in ${root}, or run pipe from inside the repository.`})
  }
  // -z gives scope NUL key LF value NUL for each entry.
  const fields = (await git.raw(['config', '--list', '--show-scope', '-z'])).split('\0')
  let email = ''
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const scope = fields[i]!
    const [key = '', value = ''] = fields[i + 1]!.split(/\n(.*)/s)
    // The last one listed is the one git uses (as `git config user.email` prints it).
    if (key.toLowerCase() === 'user.email') email = value
    if ((scope === 'local' || scope === 'worktree') && PROGRAM_KEYS.test(key)) {
      throw new PipeError(
        'E_POLICY_DENIED',
        `the repository's config sets ${key}, a program git would run as you during pipe's checkpoint or rollback; pipe runs no program named by repository config`,
        {
          hint: `If you set it yourself, move it to your global config (git config --global ${key} ...), which no command in the sandbox can write; otherwise remove it: git config --${scope} --unset ${key}.`,
          details: {rule: 'git', key, scope},
        },
      )
    }
  }
  return {git, who: identity(email)}
}

/** Commit as the repository's configured person; as "pipe" where none is configured (a fresh CI box). */
function identity(configuredEmail: string): string[] {
  return configuredEmail.trim() ? [] : ['-c', `user.name=${AUTHOR.name}`, '-c', `user.email=${AUTHOR.email}`]
}

/** The notes ref `pipe attest` writes: `git log --notes=pipe` shows them. */
export const ATTESTATION_NOTES_REF = 'refs/notes/pipe'

/**
 * Attaches a note to each commit of `commits` the repository has (a commit is never rewritten
 * to carry what is known only after it was made); the ones it does not have are returned.
 * A note already there is replaced: attesting again names the newest statement.
 */
export async function annotateCommits(
  root: string,
  repository: RecordedRepository,
  commits: string[],
  note: string,
): Promise<{annotated: string[]; missing: string[]}> {
  const {git, who} = await open(root, repository)
  const annotated: string[] = []
  const missing: string[] = []
  for (const commit of commits) {
    const known = await git.raw(['cat-file', '-t', commit]).catch(() => '')
    if (known.trim() !== 'commit') {
      missing.push(commit)
      continue
    }
    await git.raw([...who, 'notes', `--ref=${ATTESTATION_NOTES_REF}`, 'add', '-f', '-m', note, commit])
    annotated.push(commit)
  }
  return {annotated, missing}
}

async function head(git: SimpleGit): Promise<string | null> {
  try {
    const hash = await git.revparse(['--verify', '--quiet', 'HEAD'])
    return hash === '' ? null : hash
  } catch {
    return null
  }
}

export interface CheckpointResult {
  commit: string
  parent: string | null
  branch: string
  /** Files the commit recorded. */
  files: string[]
  empty: boolean
}

/** Where the run found its repository when it started (RunRecord.workspace_git); undefined where unknown. */
export type RecordedRepository = string | null | undefined

export async function checkpoint(
  root: string,
  options: {message: string; allowDirty: boolean; branch?: string; repository: RecordedRepository; trailers?: string[]},
): Promise<CheckpointResult> {
  const {git, who} = await open(root, options.repository)
  const status = await git.status(['--ignore-submodules=all'])
  const dirty = status.files.map((f) => f.path)
  const parent = await head(git)
  // A dirty tree is refused because a later rollback would discard what the checkpoint left out.
  // Before the first commit there is nothing else to return to: the working tree is the baseline,
  // and leaving it out would let a rollback's clean delete it, so it becomes the first commit.
  if (!options.allowDirty && dirty.length > 0 && parent !== null) {
    throw new PipeError(
      'E_CONFLICT',
      `the working tree has ${dirty.length} uncommitted change(s): ${dirty.slice(0, 5).join(', ')}${dirty.length > 5 ? ', ...' : ''}`,
      {
        hint: 'Commit or stash them first, or set allow_dirty: true on the step to include them in the checkpoint.',
        details: {files: dirty},
      },
    )
  }
  if (options.branch) {
    const current = status.current
    if (current !== options.branch) {
      const branches = await git.branchLocal()
      if (branches.all.includes(options.branch)) await git.checkout(options.branch)
      else if (parent === null) await git.raw(['checkout', '--orphan', options.branch])
      else await git.checkoutLocalBranch(options.branch)
    }
  }
  await git.add(['-A'])
  // git's own trailer handling joins them to a trailer block the message already ends with.
  const trailers = (options.trailers ?? []).flatMap((t) => ['--trailer', t])
  await git.raw([...who, 'commit', '--allow-empty', '--no-verify', '-q', '-m', options.message, ...trailers])
  const commit = (await head(git))!
  const files =
    parent === null
      ? (await git.raw(['ls-tree', '-r', '--name-only', commit])).split('\n').filter(Boolean)
      : (await git.raw(['diff', '--no-ext-diff', '--no-textconv', '--ignore-submodules=all', '--name-only', parent, commit])).split('\n').filter(Boolean)
  // The branch the commit is on: the one asked for (checked out above), else the one the status found (named before a first commit too).
  return {commit, parent, branch: options.branch ?? status.current ?? '', files, empty: files.length === 0}
}

export interface RollbackResult {
  from: string | null
  to: string
  /** Files that differed from the checkpoint and were put back, or removed. */
  files: string[]
  /** The stash commit holding what was discarded, when asked to save it (`save`) and there was any. */
  saved?: string
}

/**
 * Puts the working tree and HEAD back to a checkpoint, discarding what came after it. With `save`
 * (a stash message), what the working tree holds that HEAD does not (changed and untracked files,
 * not ignored ones) is first kept in a stash: a person rolling back by hand loses nothing they
 * added meanwhile.
 */
export async function rollback(root: string, commit: string, repository: RecordedRepository, options: {save?: string} = {}): Promise<RollbackResult> {
  const {git, who} = await open(root, repository)
  const from = await head(git)
  try {
    await git.raw(['cat-file', '-e', `${commit}^{commit}`])
  } catch {
    throw new PipeError('E_STATE', `checkpoint ${commit} is not a commit of ${root}`, {
      hint: 'It may have been removed by a rebase or a gc; look for it with git reflog.',
    })
  }
  const changed = (await git.raw(['diff', '--no-ext-diff', '--no-textconv', '--ignore-submodules=all', '--name-only', commit])).split('\n').filter(Boolean)
  const untracked = (await git.raw(['ls-files', '--others', '--exclude-standard'])).split('\n').filter(Boolean)
  let saved: string | undefined
  if (options.save !== undefined && (await git.status(['--ignore-submodules=all'])).files.length > 0) {
    await git.raw([...who, 'stash', 'push', '--include-untracked', '-q', '-m', options.save])
    saved = (await git.raw(['rev-parse', '--verify', '-q', 'stash@{0}'])).trim()
  }
  await git.raw(['reset', '--hard', '-q', commit])
  await git.raw(['clean', '-fdq'])
  return {from, to: commit, files: [...new Set([...changed, ...untracked])].sort(), ...(saved ? {saved} : {})}
}
