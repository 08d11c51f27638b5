/**
 * An unknown command, said one way wherever the router meets one: `pipe valdate`, `pipe runs lst`,
 * `pipe help valdate`, each with --json or without. The error goes through the one error renderer
 * (command-io.ts), with the closest command as a did-you-mean, from the manifest alone.
 */
import {didYouMean} from '../util/suggest.js'
import {PipeError} from '../errors.js'
import type {Manifest} from './manifest.js'

/** The error for `id` (words joined by ':'), with the command or topic the user most likely meant. */
export function unknownCommandError(manifest: Pick<Manifest, 'commands' | 'topics'>, id: string): PipeError {
  const typed = id.split(':')
  const ids = Object.keys(manifest.commands).map((c) => c.replace(/:/g, ' '))
  const topics = Object.keys(manifest.topics)
  // "valdate x" arrives as "valdate:x": match on the command words the user meant.
  const first = typed[0] ?? id
  const words = topics.includes(first) && typed[1] ? `${first} ${typed[1]}` : first
  const guess = didYouMean(typed.slice(0, 2).join(' '), ids) || didYouMean(words, [...ids, ...topics])
  return new PipeError('E_INVALID_ARGS', `unknown command "${words}"${guess}`, {hint: 'pipe --help lists the commands.'})
}
