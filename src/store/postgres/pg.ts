/** Loading pg, the PostgreSQL client, and opening a store's pool: only a command given a postgres:// URL does. */
import type {Pool, PoolClient} from 'pg'
import {PipeError} from '../../errors.js'
import {safeUrl} from '../location.js'
import {databaseError} from './records.js'
import {migrate} from './schema.js'
import {checkStoreUrl, verifiedSsl} from './url.js'

/** How long a holder keeps a run without renewing its lease (PIPE_LEASE_MS). */
export function leaseMs(): number {
  const set = Number(process.env.PIPE_LEASE_MS)
  return Number.isSafeInteger(set) && set >= 200 ? set : 30000
}

/**
 * pg, loaded. On its load pg asks whether it runs in a Cloudflare worker by making a `new Response`,
 * which on Node 20 (no `navigator` yet) loads all of undici, fetch's implementation, for nothing:
 * ~85 ms of CPU on every command that opens a database, a third of a `pipe run --detach`. A
 * navigator that says Node answers pg's question first, and is taken away again at once.
 */
export async function importPg(): Promise<typeof import('pg').default> {
  if (typeof globalThis.navigator !== 'undefined') return (await import('pg')).default
  Object.defineProperty(globalThis, 'navigator', {value: {userAgent: `Node.js/${process.versions.node}`}, configurable: true, writable: true})
  try {
    return (await import('pg')).default
  } finally {
    delete (globalThis as {navigator?: unknown}).navigator
  }
}

/** A pool on the store at `url`, its schema migrated (schema.ts). pg is loaded here, and only here. */
export async function openPool(url: string): Promise<Pool> {
  checkStoreUrl(url)
  const pg = await importPg()
  const pool = new pg.Pool({
    connectionString: verifiedSsl(url),
    max: Number(process.env.PIPE_PG_POOL) || 8,
    allowExitOnIdle: true,
    // A process stopped inside a transaction (SIGSTOP, a frozen VM) would hold its row locks until
    // it woke, and every other worker's claim of that run would wait behind them past the lease:
    // the server ends such a session first, so the run moves to another worker once the lease runs out.
    idle_in_transaction_session_timeout: Math.max(100, Math.floor((leaseMs() * 2) / 3)),
    // And no statement waits for a row lock as long as a lease: one kept by a stalled session is
    // given up (55P03, retried by tx) rather than waited for while the waiter's own leases run out.
    lock_timeout: Math.max(100, Math.floor(leaseMs() / 2)),
  })
  // An idle connection the server dropped must not crash the process: the next query reconnects.
  pool.on('error', () => undefined)
  let client: PoolClient | undefined
  try {
    client = await pool.connect()
    await migrate(client)
  } catch (error) {
    client?.release()
    client = undefined
    await pool.end().catch(() => undefined)
    if ((error as {newer?: boolean}).newer)
      throw new PipeError('E_CONFLICT', `${(error as Error).message} (${safeUrl(url)})`, {
        hint: 'Upgrade pipe on this machine to the version the rest of the team uses.',
      })
    throw databaseError(error, `cannot open the store at ${safeUrl(url)}`)
  } finally {
    client?.release()
  }
  return pool
}
