/** `pipe --json`, `pipe help --json`: the root help as one JSON document (commands, exit codes, environment). */
import {Config} from '@oclif/core/config'
import {exitCodeTable} from '../exit-codes.js'
import {environmentHelp} from './help.js'
import {compareText} from '../util/order.js'
import {jsonText, visibleLine} from '../util/terminal-text.js'

/** bin/run.js prints the answer's document with it: exact, with no character a terminal would act on. */
export {jsonText}

export interface HelpJson {
  name: string
  version: string
  description: string
  commands: Array<{id: string; summary: string}>
  exit_codes: typeof exitCodeTable
  environment: Array<{name: string; meaning: string}>
}

/** Whether argv asks for the root help as JSON: --json with nothing but help words. */
export function wantsHelpJson(argv: readonly string[]): boolean {
  return argv.includes('--json') && argv.every((a) => a === '--json' || a === 'help' || a === '--help' || a === '-h')
}

export async function helpJson(root: string | URL): Promise<HelpJson> {
  const config = await Config.load(typeof root === 'string' ? root : root.toString())
  const commands = config.commands
    .filter((c) => !c.hidden)
    .map((c) => ({id: c.id.replace(/:/g, ' '), summary: c.summary ?? c.description?.split('\n')[0] ?? ''}))
    .sort((a, b) => compareText(a.id, b.id))
  return {
    name: config.bin,
    version: config.version,
    description: typeof config.pjson.description === 'string' ? config.pjson.description : '',
    commands,
    exit_codes: exitCodeTable,
    environment: environmentHelp.map(([name, meaning]) => ({name, meaning})),
  }
}

/** What pipe prints for an argv with --json that oclif would answer with text (help, a topic, the version), or null to run it. */
export interface JsonOnlyAnswer {
  doc: unknown
  exit: number
  /** The error channel's lines for stderr, when the answer is an error. */
  stderr?: string
}

/**
 * `pipe run --help --json`, `pipe help nonsense --json`, `pipe runs --json`, `pipe --version --json`:
 * oclif's help and version take no --json and would print text (or a stack trace), so pipe answers
 * them with one JSON document itself.
 */
export async function jsonOnlyAnswer(root: string | URL, argv: readonly string[]): Promise<JsonOnlyAnswer | null> {
  if (!argv.includes('--json')) return null
  if (wantsHelpJson(argv)) return {doc: await helpJson(root), exit: 0}
  const config = await Config.load(typeof root === 'string' ? root : root.toString())
  const words = argv.filter((a) => !a.startsWith('-'))
  const help = words[0] === 'help' || argv.includes('--help') || argv.includes('-h')
  if (words[0] === 'help') words.shift()
  const version = argv.includes('--version') || argv.includes('-v')
  if (version && words.length === 0) return {doc: {name: config.bin, version: config.version, node: process.version, platform: `${process.platform}-${process.arch}`}, exit: 0}
  let command: (typeof config.commands)[number] | undefined
  for (let n = words.length; n > 0 && !command; n--) command = config.findCommand(words.slice(0, n).join(':'))
  const topicName = words.join(':')
  const topic = config.topics.find((t) => t.name === topicName)
  if (!help && (command || !topic)) return null
  if (command && help) {
    return {
      doc: {
        id: command.id.replace(/:/g, ' '),
        summary: command.summary ?? '',
        description: command.description ?? '',
        args: Object.values(command.args ?? {}).map((a) => ({name: a.name, description: a.description ?? '', required: Boolean(a.required)})),
        flags: Object.values(command.flags ?? {})
          .filter((f) => !f.hidden)
          .map((f) => ({name: f.name, ...(f.char ? {char: f.char} : {}), description: f.summary ?? f.description ?? '', type: f.type, ...('options' in f && f.options ? {options: f.options} : {})})),
        examples: (command.examples ?? []).map((e) => (typeof e === 'string' ? e : e.command)),
      },
      exit: 0,
    }
  }
  if (topic) {
    const commands = config.commands
      .filter((c) => !c.hidden && c.id.startsWith(`${topic.name}:`))
      .map((c) => ({id: c.id.replace(/:/g, ' '), summary: c.summary ?? c.description?.split('\n')[0] ?? ''}))
    return {doc: {topic: topic.name.replace(/:/g, ' '), description: topic.description ?? '', commands}, exit: 0}
  }
  const {ExitCode} = await import('../exit-codes.js')
  const {appendLog} = await import('../log.js')
  const message = `unknown command "${words.join(' ')}"`
  const hint = 'pipe --help lists the commands.'
  const {newTraceId} = await import('../util/trace.js')
  const {errorLines} = await import('./error-channel.js')
  const trace = newTraceId()
  const log = appendLog('ERROR', `[E_INVALID_ARGS] ${message}`, undefined, trace)
  return {
    doc: {error: {code: 'E_INVALID_ARGS', message, hint, exit_code: ExitCode.USAGE, ...(log ? {log} : {}), trace_id: trace}},
    exit: ExitCode.USAGE,
    stderr: errorLines({code: 'E_INVALID_ARGS', message, hint}, trace, log, visibleLine),
  }
}
