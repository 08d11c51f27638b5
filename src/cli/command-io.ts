/**
 * What every command shares: the store folder, and the one rendering of errors (stderr: code,
 * message, a hint with the next action, the log path and trace id; the JSON error with --json) with
 * the exit code from the one table. Commands (base-command.ts), an unknown command
 * (unknown-command.ts) and what no command caught (router.ts) all report through reportCommandError.
 */
import path from 'node:path'
import {PipeError, toPipeError} from '../errors.js'
import {findUpward} from '../util/discover.js'
import {speak} from './error-channel.js'
import {redact} from '../util/redact.js'
import {jsonText} from '../util/terminal-text.js'
import {writeOut} from './std-streams.js'

export interface JsonError {
  error: {code: string; message: string; hint?: string; exit_code: number; log?: string; trace_id: string}
}

/** How a command's output goes: with --json, and whether it already printed its JSON result. */
export interface CommandOutput {
  json: boolean
  /** Set when the command already printed its JSON result, so an error must not print a second document. */
  jsonPrinted: boolean
}

/**
 * The store a command uses: --store, else $PIPE_STORE, else the nearest .pipe from the working
 * directory up to the repository root (as git finds .git), else where a first run creates one: the
 * repository root's .pipe inside a git repository, the working directory's outside one.
 */
export function storeDir(flag: string | undefined, cwd = process.cwd()): string {
  if (flag !== undefined) return flag
  if (process.env.PIPE_STORE !== undefined) return process.env.PIPE_STORE
  const {found, repoRoot} = findUpward(cwd, '.pipe', 'dir')
  const dir = found ?? path.join(repoRoot ?? cwd, '.pipe')
  // The working directory's own store keeps its short name in what commands print.
  return path.dirname(dir) === path.resolve(cwd) ? '.pipe' : dir
}

/** Says an error on the error channel (and as the JSON document with --json), sets the exit code, and returns it classified. */
export function reportCommandError(raw: Error, id: string | undefined, output: CommandOutput): PipeError {
  const error = classify(raw)
  const {log, trace_id} = speak(error, {level: 'ERROR', entry: `[${error.code}] ${id ?? 'pipe'}: ${error.message}`, detail: raw.stack})
  if (output.json && !output.jsonPrinted) {
    const body: JsonError = {
      error: {
        code: error.code,
        message: redact(error.message),
        exit_code: error.exitCode,
        ...(error.hint ? {hint: redact(error.hint)} : {}),
        ...(log ? {log} : {}),
        trace_id,
      },
    }
    writeOut(`${jsonText(body)}\n`)
  }
  process.exitCode = error.exitCode
  return error
}

function classify(raw: Error): PipeError {
  // A parse error (cli/parser.ts) is a PipeError already: E_INVALID_ARGS with the command's help as its hint.
  return raw instanceof PipeError ? raw : toPipeError(raw)
}
