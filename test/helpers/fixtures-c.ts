/**
 * Reading a folder store in the test's own process, through the same store code the commands use:
 * a `pipe snapshot show --json` or `pipe runs show --json` spawned only to READ what a run left costs
 * a whole CLI start (~150 ms CPU) for what is one file read. A test that checks what such a command
 * prints or exits with still runs it as a process.
 */
import {cp} from 'node:fs/promises'
import path from 'node:path'
import {expect} from 'chai'
import {deliveredKeys} from '../../src/steps/registry.js'
import {openStore} from '../../src/store/open.js'
import {effectiveStatus} from '../../src/store/queries.js'
import type {AuditReport, RunStore} from '../../src/store/types.js'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import type {CanonicalSpec} from '../../src/types/spec.js'

/** The store of `cwd` (its .pipe folder) or the folder `store`, as `--store` names it. */
export async function storeIn(cwd: string, store?: string): Promise<RunStore> {
  return openStore(store === undefined ? path.join(cwd, '.pipe') : path.resolve(cwd, store), 'existing')
}

/** What `pipe snapshot show RUN --json` prints: the run's snapshots exactly as stored (the run must exist). */
export async function snapshotsIn(cwd: string, runId: string, store?: string): Promise<Snapshot[]> {
  const opened = await storeIn(cwd, store)
  await opened.readRun(runId)
  return opened.readSnapshots(runId)
}

/** The run record as stored, with the status `pipe runs show RUN --json` gives (a running run whose process died is interrupted). */
export async function runRecordIn(cwd: string, runId: string, store?: string): Promise<{run: RunRecord; status: string}> {
  const opened = await storeIn(cwd, store)
  const run = await opened.readRun(runId)
  return {run, status: await effectiveStatus(opened, run)}
}

/** What `pipe spec show VERSION|RUN --json` prints: the spec version as stored (of a run: its latest). */
export async function specIn(cwd: string, versionOrRun: string, store?: string): Promise<CanonicalSpec> {
  const opened = await storeIn(cwd, store)
  let version = versionOrRun
  if (versionOrRun.startsWith('R-')) {
    const record = await opened.readRun(versionOrRun)
    expect(record.spec_version, `run ${versionOrRun} has a spec version`).to.be.a('string')
    version = record.spec_version!
  }
  return opened.readSpec(version)
}

/**
 * What `pipe audit verify [RUN]` checks, in this process: leftovers of crashes cleaned, then every
 * record checked against its seal and links. For a store written without PIPE_AUDIT_KEY (the CLI
 * helper never passes the developer's key on; a keyed store's test runs the command with its key).
 */
export async function auditIn(cwd: string, runId?: string, store?: string): Promise<AuditReport> {
  const opened = await storeIn(cwd, store)
  if (runId !== undefined) await opened.assertRunExists(runId)
  return opened.audit(runId, {deliveredKeys})
}

/** That `pipe audit verify [RUN]` would pass (exit 0): no problem, no seal left unchecked. */
export async function expectAuditPasses(cwd: string, runId?: string, store?: string): Promise<void> {
  const report = await auditIn(cwd, runId, store)
  const said = [...report.problems, ...report.notes, ...report.cleaned].map((f) => `${f.file}  ${f.field}  ${f.record}: ${f.message}`).join('\n')
  expect({ok: report.ok, unverifiable: report.unverifiable}, said).to.deep.equal({ok: true, unverifiable: 0})
}

/**
 * A folder store made once (by a real `pipe` run in a `before`) copied for one test: each test gets
 * its own store in the state it needs without paying for the run that made it.
 */
export async function copyStore(from: string, to: string): Promise<void> {
  await cp(from, to, {recursive: true, errorOnExist: true, force: false})
}
