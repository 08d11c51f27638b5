/** Loading pg, the PostgreSQL client: only a command given a postgres:// URL does (see store.ts connect). */

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
