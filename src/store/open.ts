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

async function opened(location: string, mode: 'create' | 'existing' | 'if-exists'): Promise<RunStore | null> {
  if (isStoreUrl(location)) {
    // The URL's password is a secret from now on: in a message, a command to copy, a record.
    addSecretCredentials(location)
    const {PostgresStore} = await import('./postgres/store.js')
    return PostgresStore.connect(location)
  }
  const {Store} = await import('./file/store.js')
  if (mode === 'create') return Store.open(location)
  if (mode === 'existing') return Store.existing(location)
  return Store.ifExists(location)
}
