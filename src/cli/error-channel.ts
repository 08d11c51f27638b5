/**
 * The error channel (seed 002), said one way by every command: the daily log gets an entry, and
 * stderr gets `Error [CODE]: message`, `Try this:` with the next action, `Log:` with its path and
 * `Trace:` with the error's trace id (seed 000), which the log entry carries too (`trace=ID`), as do
 * the failing step's snapshot and the run's event when the error is a run's.
 */
import {appendLog} from '../log.js'
import {redact} from '../util/redact.js'
import {visible, visibleLine} from '../util/terminal-text.js'
import {newTraceId} from '../util/trace.js'
import {writeErr} from './std-streams.js'

export interface Spoken {
  /** The log's path; null when it could not be written. */
  log: string | null
  trace_id: string
}

/** Writes the log entry and the stderr lines. An error recorded already (a run's) brings its trace id; any other gets one here. */
export function speak(
  error: {code: string; message: string; hint?: string | undefined; trace_id?: string | undefined},
  log: {level: 'ERROR' | 'WARN'; entry: string; detail?: string | undefined},
): Spoken {
  const trace = error.trace_id ?? newTraceId()
  const file = appendLog(log.level, log.entry, log.detail, trace)
  writeErr(errorLines(error, trace, file))
  return {log: file, trace_id: trace}
}

/** The stderr lines of an error. Messages quote model replies, file content and names: shown escaped (the log escapes its entry itself). */
export function errorLines(
  error: {code: string; message: string; hint?: string | undefined},
  trace: string,
  file: string | null,
  escape: (text: string) => string = (text) => visible(redact(text)),
): string {
  const lines = [`Error [${visibleLine(error.code)}]: ${escape(error.message)}`]
  if (error.hint) lines.push(`Try this: ${escape(error.hint)}`)
  if (file) lines.push(`Log: ${file}`)
  lines.push(`Trace: ${visibleLine(trace)}`)
  return `${lines.join('\n')}\n`
}
