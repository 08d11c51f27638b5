/**
 * Lets the event loop turn during long runs of work that never waits on it. The file store's
 * writes are synchronous, so a walk of instant steps (a foreach's children, 64 at a time) awaits
 * only promises that are already settled: the microtask queue never empties, and a signal, a
 * child process's exit or a timer is not seen until the whole step is over. Each step of every
 * run and each child's creation pass here; once the budget is spent, every caller waits for the
 * same turn of the loop, so the queue empties within one piece of work of each chain let through,
 * and the loop handles what came in (a SIGTERM's handler runs before the immediate: libuv polls
 * for signals first).
 */
import {monotonicMs} from './monotonic.js'

/** Busy time between two turns of the loop: short enough for Ctrl-C to feel immediate, long enough that a run of slow steps never pays for it. */
const BUDGET_MS = 20
/**
 * Callers let through between two turns. Chains started together run in lockstep: each reads the
 * budget before any of them has done its work, so time alone would let all 64 through at once.
 */
const PASSES = 4

let since = monotonicMs()
let passes = 0
let turn: Promise<void> | undefined

/** Resolves at once while the budget lasts, else at the loop's next turn (one turn shared by every caller, who then reads the budget again). */
export async function breathe(): Promise<void> {
  for (;;) {
    if (turn !== undefined) {
      await turn
      continue
    }
    if (passes < PASSES && monotonicMs() - since < BUDGET_MS) {
      passes++
      return
    }
    turn = new Promise<void>((resolve) =>
      setImmediate(() => {
        turn = undefined
        since = monotonicMs()
        passes = 0
        resolve()
      }),
    )
  }
}
