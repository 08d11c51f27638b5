/**
 * Reads a folder store in-process, through the same store methods the read commands call
 * (`pipe snapshot show --json` is `readSnapshots`, `pipe spec show --json` is `readSpec`, `pipe ledger
 * list --json` is the ledger's `list`): a test that only needs what a store holds reads it
 * here instead of spawning the CLI for it. A test about what a command prints keeps the process.
 */
import {rmSync} from 'node:fs'
import {cp, mkdtemp} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {openStore} from '../../src/store/open.js'
import type {RunStore} from '../../src/store/types.js'
import type {LedgerEntry} from '../../src/types/ledger.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'

/** The store `pipe` opens when run in `cwd` without --store. */
export function storeIn(cwd: string): Promise<RunStore> {
  return openStore(path.join(cwd, '.pipe'), 'existing')
}

async function reading<T>(cwd: string, read: (store: RunStore) => Promise<T>): Promise<T> {
  return readingStore(path.join(cwd, '.pipe'), read)
}

async function readingStore<T>(location: string, read: (store: RunStore) => Promise<T>): Promise<T> {
  const store = await openStore(location, 'existing')
  try {
    return await read(store)
  } finally {
    await store.close?.()
  }
}

/** What `pipe snapshot show RUN --json` prints: every snapshot of the run, in order. */
export function snapshotsIn(cwd: string, runId: string): Promise<Snapshot[]> {
  return reading(cwd, async (store) => {
    await store.readRun(runId)
    return store.readSnapshots(runId)
  })
}

/** `pipe snapshot show RUN --json --store LOCATION`: the snapshots of a run in the store at `location`. */
export function snapshotsInStore(location: string, runId: string): Promise<Snapshot[]> {
  return readingStore(location, async (store) => {
    await store.readRun(runId)
    return store.readSnapshots(runId)
  })
}

/** A spec version, checked against its hash, as `pipe spec show VERSION --json` prints it. */
export function specIn(cwd: string, version: string): Promise<CanonicalSpec> {
  return reading(cwd, (store) => store.readSpec(version))
}

/**
 * What `pipe audit verify [RUN]` checks, in-process: the store's audit with the keys of the deliveries
 * its steps made, under no audit key (the CLI's test runs get none either). It passes as the command
 * exits 0: no problem and no keyed seal left unchecked; otherwise the problems are the failure.
 */
export async function expectIntact(cwd: string, runId?: string): Promise<void> {
  const {deliveredKeys} = await import('../../src/steps/registry.js')
  const {AUDIT_KEY_ENV} = await import('../../src/store/trail/integrity.js')
  const key = process.env[AUDIT_KEY_ENV]
  delete process.env[AUDIT_KEY_ENV]
  try {
    const report = await reading(cwd, async (store) => {
      if (runId !== undefined) await store.assertRunExists(runId)
      return store.audit(runId, {deliveredKeys})
    })
    if (!report.ok || report.unverifiable > 0)
      throw new Error(
        `audit of ${runId ?? 'the store'}: ${report.unverifiable} unverifiable seal(s)\n${report.problems.map((p) => `${p.file}  ${p.field}  ${p.record}: ${p.message}`).join('\n')}`,
      )
  } finally {
    if (key !== undefined) process.env[AUDIT_KEY_ENV] = key
  }
}

/** The ledger's entries, as `pipe ledger list --json` lists them (newest update first, at most `limit`). */
export function ledgerIn(cwd: string, filter: {feature?: string; run?: string; target?: string} = {}, limit = 50): Promise<LedgerEntry[]> {
  return reading(cwd, async (store) => store.ledger().list(filter, limit))
}

/**
 * A state several tests start from, made once: `make(dir)` builds it in a folder of its own the first
 * time it is asked for (its result, e.g. the CLI's answer, is kept), and every call copies that
 * folder into the caller's `into`, so each test has its own store. What the state holds may name the
 * folder it was made in (a run's working directory): use it where the tests only read those paths.
 */
export function madeOnce<T>(make: (dir: string) => Promise<T>): (into: string) => Promise<T> {
  let making: Promise<{dir: string; value: T}> | undefined
  return async (into) => {
    making ??= (async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'pipe-made-once-'))
      process.on('exit', () => rmSync(dir, {recursive: true, force: true}))
      return {dir, value: await make(dir)}
    })()
    const {dir, value} = await making
    await cp(dir, into, {recursive: true})
    return value
  }
}
