/**
 * `pipe run` without oclif. Loading oclif (its config, plugin and help modules, ~0.6 MB of the
 * bundle) was ~30 ms and ~2 MiB of every run, before a step ran. bin/run.js hands `run`'s argv here
 * first; this reads the flags from oclif's own manifest (made from commands/run.ts at build), parses
 * only the plain forms, and calls the command's core (run-command.ts) as the oclif command does.
 * Anything else (help, an unknown or repeated flag, a value oclif would reject or read another way,
 * `--`, a flag attribute this parser does not know) is declined before any effect, and oclif then
 * parses and reports it as always. test/unit/fast-run.test.ts holds the two parsers to the same answers.
 */
import {existsSync, readFileSync} from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import {reportCommandError, type CommandOutput} from './command-io.js'
import {runCommand, type RunArgs, type RunFlags} from './run-command.js'
import {jsonText} from '../util/terminal-text.js'
import {stdoutIsStream, writeOut} from './std-streams.js'

/** A flag as oclif's manifest describes it. */
export interface ManifestFlag {
  name: string
  type: 'boolean' | 'option'
  char?: string
  multiple?: boolean
  options?: string[]
  dependsOn?: string[]
  allowNo?: boolean
  [other: string]: unknown
}

export interface ManifestArg {
  name: string
  required?: boolean
  [other: string]: unknown
}

export interface ManifestCommand {
  id: string
  strict?: boolean
  enableJsonFlag?: boolean
  flags: Record<string, ManifestFlag>
  args: Record<string, ManifestArg>
  aliases?: unknown
  hiddenAliases?: unknown
}

/** Attributes whose meaning this parser follows; a flag or argument with any other is left to oclif. */
const FLAG_KEYS = new Set(['name', 'type', 'char', 'multiple', 'options', 'dependsOn', 'allowNo', 'description', 'summary', 'helpValue', 'helpGroup', 'hasDynamicHelp', 'hidden'])
const ARG_KEYS = new Set(['name', 'required', 'description'])
/**
 * The settings of package.json's oclif config whose effect on `pipe run` this path follows (the
 * folder, the commands and topics, help's class and options) or checks (hooks, plugins); with any
 * other, oclif runs the argv. oclif reads an .oclifrc only when package.json has no oclif config.
 */
const OCLIF_KEYS = new Set(['bin', 'dirname', 'commands', 'topicSeparator', 'topics', 'plugins', 'helpClass', 'helpOptions', 'hooks', 'description'])
/** The hook events oclif fires when it runs a command; pipe's package has none of them (only command_not_found). */
export const COMMAND_HOOKS = new Set(['init', 'preparse', 'prerun', 'postrun', 'finally'])
/**
 * The core plugins this path knows to leave a run alone: help, and autocomplete, whose hooks fire
 * only when a plugin is installed or removed (plugins:postinstall, plugins:postuninstall) and whose
 * commands are `autocomplete …`. A test checks the installed autocomplete still has no command hook.
 */
export const RUN_NEUTRAL_PLUGINS = new Set(['@oclif/plugin-help', '@oclif/plugin-autocomplete'])

export interface ParsedRun {
  args: RunArgs
  flags: RunFlags & {json?: boolean}
}

/** The arguments and flags oclif would give the command, or undefined where this parser leaves the argv to oclif. */
export function parseRunArgv(argv: readonly string[], command: ManifestCommand): ParsedRun | undefined {
  // The manifest is a file of the installation: one damaged, or edited by hand, is declined, not trusted or thrown on.
  if (!wellFormed(command) || command.strict === false) return undefined
  const flags = Object.values(command.flags)
  const args = Object.values(command.args)
  if (!flags.every(understood) || !args.every((a) => Object.keys(a).every((k) => ARG_KEYS.has(k)))) return undefined
  const byChar = new Map(flags.filter((f) => f.char !== undefined).map((f) => [f.char, f]))
  const values: Record<string, string | string[] | boolean> = {}
  const positionals: string[] = []
  // oclif gives a multiple flag every later word that is not a flag (`-i a=1 file.yaml` takes the
  // file as a second value), even past a boolean: a word after one is left to oclif.
  let multipleSeen = false
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!
    if (token === '' || token === '--') return undefined
    let flag: ManifestFlag | undefined
    let inline: string | undefined
    if (token.startsWith('--')) {
      const eq = token.indexOf('=')
      const name = eq < 0 ? token.slice(2) : token.slice(2, eq)
      flag = Object.hasOwn(command.flags, name) ? command.flags[name] : undefined
      if (eq >= 0) inline = token.slice(eq + 1)
    } else if (token.startsWith('-') && token !== '-') {
      // One character each: grouped (-ta) and attached (-tx, -t=x) forms are oclif's to read.
      if (token.length !== 2) return undefined
      flag = byChar.get(token[1])
    } else {
      if (multipleSeen) return undefined
      positionals.push(token)
      continue
    }
    if (!flag) return undefined
    if (flag.type === 'boolean') {
      if (inline !== undefined) return undefined
      values[flag.name] = true
      continue
    }
    const value = inline ?? argv[++i]
    // A value oclif might take as a flag, or refuse: oclif decides.
    if (value === undefined || value === '' || (value.startsWith('-') && value !== '-')) return undefined
    if (flag.options && !flag.options.includes(value)) return undefined
    if (flag.multiple) {
      multipleSeen = true
      const list = values[flag.name]
      if (Array.isArray(list)) list.push(value)
      else values[flag.name] = [value]
    } else {
      if (values[flag.name] !== undefined) return undefined
      values[flag.name] = value
    }
  }
  for (const flag of flags) {
    if (values[flag.name] !== undefined && flag.dependsOn?.some((other) => values[other] === undefined)) return undefined
  }
  if (positionals.length > args.length) return undefined
  const parsedArgs: Record<string, string> = {}
  for (const [index, arg] of args.entries()) {
    const value = positionals[index]
    // A missing argument makes oclif read standard input for it or report it: oclif's to do.
    if (value === undefined) return undefined
    parsedArgs[arg.name] = value
  }
  if (typeof parsedArgs.pipeline !== 'string' || args.length !== 1) return undefined
  // In the order the command declares them, as oclif gives them.
  const ordered = Object.fromEntries(flags.filter((f) => values[f.name] !== undefined).map((f) => [f.name, values[f.name]]))
  return {args: {pipeline: parsedArgs.pipeline}, flags: ordered}
}

/** Every flag and argument in the shape oclif's manifest gives it (named by its key, each attribute of its type). */
function wellFormed(command: ManifestCommand): boolean {
  const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)
  const strings = (value: unknown): boolean => value === undefined || (Array.isArray(value) && value.every((v) => typeof v === 'string'))
  const optionalBoolean = (value: unknown): boolean => value === undefined || typeof value === 'boolean'
  if (!isObject(command) || !isObject(command.flags) || !isObject(command.args)) return false
  const flagsOk = Object.entries(command.flags).every(
    ([key, flag]: [string, unknown]) =>
      isObject(flag) &&
      flag.name === key &&
      (flag.type === 'boolean' || flag.type === 'option') &&
      (flag.char === undefined || (typeof flag.char === 'string' && flag.char.length === 1)) &&
      optionalBoolean(flag.multiple) &&
      optionalBoolean(flag.allowNo) &&
      strings(flag.options) &&
      strings(flag.dependsOn) &&
      ((flag.dependsOn as string[] | undefined) ?? []).every((other) => Object.hasOwn(command.flags, other)),
  )
  return flagsOk && Object.entries(command.args).every(([key, arg]: [string, unknown]) => isObject(arg) && arg.name === key && optionalBoolean(arg.required))
}

/** A flag (already well formed) whose every attribute this parser follows. */
function understood(flag: ManifestFlag): boolean {
  if (!Object.keys(flag).every((k) => FLAG_KEYS.has(k))) return false
  return flag.type === 'option' || (flag.allowNo !== true && flag.multiple !== true && flag.options === undefined)
}

/**
 * Runs `pipe run ARGV` when this parser can read it; returns false, having done nothing, when oclif
 * must (bin/run.js then hands the argv to oclif). `root` is the installation's folder (with a slash).
 */
export async function fastRun(argv: readonly string[], root: URL): Promise<boolean> {
  // oclif's debug output (DEBUG; PIPE_DEBUG, which also prints every process warning with its
  // stack) and its JSON switch by environment are its own to honour.
  if (process.env.DEBUG || process.env.PIPE_DEBUG || process.env.PIPE_CONTENT_TYPE !== undefined) return false
  const command = manifestCommand(root, 'run')
  const parsed = command ? parseRunArgv(argv, command) : undefined
  if (!parsed) return false
  // As oclif's command module does: a reader that closed stdout (`pipe run ... | head`) is not an error.
  // (A stdout written directly, a pipe or a file, has no stream to emit it: std-streams.ts drops its EPIPE.)
  if (stdoutIsStream()) {
    process.stdout.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE') throw error
    })
  }
  delete process.env.PIPE_REDIRECTED
  const output: CommandOutput = {json: parsed.flags.json === true, jsonPrinted: false}
  try {
    const result = await runCommand(parsed.args, parsed.flags, output)
    if (output.json) writeOut(`${jsonText(result)}\n`)
  } catch (raw) {
    const error = reportCommandError(raw instanceof Error ? raw : new Error(String(raw)), 'run', output)
    // oclif ends a failed command with process.exit, pending work or not; so does this.
    process.exit(error.exitCode)
  }
  return true
}

function manifestCommand(root: URL, id: string): ManifestCommand | undefined {
  try {
    const manifest = JSON.parse(readFileSync(new URL('oclif.manifest.json', root), 'utf8')) as {version?: unknown; commands?: Record<string, ManifestCommand>}
    const {name, version, oclif} = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {name?: unknown; version?: unknown; oclif?: {hooks?: unknown; plugins?: unknown; dirname?: unknown}}
    // oclif sets aside (with a warning) a manifest made for another version, and reads the commands themselves.
    if (typeof manifest.version !== 'string' || typeof version !== 'string' || manifest.version.split('-')[0] !== version.split('-')[0]) return undefined
    // A setting of oclif's this path does not follow (more help or version flags, a taxonomy, ...) is oclif's to apply.
    if (typeof oclif !== 'object' || oclif === null || !Object.keys(oclif).every((key) => OCLIF_KEYS.has(key))) return undefined
    // A hook oclif runs around every command, or a plugin (which may bring one), is oclif's to run.
    if (Object.keys(oclif.hooks ?? {}).some((event) => COMMAND_HOOKS.has(event))) return undefined
    const plugins = oclif.plugins ?? []
    if (!Array.isArray(plugins) || plugins.some((plugin) => typeof plugin !== 'string' || !RUN_NEUTRAL_PLUGINS.has(plugin))) return undefined
    // oclif also loads the plugins a user installed or linked, listed in its data folder (and warns
    // when that list cannot be read): with such a list, the argv is oclif's.
    const dirname = typeof oclif.dirname === 'string' ? oclif.dirname : typeof name === 'string' ? name : undefined
    if (dirname === undefined || existsSync(path.join(oclifDataDir(dirname), 'package.json'))) return undefined
    const command = manifest.commands?.[id]
    // A command under the same topic (`run x`), or an alias there or on `run` itself (any command's),
    // would make the argv oclif's to route.
    const routedElsewhere = Object.entries(manifest.commands ?? {}).some(([other, c]) =>
      [...(other === id ? [] : [other]), ...namesIn(c?.aliases), ...namesIn(c?.hiddenAliases)].some((name) => {
        const spelled = name.replaceAll(' ', ':')
        return spelled === id || spelled.startsWith(`${id}:`)
      }),
    )
    if (routedElsewhere) return undefined
    // Its shape is parseRunArgv's to check.
    return command
  } catch {
    return undefined
  }
}

function namesIn(list: unknown): string[] {
  return Array.isArray(list) ? list.filter((name): name is string => typeof name === 'string') : []
}

/** oclif's data folder (Config.dataDir): $PIPE_DATA_DIR, else $XDG_DATA_HOME/DIRNAME, else ~/.local/share/DIRNAME. */
function oclifDataDir(dirname: string): string {
  if (process.env.PIPE_DATA_DIR) return process.env.PIPE_DATA_DIR
  const base = process.env.XDG_DATA_HOME || (process.platform === 'win32' && process.env.LOCALAPPDATA) || path.join(process.env.HOME || os.homedir() || os.tmpdir(), '.local', 'share')
  return path.join(base, dirname)
}
