/**
 * What every pipe command shares: its declarations (summary, description, examples, args, flags,
 * as oclif's commands declared them), parsing (cli/parser.ts), --json, and one rendering of errors
 * (stderr: code, message, a hint with the next action, the log path), with the exit code from the
 * one table. A command is run by `execute`, from src/entry/main.ts once the router (cli/router.ts)
 * has found it in the manifest.
 */
import {inspect} from 'node:util'
import type {ArgDefinitions, FlagDefinitions, InferredArgs, InferredFlags} from './flags.js'
import * as Flags from './flags.js'
import type {Example} from './manifest.js'
import {parseArgv} from './parser.js'
import {reportCommandError, storeDir} from './command-io.js'
import {closeCommandStores} from '../store/open.js'
import {jsonText, visible} from '../util/terminal-text.js'
import {writeOut} from './std-streams.js'

/** What a command knows of the CLI it runs in. */
export interface Config {
  bin: string
  version: string
  /** The installation's folder. */
  root: string
}

/** `this.exit(code)`: ends the command with that exit code, nothing said. */
class Exit extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`)
  }
}

export interface CommandClass {
  new (argv: string[], config: Config): PipeCommand
  id: string
  flags: FlagDefinitions
  args: ArgDefinitions
  strict: boolean
  enableJsonFlag: boolean
}

export abstract class PipeCommand {
  /** Set by the router from the command map's key (`runs:list`). */
  static id = ''
  static summary?: string
  static description?: string
  static examples?: Example[]
  static args: ArgDefinitions = {}
  static flags: FlagDefinitions = {}
  /** Whether words and flags the command does not declare are errors (else they are left in argv). */
  static strict = true
  static hidden = false
  static enableJsonFlag = true

  static storeFlag = Flags.string({
    description:
      'Store: a directory, or a PostgreSQL URL postgres://user@host:5432/db (default: $PIPE_STORE, else the nearest .pipe from the working directory up to the repository root).',
    helpValue: 'DIR|URL',
  })

  /**
   * Runs the command on `argv` (the words after its id); its result, when it returns one and --json
   * is on, is the JSON document on stdout. Returns the exit code of a failure, said already.
   */
  static async execute(this: CommandClass, id: string, argv: string[], config: Config): Promise<number | undefined> {
    this.id = id
    const command = new this(argv, config)
    let result: unknown
    try {
      result = await command.run()
    } catch (raw) {
      if (raw instanceof Exit) return raw.code
      const error = raw instanceof Error ? raw : new Error(String(raw))
      return reportCommandError(error, id, {json: command.jsonEnabled(), jsonPrinted: command.jsonPrinted}).exitCode
    } finally {
      // A database store's pool ends with the command that opened it (store/open.ts).
      closeCommandStores()
    }
    if (result !== undefined && result !== null && command.jsonEnabled()) command.logJson(result)
    return undefined
  }

  readonly id: string

  constructor(
    /** The words after the command's id, as given. */
    readonly argv: string[],
    readonly config: Config,
  ) {
    this.id = (this.constructor as CommandClass).id
  }

  abstract run(): Promise<unknown>

  /** The flags, arguments and other words of this command's argv, checked against the declarations of `command`. */
  protected async parse<F extends FlagDefinitions, A extends ArgDefinitions>(command: {
    flags?: F
    args?: A
    strict?: boolean
    enableJsonFlag?: boolean
  }): Promise<{flags: InferredFlags<F> & {json?: boolean}; args: InferredArgs<A>; argv: unknown[]}> {
    const flags: FlagDefinitions = {...(command.flags ?? {})}
    if (command.enableJsonFlag !== false) flags.json = Flags.boolean({description: 'Format output as json.'})
    const parsed = parseArgv(this.argv, {command: this.id.replaceAll(':', ' '), flags, args: command.args ?? {}, strict: command.strict !== false})
    return parsed as unknown as {flags: InferredFlags<F> & {json?: boolean}; args: InferredArgs<A>; argv: unknown[]}
  }

  /** --json before any --, or PIPE_CONTENT_TYPE=json, for a command that answers in JSON. */
  jsonEnabled(): boolean {
    if (!(this.constructor as CommandClass).enableJsonFlag) return false
    if (process.env.PIPE_CONTENT_TYPE?.toLowerCase() === 'json') return true
    const end = this.argv.indexOf('--')
    const json = this.argv.indexOf('--json')
    return json !== -1 && (end === -1 || json < end)
  }

  /** A line on stdout, unless the answer is JSON. */
  log(message: unknown = ''): void {
    if (!this.jsonEnabled()) process.stdout.write(`${typeof message === 'string' ? message : inspect(message)}\n`)
  }

  /** A warning on stderr, unless the answer is JSON. */
  warn(input: string | Error): string | Error {
    if (!this.jsonEnabled()) process.stderr.write(`Warning: ${visible(typeof input === 'string' ? input : input.message)}\n`)
    return input
  }

  /** Ends the command with `code`. */
  exit(code = 0): never {
    throw new Exit(code)
  }

  /** Progress and prompts: stderr, so that stdout keeps to the result (one JSON document with --json). */
  protected progress(message: string): void {
    process.stderr.write(`${visible(message)}\n`)
  }

  /** The --json result: exact, with the characters a terminal would act on as \u escapes (see terminal-text.ts). */
  logJson(json: unknown): void {
    writeOut(`${jsonText(json)}\n`)
  }

  protected storeDir(flag: string | undefined): string {
    return storeDir(flag)
  }

  /** Set when the command already printed its JSON result, so an error must not print a second document. */
  protected jsonPrinted = false
}
