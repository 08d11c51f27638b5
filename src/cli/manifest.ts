/**
 * The command manifest: every command's id, summary, description, examples, arguments and flags as
 * data. The build writes it (dist/cli/commands.json, scripts/bundle.mjs, from the command classes
 * of src/entry/groups/), and what answers without running a command — `--version`, help,
 * an unknown command, the completion scripts — reads it instead of loading the commands' code.
 */
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import type {ArgDefinitions, Common, FlagDefinitions} from './flags.js'

export type Example = string | {description: string; command: string}

/** What a command class declares (cli/base-command.ts), as the manifest reads it. */
export interface CommandStatics {
  summary?: string
  description?: string
  examples?: Example[]
  args?: ArgDefinitions
  flags?: FlagDefinitions
  strict?: boolean
  hidden?: boolean
  enableJsonFlag?: boolean
}

export interface FlagMeta extends Pick<Common, 'char' | 'description' | 'summary' | 'helpValue' | 'hidden' | 'required'> {
  name: string
  type: 'boolean' | 'option'
  kind?: 'string' | 'integer'
  multiple?: boolean
  allowNo?: boolean
  options?: readonly string[]
  default?: string | number | boolean
  /** GLOBAL: --json, which every command that answers in JSON takes. */
  helpGroup?: string
}

export interface CommandMeta {
  /** oclif's form: words joined by ':' (`runs:list`). */
  id: string
  summary?: string
  description?: string
  examples: Example[]
  args: Record<string, {name: string; description?: string; required?: boolean; default?: string}>
  flags: Record<string, FlagMeta>
  strict: boolean
  hidden?: boolean
  /** The group whose bundle holds the command (src/entry/groups/GROUP.ts, dist/cli/GROUP.cjs): what the router loads to run it. */
  group: string
}

export interface Manifest {
  format: 1
  bin: string
  version: string
  description: string
  topics: Record<string, {description: string}>
  commands: Record<string, CommandMeta>
}

/** The topics: the first word of commands that have more words, and what `pipe TOPIC --help` says of it. */
export const TOPICS: Record<string, string> = {
  runs: "List runs and show one run's timeline.",
  snapshot: "Read the snapshots a run's steps left.",
  spec: 'Show, list and compare immutable spec versions.',
  audit: 'Verify the audit trail: hashes, chains and links.',
  policy: 'Check policy.yaml and ask what it allows.',
  ledger: 'The publish ledger: one entry per feature, target and spec version.',
  pipeline: 'Inspect a pipeline as composed from the pipelines it extends.',
  store: 'Move a store: a folder or a PostgreSQL database, either way.',
  attest: 'Sign what a run made (in-toto, SLSA provenance) and verify it offline.',
  keys: 'Ed25519 signing keys for pipe attest.',
  schedule: "A pipeline's schedules: their next and last firings, and firing what is due.",
}

export const JSON_FLAG: FlagMeta = {name: 'json', type: 'boolean', description: 'Format output as json.', helpGroup: 'GLOBAL'}

/** `<%= config.bin %> <%= command.id %>` in a command's help text, as the help shows it. */
function filled(text: string, id: string): string {
  return text.replaceAll('<%= config.bin %>', 'pipe').replaceAll('<%= command.id %>', id.replaceAll(':', ' '))
}

/** One command's entry, from its class. */
export function describeCommand(id: string, command: CommandStatics, group: string): CommandMeta {
  const flags: Record<string, FlagMeta> = {}
  if (command.enableJsonFlag !== false) flags.json = JSON_FLAG
  for (const [name, flag] of Object.entries(command.flags ?? {})) {
    const {__value: _, exclusive: _e, dependsOn: _d, relationships: _r, ...rest} = flag as typeof flag & {__value?: unknown}
    flags[name] = {...(rest as Omit<FlagMeta, 'name'>), name}
  }
  const args = Object.fromEntries(Object.entries(command.args ?? {}).map(([name, arg]) => [name, {...arg, name}]))
  return {
    id,
    ...(command.summary !== undefined ? {summary: filled(command.summary, id)} : {}),
    ...(command.description !== undefined ? {description: filled(command.description, id)} : {}),
    examples: (command.examples ?? []).map((e) =>
      typeof e === 'string' ? filled(e, id) : {description: filled(e.description, id), command: filled(e.command, id)},
    ),
    args,
    flags,
    strict: command.strict !== false,
    ...(command.hidden ? {hidden: true} : {}),
    group,
  }
}

export function describeCommands(commands: Record<string, CommandStatics>, version: string, description: string, group: string): Manifest {
  return {
    format: 1,
    bin: BIN,
    version,
    description,
    topics: Object.fromEntries(Object.entries(TOPICS).map(([name, text]) => [name, {description: text}])),
    commands: Object.fromEntries(Object.entries(commands).map(([id, command]) => [id, describeCommand(id, command, group)])),
  }
}

/** The groups' manifests as the installation's one: a command in two groups is the build's mistake, said. */
export function mergeManifests(parts: readonly Manifest[]): Manifest {
  const commands: Record<string, CommandMeta> = {}
  for (const part of parts)
    for (const [id, command] of Object.entries(part.commands)) {
      if (commands[id]) throw new Error(`the command ${id} is in the groups ${commands[id].group} and ${command.group} (src/entry/groups/)`)
      commands[id] = command
    }
  return {...parts[0]!, commands}
}

export const MANIFEST_FILE = path.join('dist', 'cli', 'commands.json')

const BIN = 'pipe'
const DAMAGED_HINT = 'Build pipe again (npm run build) or reinstall it.'

/**
 * What `--version` says: the version in the installation's package.json (3 KB), the one the build
 * wrote into the manifest, whose 90 KB cost ~1.5 ms to parse (bench/README.md, "Issue 38: a leaner loader").
 */
export function readVersion(root: string): Pick<Manifest, 'bin' | 'version'> {
  try {
    const {version} = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as {version?: unknown}
    if (typeof version === 'string') return {bin: BIN, version}
  } catch {
    // Said below, as for a package.json without a version.
  }
  throw new PipeError('E_INTERNAL', "the installation's package.json is missing or damaged", {hint: DAMAGED_HINT})
}

/** The manifest of the installation in `root`. */
export function readManifest(root: string): Manifest {
  try {
    const manifest = JSON.parse(readFileSync(path.join(root, MANIFEST_FILE), 'utf8')) as Manifest
    if (manifest?.format === 1 && typeof manifest.commands === 'object') return manifest
  } catch {
    // Said below, as for a manifest of another format.
  }
  throw new PipeError('E_INTERNAL', `the installation's ${MANIFEST_FILE} is missing or damaged`, {hint: DAMAGED_HINT})
}
