/** oclif's command_not_found hook: the error channel's format, with the closest command. */
import type {Hook} from '@oclif/core/hooks'
import {didYouMean} from '../util/suggest.js'
import {ExitCode} from '../exit-codes.js'
import {appendLog} from '../log.js'
import {newTraceId} from '../util/trace.js'
import {errorLines} from './error-channel.js'
import {jsonText, visible, visibleLine} from '../util/terminal-text.js'

const hook: Hook<'command_not_found'> = async function (options) {
  const typed = options.id.split(':')
  const ids = options.config.commandIDs.map((id) => id.replace(/:/g, ' '))
  const topics = options.config.topics.map((t) => t.name)
  // "valdate x" arrives as "valdate:x": match on the command words the user meant.
  const first = typed[0] ?? options.id
  const words = topics.includes(first) && typed[1] ? `${first} ${typed[1]}` : first
  const guess = didYouMean(typed.slice(0, 2).join(' '), ids) || didYouMean(words, [...ids, ...topics])
  const message = `unknown command "${words}"${guess}`
  // What was typed is echoed back: escaped on the terminal (and by appendLog in the log), exact in --json.
  const shown = `unknown command "${visibleLine(words)}"${visible(guess)}`
  const hint = 'pipe --help lists the commands.'
  const trace = newTraceId()
  const log = appendLog('ERROR', `[E_INVALID_ARGS] ${message}`, undefined, trace)
  process.stderr.write(errorLines({code: 'E_INVALID_ARGS', message: shown, hint}, trace, log, (text) => text))
  // --json holds here too: stdout gets the error document every command gives.
  if ([...(options.argv ?? []), ...process.argv.slice(2)].includes('--json')) {
    process.stdout.write(`${jsonText({error: {code: 'E_INVALID_ARGS', message, hint, exit_code: ExitCode.USAGE, ...(log ? {log} : {}), trace_id: trace}})}\n`)
  }
  process.exit(ExitCode.USAGE)
}

export default hook
