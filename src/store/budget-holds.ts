/**
 * Budget holds (issue 40): what a running step's model requests have spent and have under way,
 * against every budget that covers them, while no snapshot records it yet. Siblings running side by
 * side (a foreach's children, on one process or on several workers) see each other's holds, so
 * together they cannot pass a budget by what is in flight. A hold is never the record of spend:
 * snapshots are (what audit and pipe stats read); a hold whose step has its snapshot is not counted.
 */

/** One running step's share of the budgets it counts toward. */
export interface BudgetHold {
  run_id: string
  step: string
  seq: number
  /** The budgets it counts toward, each `OWNER_RUN:SCOPE` (engine/budget.ts). */
  keys: readonly string[]
  tokens: number
  usd: number
}

export const holdKey = (h: {run_id: string; step: string; seq: number}): string => `${h.run_id}#${h.step}#${h.seq}`

export interface BudgetHolds {
  /**
   * With no other hold on `hold.keys` changing meanwhile: the live holds of other steps on any of
   * those keys go to `decide`; when it says yes, `hold` is put (replacing this step's earlier one).
   * Nothing is held across the request itself, only across the check.
   */
  reserve(hold: BudgetHold, decide: (others: readonly BudgetHold[]) => Promise<boolean>): Promise<boolean>
  /** The step's hold with its amounts now (a reply came: its usage replaces its estimate). */
  settle(hold: BudgetHold): Promise<void>
  /** The run's holds are over (its session ends): its steps' spend is in its snapshots or its pause. */
  release(runId: string): Promise<void>
}

/**
 * The holds of the runs this process drives (the file store and the in-memory one, whose children
 * all run in the process that drives their parent): a process that ends takes its holds with it.
 */
export class ProcessHolds implements BudgetHolds {
  private readonly holds = new Map<string, BudgetHold>()
  private readonly locks = new Map<string, Promise<void>>()

  async reserve(hold: BudgetHold, decide: (others: readonly BudgetHold[]) => Promise<boolean>): Promise<boolean> {
    const unlock = await this.lock([...hold.keys].sort())
    try {
      const own = holdKey(hold)
      const others = [...this.holds.entries()].filter(([key, h]) => key !== own && h.keys.some((k) => hold.keys.includes(k))).map(([, h]) => h)
      if (!(await decide(others))) return false
      this.holds.set(own, {...hold})
      return true
    } finally {
      unlock()
    }
  }

  async settle(hold: BudgetHold): Promise<void> {
    this.holds.set(holdKey(hold), {...hold})
  }

  async release(runId: string): Promise<void> {
    for (const [key, h] of this.holds) if (h.run_id === runId) this.holds.delete(key)
  }

  /** Each key's lock is a chain of promises: the next taker waits for the one before. */
  private async lock(keys: readonly string[]): Promise<() => void> {
    const releases: Array<() => void> = []
    for (const key of keys) {
      const before = this.locks.get(key) ?? Promise.resolve()
      let release!: () => void
      const mine = new Promise<void>((resolve) => (release = resolve))
      const chained = before.then(() => mine)
      this.locks.set(key, chained)
      await before
      releases.push(() => {
        release()
        if (this.locks.get(key) === chained) this.locks.delete(key)
      })
    }
    return () => {
      for (const release of releases.reverse()) release()
    }
  }
}

const opened = new WeakMap<object, ProcessHolds>()

/** The holds a store keeps, or this process's for it (one per store object: two stores' run ids may repeat). */
export function holdsOf(store: {readonly budgetHolds?: BudgetHolds}): BudgetHolds {
  if (store.budgetHolds) return store.budgetHolds
  let holds = opened.get(store)
  if (!holds) opened.set(store, (holds = new ProcessHolds()))
  return holds
}
