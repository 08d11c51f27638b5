/**
 * pipe's help: oclif's, with the exit codes and the environment under the root help; with --json,
 * one JSON document for the root, a command, a topic or --version; and an unknown subject is the
 * same error as an unknown command (cli/unknown-command.ts).
 */
import type {Command} from '@oclif/core/command'
import {Help, standardizeIDFromArgv} from '@oclif/core/help'
import type {Config, Topic} from '@oclif/core/interfaces'
import {exitCodeHelp, exitCodeTable} from '../exit-codes.js'
import {compareText} from '../util/order.js'
import {jsonText} from '../util/terminal-text.js'
import {exitUnknownCommand} from './unknown-command.js'

export const environmentHelp: ReadonlyArray<readonly [string, string]> = [
  ['PIPE_STORE', 'the store: a folder, or postgres://user@host:5432/db (default: the nearest .pipe up to the repository root)'],
  [
    'PIPE_CEILING_DIRECTORIES',
    'absolute folders (separated as in PATH) the upward search for .pipe and policy.yaml never climbs into, like GIT_CEILING_DIRECTORIES',
  ],
  ['PIPE_HOME', 'folder of the daily error log, PIPE_HOME/logs/orchestrator-YYYYMMDD.log (default: $XDG_STATE_HOME/pipe/logs, else ~/.local/state/pipe/logs)'],
  ['XDG_STATE_HOME', 'base of the daily error log when PIPE_HOME is not set (default ~/.local/state)'],
  ['OPENAI_API_KEY', 'key for an OpenAI-compatible endpoint (model steps)'],
  ['OPENAI_BASE_URL', 'base URL of an OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1'],
  ['PIPE_INTERACTIVE', '1: prompt for answers and decisions even when stdin is not a terminal; 0: never prompt'],
  ['PIPE_AUDIT_KEY', "key that seals the store's records (HMAC); pipe audit verify needs the same key"],
  ['PIPE_SIGNAL_GRACE_MS', 'how long a run may take to record its state after Ctrl-C or SIGTERM before it is ended (default 5000)'],
  ['PIPE_BWRAP', 'the bubblewrap binary that sandboxes commands (a path; empty: none; default: bwrap on PATH)'],
  ['PIPE_DEBUG', 'print debug output and warnings with their stacks (also DEBUG=*)'],
  ['PIPE_DATA_DIR', 'folder of plugins installed for pipe (default $XDG_DATA_HOME/pipe)'],
  ['PIPE_SIGNING_KEY', 'the Ed25519 private key file pipe attest signs with (default: the key pipe keys generate made)'],
  ['XDG_CONFIG_HOME', 'base of the signing keys folder, XDG_CONFIG_HOME/pipe/keys (default ~/.config)'],
  ['PIPE_CONTENT_TYPE', 'json: every command answers as with --json'],
  ['OTEL_EXPORTER_OTLP_ENDPOINT', 'an OpenTelemetry collector (OTLP/HTTP, e.g. http://127.0.0.1:4318) for spans of runs, steps, model and tool calls'],
  ['NO_COLOR', 'no colours in progress and errors'],
  ['PIPE_FAULT_*', "pipe's own crash tests (PIPE_FAULT_KILL_AT, _TRACE, _PAUSE_AT, _PAUSE_DIR); never set them"],
  ['PIPE_BUILD_CODE_CACHE', "pipe's own build (npm run build); never set it"],
]

/** The subject of a help argv in oclif's id form (`runs:list`): its first words, after any `help`; none when a flag comes first. */
function subjectOf(argv: readonly string[], config: Config): string | undefined {
  const args = argv.filter((a) => a !== '--help' && a !== '--json')
  while (args[0] === 'help') args.shift()
  if (args[0] === undefined || args[0].startsWith('-')) return undefined
  return standardizeIDFromArgv(args, config)[0]
}

export default class PipeHelp extends Help {
  override async showHelp(argv: string[]): Promise<void> {
    if (argv.includes('--json')) return this.showJson(argv)
    const subject = subjectOf(argv, this.config)
    if (subject !== undefined && !this.config.findCommand(subject) && !this.config.findTopic(subject)) exitUnknownCommand(this.config, subject, false)
    await super.showHelp(argv)
  }

  override formatRoot(): string {
    return `${super.formatRoot()}\n\n${this.section('EXIT CODES', exitCodeHelp())}\n\n${this.section(
      'ENVIRONMENT',
      environmentHelp.map(([name, meaning]) => `  ${name.padEnd(22)} ${meaning}`).join('\n'),
    )}`
  }

  /** `pipe --json`, `pipe help runs list --json`, `pipe run --help --json`, `pipe runs --json`: one JSON document. */
  private showJson(argv: readonly string[]): void {
    const subject = subjectOf(argv, this.config)
    if (subject === undefined) return print(rootJson(this.config))
    const command = this.config.findCommand(subject)
    if (command) return print(commandJson(command))
    const topic = this.config.findTopic(subject)
    if (topic) return print(topicJson(topic, this.config))
    exitUnknownCommand(this.config, subject, true)
  }
}

function print(doc: unknown): void {
  process.stdout.write(`${jsonText(doc)}\n`)
}

function summaryOf(command: Command.Loadable): string {
  return command.summary ?? command.description?.split('\n')[0] ?? ''
}

export function rootJson(config: Config): unknown {
  const commands = config.commands
    .filter((c) => !c.hidden)
    .map((c) => ({id: c.id.replace(/:/g, ' '), summary: summaryOf(c)}))
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

export function versionJson(config: Config): unknown {
  return {name: config.bin, version: config.version, node: process.version, platform: `${process.platform}-${process.arch}`}
}

function commandJson(command: Command.Loadable): unknown {
  return {
    id: command.id.replace(/:/g, ' '),
    summary: command.summary ?? '',
    description: command.description ?? '',
    args: Object.values(command.args ?? {}).map((a) => ({name: a.name, description: a.description ?? '', required: Boolean(a.required)})),
    flags: Object.values(command.flags ?? {})
      .filter((f) => !f.hidden)
      .map((f) => ({
        name: f.name,
        ...(f.char ? {char: f.char} : {}),
        description: f.summary ?? f.description ?? '',
        type: f.type,
        ...('options' in f && f.options ? {options: f.options} : {}),
      })),
    examples: (command.examples ?? []).map((e) => (typeof e === 'string' ? e : e.command)),
  }
}

function topicJson(topic: Topic, config: Config): unknown {
  const commands = config.commands
    .filter((c) => !c.hidden && c.id.startsWith(`${topic.name}:`))
    .map((c) => ({id: c.id.replace(/:/g, ' '), summary: summaryOf(c)}))
  return {topic: topic.name.replace(/:/g, ' '), description: topic.description ?? '', commands}
}
