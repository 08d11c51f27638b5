/**
 * Who is acting, as an approvals rule names people (issue 40): a stable id — PIPE_USER, else the
 * repository's git user.email, else the OS user — with the OS user and host pipe records anyway.
 */
import os from 'node:os'
import type {Person} from '../policy/approvals.js'
import {currentUser} from '../util/user.js'
import {childProcess} from '../util/fs-async.js'

export function currentPerson(cwd: string, env: NodeJS.ProcessEnv = process.env): Person {
  const user = currentUser()
  const host = os.hostname()
  const given = env['PIPE_USER']?.trim()
  if (given) return {id: given, user, host}
  // The repository's own setting wins over the global one, as git itself decides the author.
  const git = childProcess().spawnSync('git', ['config', 'user.email'], {cwd, encoding: 'utf8', env, timeout: 10000})
  const email = git.status === 0 ? git.stdout.trim() : ''
  return {id: email || user, user, host}
}
