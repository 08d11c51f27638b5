/**
 * Git checkpoints (seed 001) through simple-git: commit the workspace at a named point, and
 * return to such a point. Works in a repository with no commits yet: the first checkpoint there
 * commits the working tree as the repository's first commit.
 */
import type {SimpleGit} from 'simple-git'
import {PipeError} from '../errors.js'

const AUTHOR = {name: 'pipe', email: 'pipe@localhost'}

async function open(root: string): Promise<SimpleGit> {
  const {simpleGit} = await import('simple-git')
  const git = simpleGit({baseDir: root, binary: 'git', maxConcurrentProcesses: 1, trimmed: true})
  try {
    await git.revparse(['--show-toplevel'])
  } catch {
    throw new PipeError('E_STATE', `${root} is not inside a git repository`, {hint: `Run git init in ${root}, or run pipe from inside the repository.`})
  }
  return git
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

export async function checkpoint(root: string, options: {message: string; allowDirty: boolean; branch?: string}): Promise<CheckpointResult> {
  const git = await open(root)
  const status = await git.status()
  const dirty = status.files.map((f) => f.path)
  const parent = await head(git)
  // A dirty tree is refused because a later rollback would discard what the checkpoint left out.
  // Before the first commit there is nothing else to return to: the working tree is the baseline,
  // and leaving it out would let a rollback's clean delete it, so it becomes the first commit.
  if (!options.allowDirty && dirty.length > 0 && parent !== null) {
    throw new PipeError('E_CONFLICT', `the working tree has ${dirty.length} uncommitted change(s): ${dirty.slice(0, 5).join(', ')}${dirty.length > 5 ? ', ...' : ''}`, {
      hint: 'Commit or stash them first, or set allow_dirty: true on the step to include them in the checkpoint.',
      details: {files: dirty},
    })
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
  // Commit as the repository's configured person; as "pipe" where none is configured (a fresh CI box).
  const configured = await git.raw(['config', 'user.email']).catch(() => '')
  const identity = configured.trim() ? [] : ['-c', `user.name=${AUTHOR.name}`, '-c', `user.email=${AUTHOR.email}`]
  await git.raw([...identity, 'commit', '--allow-empty', '--no-verify', '-q', '-m', options.message])
  const commit = (await head(git))!
  const files = parent === null ? (await git.raw(['ls-tree', '-r', '--name-only', commit])).split('\n').filter(Boolean) : (await git.raw(['diff', '--name-only', parent, commit])).split('\n').filter(Boolean)
  return {commit, parent, branch: (await git.status()).current ?? options.branch ?? '', files, empty: files.length === 0}
}

export interface RollbackResult {
  from: string | null
  to: string
  /** Files that differed from the checkpoint and were put back, or removed. */
  files: string[]
}

/** Puts the working tree and HEAD back to a checkpoint, discarding what came after it. */
export async function rollback(root: string, commit: string): Promise<RollbackResult> {
  const git = await open(root)
  const from = await head(git)
  try {
    await git.raw(['cat-file', '-e', `${commit}^{commit}`])
  } catch {
    throw new PipeError('E_STATE', `checkpoint ${commit} is not a commit of ${root}`, {hint: 'It may have been removed by a rebase or a gc; look for it with git reflog.'})
  }
  const changed = (await git.raw(['diff', '--name-only', commit])).split('\n').filter(Boolean)
  const untracked = (await git.raw(['ls-files', '--others', '--exclude-standard'])).split('\n').filter(Boolean)
  await git.raw(['reset', '--hard', '-q', commit])
  await git.raw(['clean', '-fdq'])
  return {from, to: commit, files: [...new Set([...changed, ...untracked])].sort()}
}
