/**
 * The time a run spent not driven before the session that drives it now, read from its timeline,
 * for its trace: waiting on a queue (created by pipe run --detach, or handed back to its queue with
 * a person's answer) and waiting for a person (from its pause to the answer, review or
 * confirmation). The session's own span is the resumption; these are the gaps before it.
 */
import type {Interval} from '../telemetry/tracing.js'
import type {RunEvent} from '../types/run.js'

/** A person's input that ends a wait, by its timeline line, and what the run waited for. */
const INPUTS: Record<string, string> = {answers_given: 'answers', review_given: 'review', confirm_given: 'confirm'}
/** The lines that start a session of the run: what came after the last of them is the gap. */
const SESSIONS = new Set(['started', 'resumed', 'redriven'])

/**
 * The gaps before `now` since the run's last session: `queued` says the run waits on a queue for a
 * worker (a detached run), so the time from its creation, or from the input that handed it back,
 * to now was spent queued.
 */
export function waitsBefore(events: readonly RunEvent[], now: Date, queued: boolean): Interval[] {
  let last = -1
  for (let i = events.length - 1; i >= 0; i--)
    if (SESSIONS.has(events[i]!.event)) {
      last = i
      break
    }
  const out: Interval[] = []
  const since = events.slice(last + 1)
  if (last === -1 && queued) {
    // Never driven: on its queue from its creation.
    const created = events.find((e) => e.event === 'created')
    if (created) out.push({name: 'queued', start: new Date(created.at), end: now, attributes: {'pipe.wait': 'queue'}})
    return out
  }
  const paused = since.findLast((e) => e.event === 'paused')
  if (!paused) return out
  const input = since.slice(since.indexOf(paused) + 1).find((e) => INPUTS[e.event] !== undefined)
  const kind = input ? INPUTS[input.event]! : 'input'
  const answered = input ? new Date(input.at) : now
  out.push({
    name: `await ${kind}`,
    start: new Date(paused.at),
    end: answered,
    attributes: {'pipe.wait': 'person', 'pipe.awaiting': kind, ...(paused.step ? {'pipe.step': paused.step} : {})},
  })
  // A detached run's input hands it back to its queue: a worker takes it from there.
  if (queued && input) out.push({name: 'queued', start: answered, end: now, attributes: {'pipe.wait': 'queue'}})
  return out
}
