/**
 * An unknown command, said one way wherever oclif meets one: `pipe valdate` (the command_not_found
 * hook), `pipe help valdate` (the help class), each with --json or without. The error goes through
 * the one error renderer (command-io.ts), with the closest command as a did-you-mean.
 */
import type {Config} from '@oclif/core/config'
import {didYouMean} from '../util/suggest.js'
import {PipeError} from '../errors.js'
import {reportCommandError} from './command-io.js'

/** The error for `id` (oclif's form: words joined by ':'), with the command or topic the user most likely meant. */
export function unknownCommandError(config: Pick<Config, 'commandIDs' | 'topics'>, id: string): PipeError {
  const typed = id.split(':')
  const ids = config.commandIDs.map((c) => c.replace(/:/g, ' '))
  const topics = config.topics.map((t) => t.name)
  // "valdate x" arrives as "valdate:x": match on the command words the user meant.
  const first = typed[0] ?? id
  const words = topics.includes(first) && typed[1] ? `${first} ${typed[1]}` : first
  const guess = didYouMean(typed.slice(0, 2).join(' '), ids) || didYouMean(words, [...ids, ...topics])
  return new PipeError('E_INVALID_ARGS', `unknown command "${words}"${guess}`, {hint: 'pipe --help lists the commands.'})
}

/** Reports the unknown command (stderr, the log, and the JSON error with --json) and ends the process with its exit code. */
export function exitUnknownCommand(config: Pick<Config, 'commandIDs' | 'topics'>, id: string, json: boolean): never {
  const error = reportCommandError(unknownCommandError(config, id), undefined, {json, jsonPrinted: false})
  process.exit(error.exitCode)
}
