/**
 * The CLI's one path from argv to a command. `--version` (from package.json alone) and what the
 * manifest (cli/manifest.ts) answers — help for the root, a topic or a command, an unknown command
 * with its did-you-mean — are answered here, before any command's code is loaded; every other argv names a command, whose
 * group's code `load` brings (that group's bundle, src/entry/groups/) and which parses its own flags
 * (cli/base-command.ts). Every failure is said by the one error renderer (command-io.ts).
 */
import {addProcessSecrets, fixSecretEnvironment} from '../util/redact.js'
import type {Config} from './base-command.js'
import {commandHelp, commandJson, printHelp, printJson, rootHelp, rootJson, topicHelp, topicJson, versionJson, versionLine} from './help.js'
import type {CommandMeta, Manifest} from './manifest.js'
import {redactStandardStreams} from './std-streams.js'
import {unknownCommandError} from './unknown-command.js'

/** What a group's bundle exports (src/entry/main.ts). */
export interface Cli {
  /** Runs the command `id` on `argv`; the exit code of a failure it said, else undefined. */
  execute(id: string, argv: string[], config: Config): Promise<number | undefined>
}

export interface Installation {
  /** The installation's folder. */
  root: string
  manifest(): Manifest
  /** What `--version` says: read without the manifest. */
  version(): Pick<Manifest, 'bin' | 'version'>
  /** The code of the commands of `group` (the manifest's, cli/manifest.ts): called only to run one of them. */
  load(group: string): Cli | Promise<Cli>
}

/** The command argv names (its id in words, longest first) and the words after it; a topic when the words name one and no command. */
export function resolve(manifest: Manifest, argv: readonly string[]): {command?: CommandMeta; topic?: string; id: string; rest: string[]} {
  let words = 0
  while (words < argv.length && !argv[words]!.startsWith('-')) words++
  for (let n = words; n > 0; n--) {
    const id = argv.slice(0, n).join(':')
    const command = manifest.commands[id]
    if (command) return {command, id, rest: argv.slice(n)}
  }
  const topic = argv.slice(0, words).join(':')
  if (words > 0 && manifest.topics[topic] !== undefined) return {topic, id: topic, rest: argv.slice(words)}
  // "valdate x" is said as "valdate:x": the unknown-command error reads the first two words.
  return {id: words > 0 ? argv.slice(0, Math.min(words, 2)).join(':') : (argv[0] ?? ''), rest: argv.slice(words)}
}

/** Whether argv asks for help (before any --): --help, or -h where the command gives -h no meaning of its own. */
function asksHelp(argv: readonly string[], command?: CommandMeta): boolean {
  const end = argv.indexOf('--')
  const flags = end === -1 ? argv : argv.slice(0, end)
  const h = !Object.values(command?.flags ?? {}).some((f) => f.char === 'h')
  return flags.includes('--help') || (h && flags.includes('-h'))
}

/** `pipe help [WORDS] [--json] [-n]`, or the help a --help asks for: the root's, a topic's or a command's. */
export function showHelp(manifest: Manifest, argv: readonly string[]): void {
  const json = argv.includes('--json')
  const subject = argv.filter((a) => !a.startsWith('-'))
  if (subject.length === 0) {
    if (json) return printJson(rootJson(manifest))
    return printHelp(rootHelp(manifest, {all: argv.includes('-n') || argv.includes('--nested-commands')}))
  }
  const found = resolve(manifest, subject)
  if (found.command && found.rest.length === 0) return json ? printJson(commandJson(found.command)) : printHelp(commandHelp(manifest, found.command))
  if (found.topic !== undefined && found.rest.length === 0)
    return json ? printJson(topicJson(manifest, found.topic)) : printHelp(topicHelp(manifest, found.topic))
  throw unknownCommandError(manifest, found.command ? `${found.id}:${found.rest[0]}` : found.id)
}

/**
 * Runs `pipe ARGV`: answers it from the manifest, or runs its command. Returns the exit code of a
 * failure, said already, which the caller ends the process with (boot.ts); undefined when the
 * command ended without one and the process ends with its exitCode once its work is done.
 */
export async function route(argv: string[], installation: Installation): Promise<number | undefined> {
  // Before anything is printed or written: the credentials this process was given are known, and stdout and stderr redact.
  addProcessSecrets(argv)
  fixSecretEnvironment()
  redactStandardStreams()
  let id: string | undefined
  try {
    const first = argv[0]
    if (first === '--version' || first === '-v') {
      const about = installation.version()
      if (argv.includes('--json')) printJson(versionJson(about))
      else printHelp(versionLine(about))
      return undefined
    }
    const manifest = installation.manifest()
    const help = (words: readonly string[]): undefined => {
      showHelp(manifest, words)
      return undefined
    }
    if (first === undefined || first === '--help' || first === '-h' || first === '--json') return help(argv)
    if (first === 'help') return help(argv.slice(1))
    const found = resolve(manifest, argv)
    if (found.command === undefined) {
      if (found.topic !== undefined) return help(argv)
      throw unknownCommandError(manifest, found.id)
    }
    if (asksHelp(found.rest, found.command)) return help([...argv.slice(0, argv.length - found.rest.length), ...found.rest.filter((a) => a === '--json')])
    id = found.id
    const cli = await installation.load(found.command.group)
    const config: Config = {bin: manifest.bin, version: manifest.version, root: installation.root}
    return await cli.execute(found.id, found.rest, config)
  } catch (raw) {
    // What no command caught: a damaged installation, an unknown command, or a bug of pipe's.
    const error = raw instanceof Error ? raw : new Error(String(raw))
    // The error renderer, the log and what they import, only when there is an error to say.
    const {reportCommandError} = await import('./command-io.js')
    return reportCommandError(error, id, {json: argv.includes('--json'), jsonPrinted: false}).exitCode
  }
}
