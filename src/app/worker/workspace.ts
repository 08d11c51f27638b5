/**
 * Which workspace a run needs and which a worker serves (docs/team.md, "Workspaces").
 *
 * A workspace is named by the repository, not by the folder: in a git repository, its id is
 * `git:` + its root commit (the first commit of its history, the same in every clone on every
 * machine), so a worker on a machine whose checkout lives elsewhere serves the runs of that
 * repository; outside git, its id is `path:` + the folder's real path, served only where that path
 * is. A run made in a sub-folder of a repository runs in the same sub-folder of the worker's
 * checkout, and the files it recorded (its pipeline, its policy) are read at the same place under
 * the worker's checkout — the content must be the same (the engine compares the pipeline's and the
 * policy's hashes and refuses a changed one).
 */
import {existsSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import type {RunWorkspace} from '../../store/team.js'
import {childProcess, realpath} from '../../util/fs-async.js'

/** A workspace as found on this machine: its id, the root of its repository here, and the folder under that root. */
export interface LocalWorkspace extends RunWorkspace {
  /** The folder given (its real path). */
  dir: string
}

function git(cwd: string, args: string[]): Promise<string | null> {
  return new Promise((resolve) => {
    childProcess().execFile('git', args, {cwd, encoding: 'utf8', timeout: 15000}, (error, stdout) => resolve(error ? null : stdout.trim()))
  })
}

/**
 * Whether git could find a repository from `dir`: a `.git` in it or a folder above, or git told
 * where one is by its environment. Outside one, no git process is started (each `pipe run --detach`
 * asks: a process, and Node's child_process loaded, for an answer the folders give).
 */
function inRepository(dir: string): boolean {
  if (process.env.GIT_DIR !== undefined || process.env.GIT_WORK_TREE !== undefined) return true
  for (let at = dir; ; at = path.dirname(at)) {
    if (existsSync(path.join(at, '.git'))) return true
    if (path.dirname(at) === at) return false
  }
}

/** The workspace `dir` belongs to (see the top of this file); E_INVALID_ARGS when it is not a folder. */
export async function workspaceOf(dir: string): Promise<LocalWorkspace> {
  let real: string
  try {
    real = await realpath(dir)
  } catch {
    throw new PipeError('E_INVALID_ARGS', `workspace ${dir} does not exist`, {
      hint: 'Give --workspace a folder on this machine: a checkout of the repository the runs work in.',
    })
  }
  const top = inRepository(real) ? await git(real, ['rev-parse', '--show-toplevel']) : null
  if (top) {
    const root = await realpath(top)
    // Several roots (histories merged): the smallest hash names the repository, the same everywhere.
    const roots = (await git(root, ['rev-list', '--max-parents=0', 'HEAD']))?.split('\n').filter(Boolean).sort() ?? []
    if (roots[0]) return {id: `git:${roots[0]}`, root, sub: path.relative(root, real).split(path.sep).join('/'), dir: real}
  }
  // Not in git, or a repository without a commit yet: the folder itself.
  return {id: `path:${real}`, root: real, sub: '', dir: real}
}

/**
 * Where a file a run recorded is on this machine: a path under the root the run was made in moves
 * to the same place under this machine's checkout; any other path stays as it is.
 */
export function relocator(recorded: RunWorkspace | null, localRoot: string | undefined): (file: string) => string {
  if (!recorded || localRoot === undefined || recorded.root === localRoot) return (file) => file
  return (file) => {
    const rel = path.relative(recorded.root, file)
    if (rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel))) return path.join(localRoot, rel)
    return file
  }
}
