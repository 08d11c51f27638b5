/**
 * What the policy allows: commands whose whole argument vector matches an allowed_commands entry,
 * paths inside the repository root and outside the forbidden globs. Each answer names the rule
 * that decided it.
 */
import path from 'node:path'
import {PipeError} from '../errors.js'
import {contain, realish} from '../util/contain.js'
import {globMatches, ignoresCase} from './glob.js'
import {DEFAULT_POLICY, type LoadedPolicy} from './policy.js'

export interface Verdict {
  allowed: boolean
  /** The rule that decided, e.g. allowed_commands[0] [npm, test], or forbidden_paths[2] ".env". */
  rule: string
  reason: string
}

/** Placeholders an allowed_commands entry may hold besides literal arguments. */
export const ARG = '{arg}'
export const PATH = '{path}'
export const REST = '...'

/** Where a command's `{path}` arguments are resolved: the repository root and the command's directory in it. */
export interface CommandPlace {
  root: string
  /** Relative to root; default the root itself. */
  cwd?: string
}

type EntryMatch = {ok: true} | {ok: false; matched: number; why: string}

/** An argv element null is one not known before the run (an expression): it may be any one argument. */
function matchEntry(policy: LoadedPolicy, entry: readonly string[], argv: ReadonlyArray<string | null>, place: CommandPlace): EntryMatch {
  const rest = entry.at(-1) === REST
  const fixed = rest ? entry.slice(0, -1) : entry
  for (const [i, want] of fixed.entries()) {
    const got = argv[i]
    if (got === undefined) return {ok: false, matched: i, why: `it has ${argv.length} argument(s), ${JSON.stringify(entry)} needs ${fixed.length}`}
    if (want === ARG || got === null) continue
    if (want === PATH) {
      if (got === '' || got.startsWith('-'))
        return {ok: false, matched: i, why: `argument ${i} ${JSON.stringify(got)} is not a path (${PATH} never takes an option)`}
      const target = path.resolve(place.root, place.cwd ?? '.', got)
      const verdict = checkPath(policy, place.root, path.relative(path.resolve(place.root), target) || '.')
      if (!verdict.allowed) return {ok: false, matched: i, why: `argument ${i} ${JSON.stringify(got)}: ${verdict.reason} (${verdict.rule})`}
      continue
    }
    if (got !== want) return {ok: false, matched: i, why: `argument ${i} is ${JSON.stringify(got)}, ${JSON.stringify(entry)} wants ${JSON.stringify(want)}`}
  }
  if (!rest && argv.length > fixed.length) {
    return {
      ok: false,
      matched: fixed.length,
      why: `${argv.length - fixed.length} argument(s) more than ${JSON.stringify(entry)} allows (a last "${REST}" would allow more)`,
    }
  }
  return {ok: true}
}

/**
 * Whether the policy allows the argument vector: some allowed_commands entry matches it whole.
 * `{path}` arguments are resolved from `place` (default: the working directory as the root).
 */
export function checkCommand(policy: LoadedPolicy, argv: readonly string[], place: CommandPlace = {root: process.cwd()}): Verdict {
  if (argv.length === 0 || argv[0] === '') return {allowed: false, rule: 'argv', reason: 'the command is empty'}
  const list = policy.policy.allowed_commands
  let nearest: {index: number; matched: number; why: string} | null = null
  for (const [index, entry] of list.entries()) {
    const match = matchEntry(policy, entry, argv, place)
    if (match.ok)
      return {allowed: true, rule: `allowed_commands[${index}] ${JSON.stringify(entry)}`, reason: `${JSON.stringify(argv)} matches the entry as a whole`}
    if (match.matched > 0 && (!nearest || match.matched > nearest.matched)) nearest = {index, ...match}
  }
  const near = nearest ? `; nearest allowed_commands[${nearest.index}]: ${nearest.why}` : ''
  return {allowed: false, rule: 'allowed_commands', reason: `${JSON.stringify(argv)} matches none of the ${list.length} allowed command(s)${near}`}
}

/**
 * Before a run: whether the policy can allow an argument vector some of whose elements are not known
 * yet (null: an expression the run resolves). Denied means no value of them makes any entry match;
 * allowed means some could, and the run judges the resolved argv again.
 */
export function checkCommandShape(policy: LoadedPolicy, argv: ReadonlyArray<string | null>, place: CommandPlace = {root: process.cwd()}): Verdict {
  if (!argv.includes(null)) return checkCommand(policy, argv as readonly string[], place)
  const shown = JSON.stringify(argv.map((arg) => arg ?? '${{ … }}'))
  const list = policy.policy.allowed_commands
  for (const [index, entry] of list.entries()) {
    if (matchEntry(policy, entry, argv, place).ok)
      return {
        allowed: true,
        rule: `allowed_commands[${index}] ${JSON.stringify(entry)}`,
        reason: `${shown} may match the entry, depending on what its expressions give`,
      }
  }
  return {allowed: false, rule: 'allowed_commands', reason: `${shown} matches none of the ${list.length} allowed command(s), whatever its expressions give`}
}

export function assertCommand(policy: LoadedPolicy, argv: readonly string[], place?: CommandPlace): void {
  const verdict = checkCommand(policy, argv, place)
  if (!verdict.allowed) {
    throw new PipeError('E_POLICY_DENIED', `command ${JSON.stringify(argv)} is not allowed (${verdict.rule}): ${verdict.reason}`, {
      hint: `Add an entry for it to allowed_commands in ${policy.file ?? 'a policy.yaml (pipe policy init writes a starter)'} ("{arg}" for any one argument, "{path}" for a path in the repository, a last "..." for any further ones), if it should be allowed.`,
      details: {rule: verdict.rule, argv},
    })
  }
}

/**
 * Environment variables a step may not set, because each makes an allowed program load or run
 * other code than its argv says (a PATH that finds `git` in the repository, NODE_OPTIONS=--import,
 * LD_PRELOAD, GIT_CONFIG_* setting core.fsmonitor, BASH_ENV...): the allow-list judges the argv,
 * so these would be a door around it.
 */
const CODE_ENV =
  /^(PATH|LD_\w*|DYLD_\w*|NODE_OPTIONS|NODE_PATH|NODE_REPL_EXTERNAL_MODULE|BASH_ENV|ENV|BASH_FUNC_\S*|SHELLOPTS|BASHOPTS|PS4|PROMPT_COMMAND|IFS|GIT_\w*|GCONV_PATH|PYTHON(PATH|STARTUP|HOME|USERBASE|EXECUTABLE|BREAKPOINT|SAFEPATH)|PERL5OPT|PERL5LIB|PERLLIB|PERL5DB|RUBYOPT|RUBYLIB|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS|JDK_JAVA_OPTIONS|NPM_CONFIG_\w*(SHELL|NODE_OPTIONS|ONLOAD_SCRIPT|PREFIX|USERCONFIG|GLOBALCONFIG)|RUSTC\w*|CARGO_BUILD_RUSTC\w*|CARGO_TARGET_\w+_(RUNNER|LINKER)|GOFLAGS|CC|CXX|MAKEFLAGS|EDITOR|VISUAL|PAGER)$/i

/** Whether a command step may set these environment variables. */
export function checkEnv(names: readonly string[]): Verdict {
  const bad = names.filter((name) => CODE_ENV.test(name))
  if (bad.length === 0) return {allowed: true, rule: 'env', reason: 'no variable changes which code a program runs'}
  return {
    allowed: false,
    rule: 'env',
    reason: `a step may not set ${bad.join(', ')}: ${bad.length === 1 ? 'it changes' : 'they change'} which program or code runs, around allowed_commands`,
  }
}

export function assertEnv(names: readonly string[], argv: readonly string[]): void {
  const verdict = checkEnv(names)
  if (!verdict.allowed) {
    throw new PipeError('E_POLICY_DENIED', `command ${JSON.stringify(argv)} is not started (${verdict.rule}): ${verdict.reason}`, {
      hint: "Remove the variable from the step's env; to run another program or with other options, allow that argv in allowed_commands.",
      details: {rule: verdict.rule, argv},
    })
  }
}

export interface PathVerdict extends Verdict {
  /** The absolute, symlink-resolved path. */
  resolved: string
  /** The path relative to the repository root, with forward slashes. */
  relative: string
}

export function checkPath(policy: LoadedPolicy, root: string, given: string): PathVerdict {
  const base = {resolved: '', relative: given}
  if (given.includes('\0')) return {...base, allowed: false, rule: 'sandbox', reason: 'the path contains a NUL byte'}
  const {escape, realRoot, resolved} = contain(root, given)
  if (escape === 'absolute')
    return {...base, allowed: false, rule: 'sandbox', reason: 'absolute paths are not allowed; give a path relative to the repository root'}
  if (escape === 'leaves') return {...base, resolved, allowed: false, rule: 'sandbox', reason: `"${given}" leaves the repository root`}
  if (escape === 'symlink')
    return {...base, resolved, allowed: false, rule: 'sandbox', reason: `"${given}" resolves through a symlink to a place outside the repository root`}
  const relative = path.relative(realRoot, resolved).split(path.sep).join('/')
  const nocase = ignoresCase(realRoot)
  const fold = (p: string): string => (nocase ? p.toLowerCase() : p)
  for (const dir of policy.protected ?? []) {
    const guarded = realish(dir)
    if (fold(resolved) === fold(guarded) || fold(resolved).startsWith(fold(`${guarded}${path.sep}`))) {
      return {resolved, relative, allowed: false, rule: 'store', reason: `"${relative}" is inside pipe's store, which steps may not touch`}
    }
  }
  // Whatever forbidden_paths says: a hook or config written there runs later as the user (git steps, their next commit).
  if (relative.split('/').some((part) => part.toLowerCase() === '.git')) {
    return {resolved, relative, allowed: false, rule: 'git', reason: `"${relative}" is inside a git repository's own folder (.git), which steps may not touch`}
  }
  const globs = policy.policy.forbidden_paths
  for (const [i, glob] of globs.entries()) {
    if (globMatches(glob, relative, {nocase}))
      return {resolved, relative, allowed: false, rule: `forbidden_paths[${i}] "${glob}"`, reason: `"${relative}" matches a forbidden path`}
  }
  return {resolved, relative, allowed: true, rule: 'sandbox', reason: `"${relative}" is inside the repository root and matches no forbidden path`}
}

export function assertPath(policy: LoadedPolicy, root: string, given: string): PathVerdict {
  const verdict = checkPath(policy, root, given)
  if (!verdict.allowed) {
    throw new PipeError('E_POLICY_DENIED', `path "${given}" is denied (${verdict.rule}): ${verdict.reason}`, {
      hint:
        verdict.rule === 'sandbox'
          ? 'Steps may only touch files inside the repository root.'
          : verdict.rule === 'git' || verdict.rule === 'store'
            ? 'No policy allows it: pipe never lets a step write where git or pipe itself would later act on it.'
            : builtInGlob(verdict.rule)
              ? 'The pattern is one of the built-in forbidden paths, which every policy keeps; the step may not touch it.'
              : `Remove the pattern from forbidden_paths in ${policy.file ?? 'policy.yaml'} if the step should touch it.`,
      details: {rule: verdict.rule, path: given},
    })
  }
  return verdict
}

/** Whether a verdict's rule (forbidden_paths[i] "GLOB") names a built-in glob, which a policy adds to but cannot lift. */
function builtInGlob(rule: string): boolean {
  const glob = /^forbidden_paths\[\d+\] "(.*)"$/.exec(rule)?.[1]
  return glob !== undefined && DEFAULT_POLICY.forbidden_paths.includes(glob)
}

/** The tools_preapproved entry that matches the argv whole (as allowed_commands matches), or null. */
export function preapproval(policy: LoadedPolicy, argv: readonly string[], place: CommandPlace): string | null {
  const entries = policy.policy.tools_preapproved ?? []
  if (entries.length === 0) return null
  const verdict = checkCommand({...policy, policy: {...policy.policy, allowed_commands: entries}}, argv, place)
  return verdict.allowed ? verdict.rule.replace(/^allowed_commands/, 'tools_preapproved') : null
}
