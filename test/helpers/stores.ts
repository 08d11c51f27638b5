/**
 * Reading a folder store in the test's own process, through the same store methods the read commands
 * call (`pipe snapshot show --json` is `readSnapshots`, `pipe spec show --json` is `readSpec`, `pipe
 * ledger list --json` is the ledger's `list`, `pipe audit verify` is `audit`): a CLI process spawned
 * only to READ what a run left costs a whole start (~150 ms CPU) for what is a few file reads. A test
 * about what a command prints or exits with still runs it as a process. And states several tests
 * start from, made once per file and copied for each test.
 */
import {rmSync} from 'node:fs'
import {cp, mkdtemp} from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import {expect} from 'chai'
import {deliveredKeys} from '../../src/steps/registry.js'
import {openStore} from '../../src/store/open.js'
import {childTree, effectiveStatus, type RunSummary} from '../../src/store/queries.js'
import {AUDIT_KEY_ENV} from '../../src/store/trail/integrity.js'
import type {AuditReport, RunStore} from '../../src/store/types.js'
import type {LedgerEntry} from '../../src/types/ledger.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'

/** The store `pipe` opens when run in `cwd`: its .pipe folder, or the folder `store` as `--store` names it. */
export function storeIn(cwd: string, store?: string): Promise<RunStore> {
  return openStore(located(cwd, store), 'existing')
}

/** `--store` as the commands take it: a folder relative to cwd, or a PostgreSQL URL as it is. */
const located = (cwd: string, store: string | undefined): string =>
  store === undefined ? path.join(cwd, '.pipe') : /^postgres(ql)?:\/\//.test(store) ? store : path.resolve(cwd, store)

async function reading<T>(cwd: string, store: string | undefined, read: (opened: RunStore) => Promise<T>): Promise<T> {
  return readIn(located(cwd, store), read)
}

/** Reads a store (a folder or a PostgreSQL URL) in this process, as the reading commands open it, and closes it. */
export async function readIn<T>(location: string, read: (store: RunStore) => Promise<T>): Promise<T> {
  const store = await openStore(location, 'existing')
  try {
    return await read(store)
  } finally {
    await store.close?.()
  }
}

/**
 * The status `pipe runs show RUN --json` gives (a running run whose holder is gone is interrupted),
 * read in this process: a wait polls it, and a process per check was most of the CPU of the tests
 * that waited on it.
 */
export function statusIn(location: string, runId: string): Promise<string> {
  return readIn(location, async (store) => effectiveStatus(store, await store.readRun(runId)))
}

/**
 * Every run of the store with the status `pipe runs list --all --json` gives it (a running run whose
 * holder is gone is interrupted) and its parent, oldest first, read in this process.
 */
export function runsIn(cwd: string, store?: string): Promise<Array<{run_id: string; status: string; parent?: RunRecord['parent']}>> {
  return reading(cwd, store, async (opened) => {
    const ids = [...(await opened.listRunIds())].sort()
    return Promise.all(
      ids.map(async (id) => {
        const run = await opened.readRun(id)
        return {run_id: run.run_id, status: await effectiveStatus(opened, run), ...(run.parent ? {parent: run.parent} : {})}
      }),
    )
  })
}

/** The run's status and children (each with its own) as `pipe runs show RUN --json` gives them, read in this process. */
export function runTreeIn(cwd: string, runId: string, store?: string): Promise<{status: string; children: RunSummary[]}> {
  return reading(cwd, store, async (opened) => ({status: await effectiveStatus(opened, await opened.readRun(runId)), children: await childTree(opened, runId)}))
}

/** What `pipe snapshot show RUN --json` prints: the run's snapshots exactly as stored (the run must exist). */
export function snapshotsIn(cwd: string, runId: string, store?: string): Promise<Snapshot[]> {
  return reading(cwd, store, async (opened) => {
    await opened.readRun(runId)
    return opened.readSnapshots(runId)
  })
}

/** `pipe snapshot show RUN --json --store LOCATION`: the snapshots of a run in the store at `location`. */
export function snapshotsInStore(location: string, runId: string): Promise<Snapshot[]> {
  return snapshotsIn(process.cwd(), runId, path.resolve(location))
}

/** The run record as stored, with the status `pipe runs show RUN --json` gives (a running run whose process died is interrupted). */
export function runRecordIn(cwd: string, runId: string, store?: string): Promise<{run: RunRecord; status: string}> {
  return reading(cwd, store, async (opened) => {
    const run = await opened.readRun(runId)
    return {run, status: await effectiveStatus(opened, run)}
  })
}

/** What `pipe spec show VERSION|RUN --json` prints: the spec version as stored, checked against its hash (of a run: its latest). */
export function specIn(cwd: string, versionOrRun: string, store?: string): Promise<CanonicalSpec> {
  return reading(cwd, store, async (opened) => {
    let version = versionOrRun
    if (versionOrRun.startsWith('R-')) {
      const record = await opened.readRun(versionOrRun)
      expect(record.spec_version, `run ${versionOrRun} has a spec version`).to.be.a('string')
      version = record.spec_version!
    }
    return opened.readSpec(version)
  })
}

/** The ledger's entries, as `pipe ledger list --json` lists them (newest update first, at most `limit`). */
export function ledgerIn(cwd: string, filter: {feature?: string; run?: string; target?: string} = {}, limit = 50): Promise<LedgerEntry[]> {
  return reading(cwd, undefined, async (opened) => opened.ledger().list(filter, limit))
}

/**
 * What `pipe audit verify [RUN]` checks, in this process: leftovers of crashes cleaned, then every
 * record checked against its seal and links, under no audit key (the CLI helper never passes the
 * developer's key on; a keyed store's test runs the command with its key).
 */
export async function auditIn(cwd: string, runId?: string, store?: string): Promise<AuditReport> {
  const key = process.env[AUDIT_KEY_ENV]
  delete process.env[AUDIT_KEY_ENV]
  try {
    return await reading(cwd, store, async (opened) => {
      if (runId !== undefined) await opened.assertRunExists(runId)
      return opened.audit(runId, {deliveredKeys})
    })
  } finally {
    if (key !== undefined) process.env[AUDIT_KEY_ENV] = key
  }
}

/** That `pipe audit verify [RUN]` would pass (exit 0): no problem, no seal left unchecked; otherwise the findings are the failure. */
export async function expectAuditPasses(cwd: string, runId?: string, store?: string): Promise<void> {
  const report = await auditIn(cwd, runId, store)
  const said = [...report.problems, ...report.notes, ...report.cleaned].map((f) => `${f.file}  ${f.field}  ${f.record}: ${f.message}`).join('\n')
  expect({ok: report.ok, unverifiable: report.unverifiable}, `audit of ${runId ?? 'the store'}:\n${said}`).to.deep.equal({ok: true, unverifiable: 0})
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

/** A folder store made once (by a real `pipe` run in a `before`) copied for one test, which then owns its copy. */
export async function copyStore(from: string, to: string): Promise<void> {
  await cp(from, to, {recursive: true, errorOnExist: true, force: false})
}
