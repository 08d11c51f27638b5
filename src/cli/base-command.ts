/**
 * What every pipe command shares: --json, and one rendering of errors (stderr: code, message, a
 * hint with the next action, the log path), with the exit code from the one table.
 */
import {Command} from '@oclif/core/command'
import * as Flags from '@oclif/core/flags'
import {PipeError, toPipeError} from '../errors.js'
import {speak} from './error-channel.js'
import {redact} from '../util/redact.js'
import {jsonText, visible} from '../util/terminal-text.js'

export interface JsonError {
  error: {code: string; message: string; hint?: string; exit_code: number; log?: string}
}

export abstract class PipeCommand extends Command {
  static override enableJsonFlag = true

  static storeFlag = Flags.string({description: 'Store directory (default: $PIPE_STORE or .pipe in the working directory).', helpValue: 'DIR'})

  /** Progress and prompts: stderr, so that stdout keeps to the result (one JSON document with --json). */
  protected progress(message: string): void {
    process.stderr.write(`${visible(message)}\n`)
  }

  /** The --json result: exact, with the characters a terminal would act on as \u escapes (see terminal-text.ts). */
  override logJson(json: unknown): void {
    process.stdout.write(`${jsonText(json)}\n`)
  }

  protected storeDir(flag: string | undefined): string {
    return flag ?? process.env.PIPE_STORE ?? '.pipe'
  }

  /** Set when the command already printed its JSON result, so an error must not print a second document. */
  protected jsonPrinted = false

  override async catch(raw: Error & {oclif?: {exit?: number}; code?: string}): Promise<never> {
    if (raw.code === 'EEXIT') throw raw
    const error = this.classify(raw)
    const log = speak(error, {level: 'ERROR', entry: `[${error.code}] ${this.id ?? 'pipe'}: ${error.message}`, detail: raw.stack})
    if (this.jsonEnabled() && !this.jsonPrinted) {
      const body: JsonError = {error: {code: error.code, message: redact(error.message), exit_code: error.exitCode, ...(error.hint ? {hint: redact(error.hint)} : {}), ...(log ? {log} : {})}}
      process.stdout.write(`${jsonText(body)}\n`)
    }
    process.exitCode = error.exitCode
    throw Object.assign(new Error(error.message), {skipOclifErrorHandling: true, oclif: {exit: error.exitCode}})
  }

  private classify(raw: Error & {oclif?: {exit?: number}; code?: string}): PipeError {
    if (raw instanceof PipeError) return raw
    // oclif's own parse errors: unknown flags, missing arguments, bad options.
    if (raw.oclif?.exit !== undefined) {
      // oclif lists missing arguments on the lines after the first: keep them, on one line.
      const message = raw.message
        .split('\n')
        .map((line) => line.replace(/\s+/g, ' ').trim())
        .filter(Boolean)
        .join(' ')
        .replace(/^(Missing \d+ required args?): (\S+) /, '$1: $2 — ')
      return new PipeError('E_INVALID_ARGS', message, {hint: `Run pipe ${this.id?.replace(/:/g, ' ') ?? ''} --help for usage.`.replace(/ +/g, ' ')})
    }
    return toPipeError(raw)
  }
}
