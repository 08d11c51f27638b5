/**
 * Budget holds on PostgreSQL (../budget-holds.ts): one row per running step, seen by every worker.
 * A check takes a transaction-scoped advisory lock on each budget it covers, so two siblings on two
 * workers check one after the other, and holds nothing across the request itself. A row is tied to
 * its run's lease (the epoch it was put under): once the holder dies and another takes the run, or
 * its lease runs out, the row is no longer counted, so a crashed holder's hold never leaks.
 */
import type {BudgetHold, BudgetHolds} from '../budget-holds.js'
import {sleep} from '../../util/sleep.js'
import type {PostgresRecords} from './records.js'

interface Row extends Record<string, unknown> {
  run_id: string
  step: string
  seq: number
  keys: string[]
  tokens: string
  usd: string
}

const UPSERT = `INSERT INTO pipe_budget_holds (run_id, step, seq, keys, tokens, usd, epoch)
  SELECT $1, $2, $3, $4, $5, $6, epoch FROM pipe_runs WHERE run_id = $1
  ON CONFLICT (run_id, step, seq) DO UPDATE SET keys = EXCLUDED.keys, tokens = EXCLUDED.tokens, usd = EXCLUDED.usd, epoch = EXCLUDED.epoch`

const values = (h: BudgetHold): unknown[] => [h.run_id, h.step, h.seq, [...h.keys], Math.round(h.tokens), h.usd]

export class PostgresHolds implements BudgetHolds {
  constructor(private readonly store: PostgresRecords) {}

  async reserve(hold: BudgetHold, decide: (others: readonly BudgetHold[]) => Promise<boolean>): Promise<boolean> {
    for (let wait = 5; ; wait = Math.min(wait * 2, 200)) {
      const decided = await this.store.tx(`cannot hold budget for step ${hold.step} of ${hold.run_id}`, async (client) => {
        // Tried, never waited for with a connection taken: `decide` reads the records through the
        // pool, and checks waiting on the lock must not hold every connection it needs.
        for (const key of [...hold.keys].sort()) {
          const {rows} = await client.query<{ok: boolean}>("SELECT pg_try_advisory_xact_lock(hashtextextended('pipe_budget:' || $1, 0)) AS ok", [key])
          if (!rows[0]?.ok) return undefined
        }
        const {rows} = await client.query<Row>(
          `SELECT h.run_id, h.step, h.seq, h.keys, h.tokens::text AS tokens, h.usd::text AS usd FROM pipe_budget_holds h
           JOIN pipe_runs r ON r.run_id = h.run_id AND r.epoch = h.epoch AND r.lease_until > now()
           WHERE h.keys && $1::text[] AND NOT (h.run_id = $2 AND h.step = $3 AND h.seq = $4)`,
          [[...hold.keys], hold.run_id, hold.step, hold.seq],
        )
        const others = rows.map((r) => ({run_id: r.run_id, step: r.step, seq: Number(r.seq), keys: r.keys, tokens: Number(r.tokens), usd: Number(r.usd)}))
        if (!(await decide(others))) return false
        await client.query(UPSERT, values(hold))
        return true
      })
      if (decided !== undefined) return decided
      // Another step is checking the same budget now: a check takes milliseconds, so try again soon.
      await sleep(wait + Math.random() * wait)
    }
  }

  async settle(hold: BudgetHold): Promise<void> {
    await this.store.query(`cannot settle budget of step ${hold.step} of ${hold.run_id}`, UPSERT, values(hold))
  }

  async release(runId: string): Promise<void> {
    await this.store.query(`cannot release budget holds of ${runId}`, 'DELETE FROM pipe_budget_holds WHERE run_id = $1', [runId])
  }
}
