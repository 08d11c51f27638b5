/**
 * Run, spec and evidence ids on the PostgreSQL store, taken from sequences inside the transaction
 * that writes the record (issue 36): `nextval()` locks no row, so a worker stalled inside its step's
 * transaction holds up nobody else's ids, and a step needs no commit of its own to reserve them. A
 * transaction that rolls back leaves a gap, never a repeat.
 *
 * E- is one sequence (pipe_ids_e); R- and S- are counted per day, one sequence a day
 * (pipe_ids_r_20261128), made the first time a process numbers on that day (before the transaction,
 * once per process and day). Inside the transaction the id is numbered in the latest day a sequence
 * exists for, never today's when a later one exists (a clock set back), as the counter rows did.
 * The owner's functions of schema migration 6 do the making and numbering, so a writer's role needs
 * no privilege on sequences. Features (F-), the run index and the ledger log keep their counter
 * rows: a feature is taken once per `pipe run`, and the two logs are chains whose order the row lock keeps.
 */
import type {Pool, PoolClient} from 'pg'
import {todayKey} from '../trail/ids.js'

/** The sequence of an id series ('E', 'R-20261128', 'S-20261128'), or null for a series kept in pipe_counters. */
export function sequenceOf(series: string): string | null {
  if (series === 'E') return 'pipe_ids_e'
  const dated = /^([RS])-(\d{8})$/.exec(series)
  return dated ? `pipe_ids_${dated[1]!.toLowerCase()}_${dated[2]!}` : null
}

/** Sequences this process knows exist, by database: made once per process and day. */
const known = new WeakMap<Pool, Set<string>>()

/** Makes sure today's sequence of a dated series exists, before the transaction that numbers in it. */
export async function ensureDaySequence(pool: Pool, prefix: 'R' | 'S', now: Date): Promise<void> {
  const name = sequenceOf(`${prefix}-${todayKey(prefix, now)}`)!
  let made = known.get(pool)
  if (made?.has(name)) return
  await pool.query('SELECT pipe_day_sequence($1)', [name])
  if (!made) known.set(pool, (made = new Set()))
  made.add(name)
}

/**
 * SQL of one dated id, taken inside a transaction: the latest day's sequence and its next number as
 * 'pipe_ids_s_20261128:12' (parsed by datedNumber); `param` holds 'r' or 's'.
 */
export function nextDatedSql(param: string): string {
  return `pipe_next_dated(${param})`
}

/** SQL of `count` evidence numbers (text[]), taken inside a transaction. */
export function nextEvidenceSql(count: string): string {
  return `pipe_next_evidence(${count})`
}

/** The day and number a nextDatedSql value names: 'pipe_ids_s_20261128:12' is 20261128 and 12. */
export function datedNumber(value: string | null, prefix: 'R' | 'S'): {day: string; n: number} {
  const m = value === null ? null : /^pipe_ids_[rs]_(\d{8}):(\d+)$/.exec(value)
  // ensureDaySequence made today's before the transaction: none found means it was dropped since.
  if (!m) throw new Error(`pipe: no id sequence for ${prefix}- ids in this database (pipe_ids_${prefix.toLowerCase()}_YYYYMMDD)`)
  return {day: m[1]!, n: Number(m[2])}
}

/** Moves a series' sequence to at least `n` (pipe store copy into a database, which only the owner may do). */
export async function advanceSequence(client: PoolClient, series: string, n: number): Promise<void> {
  const name = sequenceOf(series)
  if (name === null || n < 1) return
  await client.query(`CREATE SEQUENCE IF NOT EXISTS ${name}`)
  await client.query(`SELECT setval('${name}', GREATEST($1::bigint, (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM ${name})))`, [n])
}
