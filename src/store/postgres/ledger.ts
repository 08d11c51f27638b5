/**
 * The publish ledger on PostgreSQL: one row per idempotency key (the entry, sealed), and a chained,
 * append-only log with one line per write (the key and the entry's seal), both in one transaction,
 * so audit verify tells a rolled back or re-sealed entry from the one pipe wrote. One publisher per
 * key at a time, across machines, by an advisory lock on the key.
 */
import {PipeError} from '../../errors.js'
import {check, describeErrors} from '../../schema/registry.js'
import type {LedgerEntry} from '../../types/ledger.js'
import {redactDeep} from '../../util/redact.js'
import {ledgerLogLine, sealedLedgerEntry} from '../trail/records.js'
import type {LedgerRecords} from '../types.js'
import {safeUrl} from '../location.js'
import {databaseError, PostgresRecords} from './records.js'

const KEY = /^F-\d{4}-\d{3,}\+[a-z][a-z0-9_-]*\+S-\d{8}-\d{4,}$/

function assertKey(key: string): void {
  if (!KEY.test(key)) throw new PipeError('E_INVALID_ARGS', `"${key}" is not a ledger key (FEATURE+TARGET+VERSION)`)
}

function parseEntry(key: string, body: string): LedgerEntry {
  let value: unknown
  try {
    value = JSON.parse(body)
  } catch {
    value = undefined
  }
  const result = typeof value === 'object' && value !== null ? check('ledger', value) : null
  if (!result?.valid || (value as LedgerEntry).key !== key) {
    throw new PipeError(
      'E_INTEGRITY',
      `the ledger entry ${key} is malformed (pipe_ledger(${key})): ${result && !result.valid ? describeErrors(result.errors.slice(0, 3)) : 'not a ledger entry'}`,
      {hint: 'It was changed outside pipe; run pipe audit verify to see all damage.'},
    )
  }
  return value as LedgerEntry
}

export class PostgresLedger implements LedgerRecords {
  readonly storeRoot: string

  constructor(private readonly store: PostgresRecords & {readonly root: string}) {
    this.storeRoot = store.root
  }

  async read(key: string): Promise<LedgerEntry | null> {
    assertKey(key)
    const rows = await this.store.query<{body: string}>(`cannot read the ledger entry ${key}`, 'SELECT body FROM pipe_ledger WHERE key = $1', [key])
    return rows[0] ? parseEntry(key, rows[0].body) : null
  }

  async write(raw: LedgerEntry): Promise<void> {
    const sealed = sealedLedgerEntry(raw)
    const entry = sealed
    assertKey(entry.key)
    await this.store.tx(`cannot write the ledger entry ${entry.key}`, async (client) => {
      const pos = await PostgresRecords.nextNumber(client, 'ledger-log')
      const prev = pos > 1 ? (await client.query<{line: string}>('SELECT line FROM pipe_ledger_log WHERE pos = $1', [pos - 1])).rows[0] : undefined
      const entries = Number((await client.query<{n: string}>('SELECT count(*) AS n FROM pipe_ledger WHERE key <> $1', [entry.key])).rows[0]!.n) + 1
      const line = ledgerLogLine(sealed, entries, prev?.line ?? null)
      await client.query('INSERT INTO pipe_ledger_log (pos, key, line) VALUES ($1, $2, $3)', [pos, entry.key, JSON.stringify(line)])
      await client.query('INSERT INTO pipe_ledger (key, body) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET body = EXCLUDED.body', [
        entry.key,
        `${JSON.stringify(sealed, null, 2)}\n`,
      ])
    })
  }

  async withKey<T>(key: string, work: () => Promise<T>, waitMs = 60000): Promise<T> {
    assertKey(key)
    const client = await this.store.pool.connect().catch((error: unknown) => {
      throw databaseError(error, `cannot reach ${safeUrl(this.store.url)}`)
    })
    let broken = false
    try {
      try {
        await client.query(`SET lock_timeout = ${Math.max(1, Math.floor(waitMs))}`)
        await client.query("SELECT pg_advisory_lock(hashtextextended('pipe-ledger:' || $1, 0))", [key])
      } catch (error) {
        if ((error as {code?: string}).code === '55P03')
          throw new PipeError('E_CONFLICT', `publication ${key} is being sent by another pipe process`, {
            hint: 'Try again when it has finished; pipe ledger list shows the outcome.',
          })
        throw databaseError(error, `cannot hold the ledger key ${key}`)
      }
      try {
        return await work()
      } finally {
        await client.query("SELECT pg_advisory_unlock(hashtextextended('pipe-ledger:' || $1, 0))", [key]).catch(() => (broken = true))
        await client.query('RESET lock_timeout').catch(() => (broken = true))
      }
    } finally {
      client.release(broken)
    }
  }

  async list(filter: {feature?: string; run?: string; target?: string} = {}, limit?: number): Promise<LedgerEntry[]> {
    const rows = await this.store.query<{key: string; body: string}>('cannot list the ledger', 'SELECT key, body FROM pipe_ledger')
    const out = rows
      .map((r) => parseEntry(r.key, r.body))
      .filter(
        (e) =>
          (!filter.feature || e.feature_id === filter.feature) && (!filter.run || e.run_id === filter.run) && (!filter.target || e.target === filter.target),
      )
      .map((e) => redactDeep(e))
      .sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    return limit === undefined ? out : out.slice(0, limit)
  }
}
