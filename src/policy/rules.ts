/**
 * What the policy allows: commands by argv prefix, paths inside the repository root and outside
 * the forbidden globs. Each answer names the rule that decided it.
 */
import {realpathSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {globMatches} from './glob.js'
import type {LoadedPolicy} from './policy.js'

export interface Verdict {
  allowed: boolean
  /** The rule that decided, e.g. allowed_commands[0] [npm, test], or forbidden_paths[2] ".env". */
  rule: string
  reason: string
}

export function checkCommand(policy: LoadedPolicy, argv: readonly string[]): Verdict {
  if (argv.length === 0 || argv[0] === '') return {allowed: false, rule: 'argv', reason: 'the command is empty'}
  const list = policy.policy.allowed_commands
  const index = list.findIndex((prefix) => prefix.length <= argv.length && prefix.every((part, i) => part === argv[i]))
  if (index === -1) {
    return {allowed: false, rule: 'allowed_commands', reason: `${JSON.stringify(argv)} starts with none of the ${list.length} allowed prefixes`}
  }
  return {allowed: true, rule: `allowed_commands[${index}] ${JSON.stringify(list[index])}`, reason: `${JSON.stringify(argv)} starts with an allowed prefix`}
}

export function assertCommand(policy: LoadedPolicy, argv: readonly string[]): void {
  const verdict = checkCommand(policy, argv)
  if (!verdict.allowed) {
    throw new PipeError('E_POLICY_DENIED', `command ${JSON.stringify(argv)} is not allowed (${verdict.rule}): ${verdict.reason}`, {
      hint: `Add its argv prefix to allowed_commands in ${policy.file ?? 'policy.yaml'}, if it should be allowed.`,
      details: {rule: verdict.rule, argv},
    })
  }
}

/** The deepest existing ancestor's real path, plus the rest: resolves symlinks of what exists. */
function realish(target: string): string {
  let existing = target
  const rest: string[] = []
  for (;;) {
    try {
      return path.join(realpathSync(existing), ...rest.reverse())
    } catch {
      const parent = path.dirname(existing)
      if (parent === existing) return target
      rest.push(path.basename(existing))
      existing = parent
    }
  }
}

export interface PathVerdict extends Verdict {
  /** The absolute, symlink-resolved path. */
  resolved: string
  /** The path relative to the repository root, with forward slashes. */
  relative: string
}

export function checkPath(policy: LoadedPolicy, root: string, given: string): PathVerdict {
  const realRoot = realish(path.resolve(root))
  const base = {resolved: '', relative: given}
  if (given.includes('\0')) return {...base, allowed: false, rule: 'sandbox', reason: 'the path contains a NUL byte'}
  if (path.isAbsolute(given)) return {...base, allowed: false, rule: 'sandbox', reason: 'absolute paths are not allowed; give a path relative to the repository root'}
  const lexical = path.resolve(realRoot, given)
  if (lexical !== realRoot && !lexical.startsWith(`${realRoot}${path.sep}`)) {
    return {...base, resolved: lexical, allowed: false, rule: 'sandbox', reason: `"${given}" leaves the repository root (${realRoot})`}
  }
  const resolved = realish(lexical)
  if (resolved !== realRoot && !resolved.startsWith(`${realRoot}${path.sep}`)) {
    return {...base, resolved, allowed: false, rule: 'sandbox', reason: `"${given}" resolves through a symlink to ${resolved}, outside the repository root`}
  }
  const relative = path.relative(realRoot, resolved).split(path.sep).join('/')
  for (const dir of policy.protected ?? []) {
    const guarded = realish(dir)
    if (resolved === guarded || resolved.startsWith(`${guarded}${path.sep}`)) {
      return {resolved, relative, allowed: false, rule: 'store', reason: `"${relative}" is inside pipe's store (${guarded}), which steps may not touch`}
    }
  }
  const globs = policy.policy.forbidden_paths
  for (const [i, glob] of globs.entries()) {
    if (globMatches(glob, relative)) return {resolved, relative, allowed: false, rule: `forbidden_paths[${i}] "${glob}"`, reason: `"${relative}" matches a forbidden path`}
  }
  return {resolved, relative, allowed: true, rule: 'sandbox', reason: `"${relative}" is inside the repository root and matches no forbidden path`}
}

export function assertPath(policy: LoadedPolicy, root: string, given: string): PathVerdict {
  const verdict = checkPath(policy, root, given)
  if (!verdict.allowed) {
    throw new PipeError('E_POLICY_DENIED', `path "${given}" is denied (${verdict.rule}): ${verdict.reason}`, {
      hint: verdict.rule === 'sandbox' ? 'Steps may only touch files inside the repository root.' : `Remove the pattern from forbidden_paths in ${policy.file ?? 'policy.yaml'} if the step should touch it.`,
      details: {rule: verdict.rule, path: given},
    })
  }
  return verdict
}
