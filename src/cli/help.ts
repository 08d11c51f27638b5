/**
 * pipe's help, from the command manifest (cli/manifest.ts) alone: no command's code is loaded to
 * show it. The root (with the exit codes and the environment), a topic and a command, in the
 * sections oclif's help had (USAGE, ARGUMENTS, FLAGS, GLOBAL FLAGS, DESCRIPTION, EXAMPLES), so the
 * docs that quote them stay true; with --json, one JSON document for each, and for --version.
 */
import {exitCodeHelp, exitCodeTable} from '../exit-codes.js'
import {compareText} from '../util/order.js'
import {jsonText} from '../util/terminal-text.js'
import {writeOut} from './std-streams.js'
import type {CommandMeta, FlagMeta, Manifest} from './manifest.js'

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
  ['PIPE_SIGNING_KEY', 'the Ed25519 private key file pipe attest signs with (default: the key pipe keys generate made)'],
  ['XDG_CONFIG_HOME', 'base of the signing keys folder, XDG_CONFIG_HOME/pipe/keys (default ~/.config)'],
  ['XDG_CACHE_HOME', 'base of the completion scripts pipe autocomplete writes, XDG_CACHE_HOME/pipe/autocomplete (default ~/.cache)'],
  ['PIPE_CONTENT_TYPE', 'json: every command answers as with --json'],
  ['OTEL_EXPORTER_OTLP_ENDPOINT', 'an OpenTelemetry collector (OTLP/HTTP, e.g. http://127.0.0.1:4318) for spans of runs, steps, model and tool calls'],
  ['NO_COLOR', 'no colours in progress and errors'],
  ['PIPE_FAULT_*', "pipe's own crash tests (PIPE_FAULT_KILL_AT, _TRACE, _PAUSE_AT, _PAUSE_DIR); never set them"],
  ['PIPE_BUILD_CODE_CACHE', "pipe's own build (npm run build); never set it"],
]

const WIDTH = 80

/** `text` in lines of at most `width` characters (a longer word stays whole), each paragraph's lines indented by `indent`. */
export function wrap(text: string, indent: number, width = WIDTH): string {
  const pad = ' '.repeat(indent)
  return text
    .split('\n')
    .map((paragraph) => {
      if (paragraph.trim() === '') return ''
      const lines: string[] = []
      let line = ''
      for (const word of paragraph.split(/ +/)) {
        if (line !== '' && indent + line.length + 1 + word.length > width) {
          lines.push(line)
          line = word
        } else line = line === '' ? word : `${line} ${word}`
      }
      lines.push(line)
      return lines.map((l) => pad + l).join('\n')
    })
    .join('\n')
}

function section(title: string, body: string): string {
  return `${title}\n${body}`
}

/** Rows of a name and its text, the texts in one column; a text too long for its line goes on under itself. */
function table(rows: ReadonlyArray<readonly [string, string]>, indent = 2): string {
  const left = Math.max(...rows.map(([name]) => name.length))
  const column = indent + left + 2
  return rows.map(([name, text]) => ' '.repeat(indent) + name.padEnd(left + 2) + wrap(text, column).slice(column)).join('\n')
}

const words = (id: string): string => id.replaceAll(':', ' ')

export function summaryOf(command: CommandMeta): string {
  return command.summary ?? command.description?.split('\n')[0] ?? ''
}

/** The commands a listing shows: not hidden, sorted. */
function visibleCommands(manifest: Manifest): CommandMeta[] {
  return Object.values(manifest.commands)
    .filter((c) => !c.hidden)
    .sort((a, b) => compareText(a.id, b.id))
}

/** The topics that have a command to show. */
function topicsOf(manifest: Manifest): Array<[string, string]> {
  const commands = visibleCommands(manifest)
  return Object.entries(manifest.topics)
    .filter(([name]) => commands.some((c) => c.id.startsWith(`${name}:`)))
    .map(([name, topic]): [string, string] => [name, topic.description])
    .sort((a, b) => compareText(a[0], b[0]))
}

export function versionLine(manifest: Pick<Manifest, 'bin' | 'version'>): string {
  return `${manifest.bin}/${manifest.version} ${process.platform}-${process.arch} node-${process.version}`
}

/** `pipe --help`: what pipe is, its version, its exit codes, what it reads from the environment, its topics and commands. */
export function rootHelp(manifest: Manifest, options: {all?: boolean} = {}): string {
  const commands = visibleCommands(manifest).filter((c) => options.all || !c.id.includes(':'))
  return [
    manifest.description,
    section('VERSION', `  ${versionLine(manifest)}`),
    section('USAGE', `  $ ${manifest.bin} [COMMAND]`),
    section('EXIT CODES', exitCodeHelp().replace(/^/gm, '  ')),
    section('ENVIRONMENT', environmentHelp.map(([name, meaning]) => `    ${name.padEnd(22)} ${meaning}`).join('\n')),
    ...(options.all ? [] : [section('TOPICS', table(topicsOf(manifest)))]),
    section('COMMANDS', table(commands.map((c) => [words(c.id), summaryOf(c)]))),
  ].join('\n\n')
}

/** `pipe runs --help`: a topic's commands. */
export function topicHelp(manifest: Manifest, topic: string): string {
  const commands = visibleCommands(manifest).filter((c) => c.id.startsWith(`${topic}:`))
  return [
    wrap(manifest.topics[topic]?.description ?? '', 0),
    section('USAGE', `  $ ${manifest.bin} ${words(topic)} COMMAND`),
    section('COMMANDS', table(commands.map((c) => [words(c.id), summaryOf(c)]))),
  ].join('\n\n')
}

/** A flag as USAGE and FLAGS show it: `-c, --name=VALUE`, `--[no-]name`. */
function flagLabel(flag: FlagMeta): string {
  const long =
    flag.type === 'boolean'
      ? `--${flag.allowNo ? '[no-]' : ''}${flag.name}`
      : `--${flag.name}=${flag.helpValue ?? (flag.options ? '<option>' : '<value>')}${flag.multiple ? '...' : ''}`
  return flag.char ? `-${flag.char}, ${long}` : long
}

function usageOf(command: CommandMeta, manifest: Manifest): string {
  const parts = [`$ ${manifest.bin} ${words(command.id)}`]
  for (const arg of Object.values(command.args)) parts.push(arg.required ? arg.name.toUpperCase() : `[${arg.name.toUpperCase()}]`)
  for (const flag of Object.values(command.flags).filter((f) => !f.hidden)) {
    const name = flag.char ? `-${flag.char}` : `--${flag.name}`
    const value = flag.type === 'boolean' ? '' : ` ${flag.helpValue ?? flag.options?.join('|') ?? '<value>'}${flag.multiple ? '...' : ''}`
    parts.push(flag.required ? `${name}${value}` : `[${name}${value}]`)
  }
  return wrap(parts.join(' '), 2).replace(/\n {2}/g, '\n    ')
}

function flagText(flag: FlagMeta): string {
  const text = flag.summary ?? flag.description ?? ''
  const extra = [flag.required ? '(required)' : '', flag.default !== undefined && flag.default !== false ? `[default: ${String(flag.default)}]` : '']
  return [text, ...extra].filter(Boolean).join(' ')
}

/** Flags in a table when each fits on its line, else each with its text under it. */
function flagsBlock(flags: FlagMeta[]): string {
  const rows = flags.map((f): [string, string] => [flagLabel(f), flagText(f) + (f.options ? `\n<options: ${f.options.join('|')}>` : '')])
  const left = Math.max(...rows.map(([label]) => label.length))
  if (rows.every(([, text]) => !text.includes('\n') && 2 + left + 2 + text.length <= WIDTH)) return table(rows)
  return rows.map(([label, text]) => `  ${label}\n${wrap(text, 6)}`).join('\n\n')
}

/** Flags with a short letter first (by letter), then the others by name. */
function sortedFlags(flags: FlagMeta[]): FlagMeta[] {
  return [...flags].sort((a, b) => (a.char && b.char ? compareText(a.char, b.char) : a.char ? -1 : b.char ? 1 : compareText(a.name, b.name)))
}

function exampleText(example: CommandMeta['examples'][number], bin: string): string {
  const line = (command: string): string =>
    wrap(command.startsWith(`${bin} `) ? `$ ${command}` : command, 4, WIDTH - 2)
      .split('\n')
      .map((l, i) => (i === 0 ? l : `  ${l}`))
      .join(' \\\n')
  return typeof example === 'string' ? line(example) : `${wrap(example.description, 2)}\n\n${line(example.command)}`
}

/** `pipe run --help`. */
export function commandHelp(manifest: Manifest, command: CommandMeta): string {
  const flags = Object.values(command.flags).filter((f) => !f.hidden)
  const own = sortedFlags(flags.filter((f) => f.helpGroup !== 'GLOBAL'))
  const global = flags.filter((f) => f.helpGroup === 'GLOBAL')
  const args = Object.values(command.args)
  const description = [command.summary, command.description].filter((t): t is string => t !== undefined && t !== '').join('\n\n')
  return [
    ...(command.summary ? [command.summary] : []),
    section('USAGE', usageOf(command, manifest)),
    ...(args.length > 0 ? [section('ARGUMENTS', table(args.map((a) => [a.name.toUpperCase(), a.description ?? ''])))] : []),
    ...(own.length > 0 ? [section('FLAGS', flagsBlock(own))] : []),
    ...(global.length > 0 ? [section('GLOBAL FLAGS', flagsBlock(global))] : []),
    ...(description ? [section('DESCRIPTION', wrap(description, 2))] : []),
    ...(command.examples.length > 0 ? [section('EXAMPLES', command.examples.map((e) => exampleText(e, manifest.bin)).join('\n\n'))] : []),
  ].join('\n\n')
}

export function rootJson(manifest: Manifest): unknown {
  return {
    name: manifest.bin,
    version: manifest.version,
    description: manifest.description,
    commands: visibleCommands(manifest).map((c) => ({id: words(c.id), summary: summaryOf(c)})),
    exit_codes: exitCodeTable,
    environment: environmentHelp.map(([name, meaning]) => ({name, meaning})),
  }
}

export function versionJson(manifest: Pick<Manifest, 'bin' | 'version'>): unknown {
  return {name: manifest.bin, version: manifest.version, node: process.version, platform: `${process.platform}-${process.arch}`}
}

export function commandJson(command: CommandMeta): unknown {
  return {
    id: words(command.id),
    summary: command.summary ?? '',
    description: command.description ?? '',
    args: Object.values(command.args).map((a) => ({name: a.name, description: a.description ?? '', required: Boolean(a.required)})),
    flags: Object.values(command.flags)
      .filter((f) => !f.hidden)
      .map((f) => ({
        name: f.name,
        ...(f.char ? {char: f.char} : {}),
        description: f.summary ?? f.description ?? '',
        type: f.type,
        ...(f.options ? {options: f.options} : {}),
      })),
    examples: command.examples.map((e) => (typeof e === 'string' ? e : e.command)),
  }
}

export function topicJson(manifest: Manifest, topic: string): unknown {
  const commands = visibleCommands(manifest)
    .filter((c) => c.id.startsWith(`${topic}:`))
    .map((c) => ({id: words(c.id), summary: summaryOf(c)}))
  return {topic: words(topic), description: manifest.topics[topic]?.description ?? '', commands}
}

/** A help text or JSON document on stdout (written directly where stdout is a pipe or a file: std-streams.ts). */
export function printHelp(text: string): void {
  writeOut(`${text}\n`)
}

export function printJson(doc: unknown): void {
  writeOut(`${jsonText(doc)}\n`)
}
