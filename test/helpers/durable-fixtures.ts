/**
 * What the durable tests (test/e2e/durable.test.ts, durable-crashes, audit-trail and
 * people-in-the-loop) share: the default run they start, the states made once per file that tests
 * start from, the store read in this process, and the points of a run's trace to kill it at.
 */
import {expect} from 'chai'
import {existsSync} from 'node:fs'
import {readdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import type {RunRecord} from '../../src/types/run.js'
import type {Snapshot} from '../../src/types/snapshot.js'
import {deliveredKeys} from '../../src/steps/registry.js'
import {openStore} from '../../src/store/open.js'
import {effectiveStatus} from '../../src/store/queries.js'
import type {AuditReport, RunStore} from '../../src/store/types.js'
import {hashJson} from '../../src/util/hash.js'
import {defaultPipeline, examples, pipe, type CliResult} from './cli.js'
import {madeOnce} from './stores.js'

export interface RunJson {
  run_id: string
  feature_id: string
  status: string
  spec_version: string | null
  pending?: RunRecord['pending']
  error?: {code: string}
}

export const sentence = path.join(examples, 'one-sentence.txt')
export const answers = path.join(examples, 'one-sentence.answers.yaml')
export const fullRun = ['run', defaultPipeline, '--input', sentence, '--answers', answers, '--decision', 'go']

/*
 * States several tests start from, each made by one real `pipe run` per file and copied into each
 * test's own folder (tests that go on to run steps in the run's workspace make their own: a copy's
 * run still names the template's folder as its workspace).
 */
export const made = (args: string[], code: number): ((into: string) => Promise<void>) =>
  madeOnce(async (cwd) => {
    const result = await pipe([...args, '--json'], {cwd})
    expect(result.code, result.stderr).to.equal(code)
  })
/** The run in a copy of a template (each holds one). */
export async function onlyRun(cwd: string): Promise<RunJson> {
  const [runId] = await runIds(cwd)
  const record = await (await storeAt(cwd)).readRun(runId!)
  return {run_id: record.run_id, feature_id: record.feature_id, status: record.status, spec_version: record.spec_version ?? null, pending: record.pending}
}

/*
 * The checks after a kill read the store in this process, through the same store code the commands
 * use (`snapshot show`, `spec show`, `runs show`, `audit verify` print what these return): a CLI
 * process per check cost most of the durable tests' time. What only a process shows stays a process:
 * every kill is a real SIGKILL of a real `pipe`, every resume and finish a real `pipe` after it, and
 * `audit verify` and `runs show` run as processes in the tests that check what they print and
 * exit with (durable.test.ts's SIGTERM test, audit-trail.test.ts's audit trail and replay tests;
 * and audit.test.ts).
 */
export async function storeAt(cwd: string): Promise<RunStore> {
  return openStore(path.join(cwd, '.pipe'), 'existing')
}

export async function snapshotsOf(cwd: string, runId: string): Promise<Snapshot[]> {
  return (await storeAt(cwd)).readSnapshots(runId)
}

/** What `pipe runs show RUN --json` says the run's status is (a running run whose process died is interrupted). */
export async function statusOf(cwd: string, runId: string): Promise<string> {
  const store = await storeAt(cwd)
  return effectiveStatus(store, await store.readRun(runId))
}

/** `pipe audit verify` of the whole store: leftovers of crashes are cleaned (and listed as such), then every record checked. */
export async function audited(cwd: string): Promise<AuditReport> {
  return (await storeAt(cwd)).audit(undefined, {deliveredKeys})
}

/** The report as `pipe audit verify` prints it, for a failure message. */
export const said = (report: AuditReport): string =>
  [...report.problems, ...report.notes, ...report.cleaned].map((f) => `${f.file}  ${f.field}  ${f.record}: ${f.message}`).join('\n')

export async function runIds(cwd: string): Promise<string[]> {
  return (await readdir(path.join(cwd, '.pipe', 'runs')).catch(() => [] as string[])).filter((n) => n.startsWith('R-'))
}

/** Every file under the store with a hash of its content, to show that a refused call changed nothing. */
export async function storeState(cwd: string): Promise<Record<string, string>> {
  const root = path.join(cwd, '.pipe')
  const out: Record<string, string> = {}
  const walk = async (at: string): Promise<void> => {
    for (const entry of await readdir(at, {withFileTypes: true})) {
      const full = path.join(at, entry.name)
      if (entry.isDirectory()) await walk(full)
      else out[path.relative(root, full)] = hashJson(await readFile(full, 'utf8'))
    }
  }
  if (existsSync(root)) await walk(root)
  return out
}

/** A point's kind: `journal-written` of `journal-written:compile#1`, `write` of `write#17`. */
export const kindOf = (point: string): string => point.replace(/[:#].*$/, '')

/**
 * The points the engine passes whatever its store: a death at every one of them, in every run of
 * durable.test.ts and durable-crashes.test.ts, is test/faults/crash-matrix.test.ts's, in-process over
 * the in-memory store. The kills there are at the file store's own points (its journal, records,
 * snapshots, bare writes, run creation), where only a real SIGKILL shows what is left on disk.
 */
const ENGINE_POINTS = new Set(['run-created', 'before-step', 'attempt', 'after-step', 'publish-sent'])
export const storePoints = (points: string[]): string[] => points.filter((p) => !ENGINE_POINTS.has(kindOf(p)))

/**
 * `count` points of a run's trace (in their order) to kill it at: the first of each kind of point
 * (a journal, an evidence record, a spec version, a snapshot, a bare file write...), the rest
 * spread evenly over the trace. Every kill costs two real processes;
 * the points between two chosen ones are the same kinds of write at other steps.
 */
export function sample(points: string[], count: number): string[] {
  if (points.length <= count) return points
  const firsts = new Set([...new Set(points.map(kindOf))].map((kind) => points.find((p) => kindOf(p) === kind)!))
  const n = Math.max(count - firsts.size, 0)
  const spread = Array.from({length: n}, (_, i) => points[Math.floor((i * (points.length - 1)) / Math.max(n - 1, 1))]!)
  const chosen = new Set([...firsts, ...spread])
  return points.filter((p) => chosen.has(p))
}

/** The first chosen point of each kind: after these, a real `pipe resume` process continues the run; after the rest, the same command in this process (pipeHere). */
export function firstOfEachKind(chosen: string[]): Set<string> {
  return new Set([...new Set(chosen.map(kindOf))].map((kind) => chosen.find((p) => kindOf(p) === kind)!))
}

export function killedBy(result: CliResult): boolean {
  return result.signal === 'SIGKILL' || result.code === 137
}
