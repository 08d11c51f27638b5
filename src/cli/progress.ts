/**
 * Live progress on stderr: a line per step with its status and duration. A child run's lines (a
 * pipeline or foreach step's) are indented one level per parent and say which step and item ran
 * them: `    ✓ each[1] #1 work success 3 ms`. A step whose outcome is a failure (its kind's `fail`,
 * `failure`, or an error), routed or not, is marked `✗`; one that is neither done nor failed (some
 * children failed, a dependency blocked it, a person refused it) is marked `!`.
 */
import type {ProgressEvent} from '../engine/engine.js'
import {firstLine, visibleLine as v} from '../util/terminal-text.js'
import {stderrWriter} from './std-streams.js'

/** Outcomes that are no failure of the step's kind but not its work done either: a ✓ would read as success. */
const HALFWAY = new Set(['blocked', 'partial', 'denied', 'refused'])

export function progressPrinter(stream: {write(text: string): unknown; readonly isTTY?: boolean} = stderrWriter): (event: ProgressEvent) => void {
  const tty = stream.isTTY === true && !process.env.NO_COLOR
  const color = (code: number, text: string): string => (tty ? `\u001B[${code}m${text}\u001B[0m` : text)
  return (event) => {
    // Every value (step ids, reasons, errors quoting a reply) is escaped before pipe's own colours go around it.
    const under = (event.under ?? []).map(v)
    const indent = '  '.repeat(under.length + 1)
    const label = under.length > 0 ? `${color(36, under.join('/'))} ` : ''
    switch (event.type) {
      case 'step_start':
        // Children may run side by side: a transient line per child would overwrite another's.
        if (tty && under.length === 0)
          stream.write(color(2, `  … ${v(event.step)} (${v(event.kind)})${event.attempt > 1 ? ` attempt ${event.attempt}` : ''}\r`))
        break
      case 'step_retry':
        stream.write(
          `${indent}${color(33, '↻')} ${label}${v(event.step)} attempt ${event.attempt} failed (${v(event.error)}); retrying in ${event.delay_ms} ms\n`,
        )
        break
      case 'step_end': {
        // A failure outcome is marked as one even when the pipeline routes it (a QA `fail` sent back to the agent).
        const mark = event.failure ? color(31, '✗') : HALFWAY.has(event.outcome) ? color(33, '!') : color(32, '✓')
        const out = event.spec_version_out ? ` -> ${v(event.spec_version_out)}` : ''
        const clear = tty ? '\u001B[2K' : ''
        // A long error (a cassette miss's diff) is shown once, by the error channel or the snapshot; here its first line.
        const reason = firstLine(event.reason, `pipe snapshot show ${event.run_id} --step ${event.step}`)
        stream.write(
          `${clear}${indent}${mark} ${label}#${event.seq} ${v(event.step)} ${color(1, v(event.outcome))} ${event.duration_ms} ms${out}  ${color(2, v(reason))}\n`,
        )
        break
      }
      case 'step_event': {
        // A line per tool call of an agent step, so a long step shows what it is doing.
        const e = event.event
        const call = `${label}#${event.seq} ${v(event.step)} ${v(e.tool ?? '?')}${e.level ? ` (${v(e.level)})` : ''}`
        const clear = tty ? '\u001B[2K' : ''
        if (e.event === 'tool_call_request') stream.write(`${clear}${indent}  ${color(2, '→')} ${call} ${color(2, v(e.call_id ?? ''))}\n`)
        else
          stream.write(
            `${clear}${indent}  ${e.ok ? color(32, '←') : color(31, '←')} ${call} ${color(1, v(e.decision ?? ''))} ${e.duration_ms ?? 0} ms  ${color(2, v(e.summary ?? ''))}\n`,
          )
        break
      }
      case 'run_status': {
        const where = under.length === 0 && (event.status === 'failed' || event.status === 'blocked') ? 'the error below' : `pipe runs show ${event.run_id}`
        const reason = event.reason ? `: ${v(firstLine(event.reason, where))}` : ''
        if (under.length === 0) stream.write(`${color(1, `run ${v(event.run_id)}`)} ${v(event.status)}${reason}\n`)
        else stream.write(`${indent}${color(1, `run ${v(event.run_id)}`)} (${under.join('/')}) ${v(event.status)}${reason}\n`)
        break
      }
    }
  }
}
