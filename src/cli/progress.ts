/** Live progress on stderr: a line per step with its status and duration. */
import type {ProgressEvent} from '../engine/engine.js'

export function progressPrinter(stream: NodeJS.WriteStream = process.stderr): (event: ProgressEvent) => void {
  const tty = stream.isTTY === true && !process.env.NO_COLOR
  const color = (code: number, text: string): string => (tty ? `\u001B[${code}m${text}\u001B[0m` : text)
  return (event) => {
    switch (event.type) {
      case 'step_start':
        if (tty) stream.write(color(2, `  … ${event.step} (${event.kind})${event.attempt > 1 ? ` attempt ${event.attempt}` : ''}\r`))
        break
      case 'step_retry':
        stream.write(`  ${color(33, '↻')} ${event.step} attempt ${event.attempt} failed (${event.error}); retrying in ${event.delay_ms} ms\n`)
        break
      case 'step_end': {
        const mark = event.ok ? color(32, '✓') : color(31, '✗')
        const out = event.spec_version_out ? ` -> ${event.spec_version_out}` : ''
        const clear = tty ? '\u001B[2K' : ''
        stream.write(`${clear}  ${mark} #${event.seq} ${event.step} ${color(1, event.outcome)} ${event.duration_ms} ms${out}  ${color(2, event.reason)}\n`)
        break
      }
      case 'run_status':
        stream.write(`${color(1, `run ${event.run_id}`)} ${event.status}${event.reason ? `: ${event.reason}` : ''}\n`)
        break
    }
  }
}
