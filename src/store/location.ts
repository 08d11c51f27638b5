/** Where a store is: a folder (the file store) or a PostgreSQL URL, and how pipe names it. */
import {createHash} from 'node:crypto'
import os from 'node:os'
import path from 'node:path'

/** Whether a --store (or PIPE_STORE) value names a PostgreSQL database. */
export function isStoreUrl(value: string): boolean {
  return /^postgres(ql)?:\/\//i.test(value)
}

/** The URL with its password masked, for what pipe prints and logs. */
export function safeUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:/@]*):[^@]*@/i, '$1:***@')
}

/**
 * The store as a command to copy names it: a folder resolved against `cwd` (a command is pasted
 * anywhere), a database URL without its password, which is never printed; pipe, as psql does, takes
 * it from PGPASSWORD or ~/.pgpass when the URL has none. Never RunStore.root: for a database that is
 * a folder of this machine's (localRoot), which no command takes as the store.
 */
export function storeInCommand(cwd: string, store: string): string {
  if (!isStoreUrl(store)) return path.resolve(cwd, store)
  try {
    const url = new URL(store)
    url.password = ''
    url.searchParams.delete('password')
    return url.href
  } catch {
    return safeUrl(store)
  }
}

/** Where a store is: a URL as given, a folder resolved against the working directory. */
export function storeLocation(cwd: string, store: string): string {
  return isStoreUrl(store) ? store : path.resolve(cwd, store)
}

/** A store's location as pipe prints it: a URL without its password. */
export function storeLabel(cwd: string, store: string): string {
  return isStoreUrl(store) ? safeUrl(store) : path.resolve(cwd, store)
}

/**
 * The local folder of a store (RunStore.root): the folder itself, or for a database a folder of
 * this machine's own (PIPE_HOME/stores/HASH, else the XDG state folder), for what a run keeps beside
 * its records and is no record: live artifacts, concurrency slots, the reply cache.
 */
export function localRoot(cwd: string, store: string): string {
  if (!isStoreUrl(store)) return path.resolve(cwd, store)
  const base = process.env.PIPE_HOME ?? path.join(process.env.XDG_STATE_HOME ?? path.join(os.homedir(), '.local', 'state'), 'pipe')
  return path.join(base, 'stores', createHash('sha256').update(safeUrl(store)).digest('hex').slice(0, 16))
}
