/**
 * The error channel (seed 002), said one way by every command: the daily log gets an entry, and
 * stderr gets `Error [CODE]: message`, `Try this:` with the next action, and `Log:` with its path.
 */
import {appendLog} from '../log.js'
import {redact} from '../util/redact.js'
import {visible} from '../util/terminal-text.js'
import {writeErr} from './std-streams.js'

/** Writes the log entry and the stderr lines; returns the log's path (null when it could not be written). */
export function speak(error: {code: string; message: string; hint?: string | undefined}, log: {level: 'ERROR' | 'WARN'; entry: string; detail?: string | undefined}): string | null {
  const file = appendLog(log.level, log.entry, log.detail)
  // Messages quote model replies, file content and names: shown escaped (the log escapes its entry itself).
  const lines = [`Error [${visible(error.code)}]: ${visible(redact(error.message))}`]
  if (error.hint) lines.push(`Try this: ${visible(redact(error.hint))}`)
  if (file) lines.push(`Log: ${file}`)
  writeErr(`${lines.join('\n')}\n`)
  return file
}
