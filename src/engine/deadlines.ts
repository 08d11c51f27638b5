/**
 * Step timeouts on one timer per process. A timer per step (and its clearTimeout) cost more CPU
 * than a cheap step itself; steps run one after another (or a few side by side in a foreach), and
 * their deadlines are minutes away, so one timer set for the earliest deadline serves them all.
 * The timer keeps the process alive only while a deadline is pending, as a step's own timer did:
 * a step that never settles still ends by its timeout, never by the process quietly exiting.
 * Deadlines are on the monotonic clock, as a timer is: a wall clock set back (NTP, a resumed VM)
 * must not push a step's timeout out by as much.
 */
import {monotonicMs as now} from '../util/monotonic.js'

interface Deadline {
  at: number
  fire: () => void
}

const pending = new Set<Deadline>()
let timer: NodeJS.Timeout | undefined
let timerAt = Number.POSITIVE_INFINITY

/** The longest wait one Node timer holds: a longer one fires after 1 ms (TimeoutOverflowWarning). */
const LONGEST_TIMER_MS = 2 ** 31 - 1

function arm(at: number): void {
  if (timer) clearTimeout(timer)
  timerAt = at
  // A deadline further out than one timer can wait is reached by re-arming at each expiry.
  timer = setTimeout(expire, Math.min(LONGEST_TIMER_MS, Math.max(0, at - now())))
}

function expire(): void {
  timer = undefined
  timerAt = Number.POSITIVE_INFINITY
  const time = now()
  let next = Number.POSITIVE_INFINITY
  const due: Deadline[] = []
  for (const deadline of pending) {
    if (deadline.at <= time) due.push(deadline)
    else next = Math.min(next, deadline.at)
  }
  // A timer late by more than the gap between deadlines (a busy machine) finds several due at once:
  // they fire earliest first, as they would have on time, not in the order they were set.
  due.sort((a, b) => a.at - b.at)
  for (const deadline of due) {
    pending.delete(deadline)
    deadline.fire()
  }
  if (next !== Number.POSITIVE_INFINITY) arm(next)
}

/** Calls `fire` after `ms` unless the returned function is called first. */
export function deadline(ms: number, fire: () => void): () => void {
  const entry: Deadline = {at: now() + ms, fire}
  pending.add(entry)
  if (entry.at < timerAt) arm(entry.at)
  else timer?.ref()
  return () => {
    pending.delete(entry)
    // Kept armed for the next step's deadline, but no longer holding the process open.
    if (pending.size === 0) timer?.unref()
  }
}
