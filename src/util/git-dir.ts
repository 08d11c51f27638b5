/**
 * Where a workspace's git repository is, read from the file system alone (no git process): a run
 * records it when it starts (vcs/git.ts), and the sandbox keeps it read-only (policy/sandbox.ts).
 */
import {lstatSync, readFileSync} from 'node:fs'
import path from 'node:path'

/**
 * The `.git` (folder or file) that git would find from `dir`: the nearest one at or above it, or
 * null. Read from the file system alone, so a run records it at its start without starting git.
 */
export function dotGitOf(dir: string): string | null {
  let d = path.resolve(dir)
  for (;;) {
    const candidate = path.join(d, '.git')
    try {
      const info = lstatSync(candidate)
      // An empty folder is no repository to git, which looks further up: so does this.
      if (info.isFile() || info.isSymbolicLink() || (info.isDirectory() && isGitDir(candidate))) return candidate
    } catch {
      // None here.
    }
    const parent = path.dirname(d)
    if (parent === d) return null
    d = parent
  }
}

function isGitDir(dir: string): boolean {
  try {
    return lstatSync(path.join(dir, 'HEAD')).isFile()
  } catch {
    return false
  }
}

/** The git directory a `.git` entry stands for: the folder itself, or where a gitfile (`gitdir: X`) points. */
export function gitDirOf(dotGit: string): string {
  try {
    if (!lstatSync(dotGit).isFile()) return dotGit
    const line = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, 'utf8'))
    return line ? path.resolve(path.dirname(dotGit), line[1]!.trim()) : dotGit
  } catch {
    return dotGit
  }
}
