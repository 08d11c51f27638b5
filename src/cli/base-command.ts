/**
 * What every pipe command shares: --json, and one rendering of errors (stderr: code, message, a
 * hint with the next action, the log path), with the exit code from the one table.
 */
import {Command} from '@oclif/core/command'
import * as Flags from '@oclif/core/flags'
import {reportCommandError, storeDir} from './command-io.js'
import {jsonText, visible} from '../util/terminal-text.js'

export abstract class PipeCommand extends Command {
  static override enableJsonFlag = true

  static storeFlag = Flags.string({
    description:
      'Store: a directory, or a PostgreSQL URL postgres://user@host:5432/db (default: $PIPE_STORE, else the nearest .pipe from the working directory up to the repository root).',
    helpValue: 'DIR|URL',
  })

  /** Progress and prompts: stderr, so that stdout keeps to the result (one JSON document with --json). */
  protected progress(message: string): void {
    process.stderr.write(`${visible(message)}\n`)
  }

  /** The --json result: exact, with the characters a terminal would act on as \u escapes (see terminal-text.ts). */
  override logJson(json: unknown): void {
    process.stdout.write(`${jsonText(json)}\n`)
  }

  protected storeDir(flag: string | undefined): string {
    return storeDir(flag)
  }

  /** Set when the command already printed its JSON result, so an error must not print a second document. */
  protected jsonPrinted = false

  override async catch(raw: Error & {oclif?: {exit?: number}; code?: string}): Promise<never> {
    if (raw.code === 'EEXIT') throw raw
    const error = reportCommandError(raw, this.id, {json: this.jsonEnabled(), jsonPrinted: this.jsonPrinted})
    throw Object.assign(new Error(error.message), {skipOclifErrorHandling: true, oclif: {exit: error.exitCode}})
  }
}
