/**
 * Opening the store a command names: a folder (the file store, the embedded default) or a
 * PostgreSQL URL (`postgres://user@host:5432/db`, the team store). A URL is never taken as a folder
 * name. Each store's code is imported only for a store of its kind: a file-store command loads
 * neither the PostgreSQL store nor `pg`, and a postgres:// one not the file store.
 */
import {addSecretCredentials} from '../util/redact.js'
import {isStoreUrl} from './location.js'
import {redacting} from './redacting.js'
import type {RunStore} from './types.js'

export {isStoreUrl, localRoot, safeUrl, storeInCommand, storeLabel, storeLocation} from './location.js'

/**
 * The store at `location`. `create`: made when missing (a run); `existing`: E_NOT_FOUND when there is
 * none (read commands never create one); `if-exists`: null when there is none. A database is
 * migrated on every open, so the three are one for a URL.
 */
export async function openStore(location: string, mode: 'create' | 'existing'): Promise<RunStore>
export async function openStore(location: string, mode: 'if-exists'): Promise<RunStore | null>
export async function openStore(location: string, mode: 'create' | 'existing' | 'if-exists'): Promise<RunStore | null> {
  const store = await opened(location, mode)
  return store && redacting(store)
}

/**
 * The database stores this command has open, by URL, with how many of its openings still use each.
 * A command opened its store in several places (`pipe review` four times: the review, the deadline
 * check, the resume, its redrive check), and each opening was a pool of its own with a connection of
 * its own: a backend started and the schema checked again, ~50 ms of the server's CPU each on the
 * test machine, and a few round trips more over a network. Each opening now shares one store, so
 * a command keeps one pool: its holdings, leases and cancel watches are the process's, whichever
 * opening took them. The last opening's close ends it, and so does the command's end
 * (closeCommandStores, from cli/base-command.ts): the next command, in a test's process too, opens
 * its own, as a new process would.
 */
const sharedStores = new Map<string, {store: Promise<RunStore>; users: number}>()

async function sharedStore(location: string): Promise<RunStore> {
  let entry = sharedStores.get(location)
  if (!entry) {
    const {PostgresStore} = await import('./postgres/store.js')
    // Checked again: another opening may have begun while pg loaded.
    entry = sharedStores.get(location)
    if (!entry) {
      const made = {store: PostgresStore.connect(location) as Promise<RunStore>, users: 0}
      sharedStores.set(location, made)
      made.store.catch(() => sharedStores.get(location) === made && sharedStores.delete(location))
      entry = made
    }
  }
  entry.users++
  const store = await entry.store.catch((error: unknown) => {
    entry.users--
    throw error
  })
  let closed = false
  // This opening's view of the shared store: its close ends only this opening's use.
  return new Proxy(store, {
    get(target, key, receiver): unknown {
      if (key !== 'close') return Reflect.get(target, key, receiver)
      return async (): Promise<void> => {
        if (closed) return
        closed = true
        if (--entry.users > 0 || sharedStores.get(location) !== entry) return
        sharedStores.delete(location)
        await target.close?.()
      }
    },
  })
}

/**
 * Ends every database store open in this process (its pools and the leases' renewal), however many
 * of its openings were left open: a process runs one command, so they are that command's (a test
 * that runs commands in its own process opens stores between them, never during one). Not waited
 * for: a connection something still holds ends when it is given back, and a failed command exits
 * at once, as it did before.
 */
export function closeCommandStores(): void {
  const open = [...sharedStores.values()]
  sharedStores.clear()
  for (const entry of open)
    entry.store.then(
      (store) => store.close?.().catch(() => undefined),
      () => undefined,
    )
}

async function opened(location: string, mode: 'create' | 'existing' | 'if-exists'): Promise<RunStore | null> {
  if (isStoreUrl(location)) {
    // The URL's password is a secret from now on: in a message, a command to copy, a record.
    addSecretCredentials(location)
    return sharedStore(location)
  }
  const {Store} = await import('./file/store.js')
  if (mode === 'create') return Store.open(location)
  if (mode === 'existing') return Store.existing(location)
  return Store.ifExists(location)
}
