/** Read-side questions about the store, for the list and show commands. */
import {readFile} from '../util/fs-async.js'
import {isPipeError} from '../errors.js'
import {isObject} from './shapes.js'
import type {RunRecord, RunStatus} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import type {RunStore} from './types.js'

export interface RunSummary {
  run_id: string
  feature_id: string
  status: RunStatus
  /** The stored status, when the shown one differs (a running run whose process is gone shows as interrupted). */
  stored_status?: RunStatus
  pipeline: string
  spec_version: string | null
  created_at: string
  updated_at: string
  reason?: string
  /** The run (and step, and item) that started this one as a child run. */
  parent?: NonNullable<RunRecord['parent']>
  /** Child runs of this run (pipeline and foreach steps), oldest first; listed under it unless --all. */
  children?: RunSummary[]
  /** On a shared store, for a running run: the worker holding it (its --name, else host:pid). */
  worker?: string
}

/** A run recorded as running whose owning process is gone was interrupted (a crash, a kill -9). */
export async function effectiveStatus(store: RunStore, record: RunRecord): Promise<RunStatus> {
  if (record.status !== 'running') return record.status
  const owner = await store.runOwner(record.run_id)
  return owner?.alive ? 'running' : 'interrupted'
}

export async function summarizeRun(store: RunStore, record: RunRecord): Promise<RunSummary> {
  const status = await effectiveStatus(store, record)
  return {
    run_id: record.run_id,
    feature_id: record.feature_id,
    status,
    ...(status !== record.status ? {stored_status: record.status} : {}),
    pipeline: record.pipeline.name,
    spec_version: record.spec_version ?? null,
    created_at: record.created_at,
    updated_at: record.updated_at,
    ...(record.status_reason ? {reason: record.status_reason} : {}),
    ...(record.parent ? {parent: record.parent} : {}),
  }
}

export interface RunFilter {
  limit: number
  status?: RunStatus
  feature?: string
  /** Every run, children too, as one flat list; without it children are nested under their parent. */
  all?: boolean
}

/**
 * Newest first. Without `all`, the filters and the limit apply to top-level runs, each with its
 * child runs (and theirs) nested under `children`; with `all`, every run is a row of its own.
 */
export async function listRuns(store: RunStore, filter: RunFilter): Promise<RunSummary[]> {
  const records: RunRecord[] = []
  let parents = 0
  for (const id of await store.listRunIds()) {
    // A flat list stops reading once it has enough. A nested one stops once it has `limit` top-level
    // runs: ids are read newest first and a child run is created after its parent, so every child of
    // a parent shown was read before it. With a status filter (decided on the nested summary) it reads all.
    if (filter.all && records.length >= filter.limit) break
    if (!filter.all && !filter.status && parents >= filter.limit) break
    try {
      const record = await store.readRun(id)
      if (filter.feature && record.feature_id !== filter.feature) continue
      if (filter.all && filter.status && (await effectiveStatus(store, record)) !== filter.status) continue
      if (!record.parent) parents++
      records.push(record)
    } catch (error) {
      // A run still being created has no record yet; a damaged one is named, never left out unsaid.
      if (isPipeError(error) && error.code === 'E_INTEGRITY') throw error
      continue
    }
  }
  if (filter.all) return Promise.all(records.map((r) => summarizeRun(store, r)))
  const nest = nester(store, records)
  const out: RunSummary[] = []
  for (const record of records) {
    if (out.length >= filter.limit) break
    if (record.parent) continue
    const summary = await nest(record)
    if (filter.status && summary.status !== filter.status) continue
    out.push(summary)
  }
  return out
}

/** Summarises a run with its child runs (and theirs) nested under `children`, from records read once. */
function nester(store: RunStore, records: readonly RunRecord[]): (record: RunRecord) => Promise<RunSummary> {
  const byParent = new Map<string, RunRecord[]>()
  for (const r of records) if (r.parent) byParent.set(r.parent.run_id, [...(byParent.get(r.parent.run_id) ?? []), r])
  const nest = async (record: RunRecord): Promise<RunSummary> => {
    const summary = await summarizeRun(store, record)
    const kids = (byParent.get(record.run_id) ?? []).sort(childOrder)
    return kids.length > 0 ? {...summary, children: await Promise.all(kids.map(nest))} : summary
  }
  return nest
}

/** The child runs of a run, each with its own children nested (pipe runs show). */
export async function childTree(store: RunStore, runId: string): Promise<RunSummary[]> {
  const records: RunRecord[] = []
  for (const id of await store.listRunIds()) {
    const record = await store.readRun(id).catch(() => null)
    if (record) records.push(record)
  }
  const nest = nester(store, records)
  return Promise.all(
    records
      .filter((r) => r.parent?.run_id === runId)
      .sort(childOrder)
      .map(nest),
  )
}

function childOrder(a: RunRecord, b: RunRecord): number {
  return a.parent!.seq - b.parent!.seq || (a.parent!.index ?? 0) - (b.parent!.index ?? 0) || (a.created_at < b.created_at ? -1 : 1)
}

/** The child runs a run started (pipeline and foreach steps), in step and item order. */
export async function childrenOf(store: RunStore, runId: string): Promise<RunRecord[]> {
  const out: RunRecord[] = []
  for (const id of await store.listRunIds()) {
    const record = await store.readRun(id).catch(() => null)
    if (record?.parent?.run_id === runId) out.push(record)
  }
  return out.sort(childOrder)
}

export interface SpecSummary {
  spec_version: string
  feature_id: string
  status: CanonicalSpec['meta']['status']
  parent_version: string | null
  run_id: string
  created_by_step: string
  created_at: string
  title?: string
  /** Set when the stored version fails its content-hash check. */
  problem?: string
}

export async function listSpecs(
  store: RunStore & {specFile?(version: string): string},
  filter: {feature?: string; run?: string; limit?: number},
): Promise<SpecSummary[]> {
  const out: SpecSummary[] = []
  for await (const version of store.newestSpecVersions()) {
    if (filter.limit !== undefined && out.length >= filter.limit) break
    let spec: CanonicalSpec
    let problem: string | undefined
    try {
      spec = await store.readSpec(version)
    } catch (error) {
      problem = (error as Error).message
      const raw = store.specFile ? await readFile(store.specFile(version), 'utf8').catch(() => '{}') : '{}'
      try {
        spec = JSON.parse(raw) as CanonicalSpec
      } catch {
        spec = {meta: {spec_version: version}} as CanonicalSpec
      }
      // What a damaged file still says, where it is an object; its problem is shown with it.
      if (!isObject(spec)) spec = {} as CanonicalSpec
      if (!isObject(spec.meta)) spec = {...spec, meta: {spec_version: version} as CanonicalSpec['meta']}
    }
    if (filter.feature && spec.meta.feature_id !== filter.feature) continue
    if (filter.run && spec.meta.run_id !== filter.run) continue
    const m = spec.meta
    out.push({
      spec_version: version,
      feature_id: m.feature_id,
      status: m.status,
      parent_version: m.parent_version ?? null,
      run_id: m.run_id,
      created_by_step: m.created_by_step,
      created_at: m.created_at,
      ...(m.title ? {title: m.title} : {}),
      ...(problem ? {problem} : {}),
    })
  }
  return out
}

export interface ClarifyRound {
  round: number
  seq: number
  questions: Array<{id: string; field?: string; question: string; status: 'open' | 'answered' | 'pending'; answer?: string}>
}

/**
 * The clarify rounds of a run, oldest first, each question with its answer as the spec recorded it.
 * `questionsOf` reads the questions a snapshot asked (the asking kind owns that output).
 */
export async function clarifyRounds(
  store: RunStore,
  runId: string,
  questionsOf: (snapshot: Snapshot) => ReadonlyArray<{id: string; field?: string; question: string}> | undefined,
): Promise<ClarifyRound[]> {
  const record = await store.readRun(runId)
  const snapshots = await store.readSnapshots(runId)
  const spec = record.spec_version ? await store.readSpec(record.spec_version).catch(() => null) : null
  const recorded = new Map((spec?.open_questions ?? []).map((q) => [q.id, q]))
  const rounds: ClarifyRound[] = []
  for (const snapshot of snapshots) {
    const questions = questionsOf(snapshot)
    // A record written by hand or by an older pipe may hold anything there.
    if (!Array.isArray(questions)) continue
    rounds.push({
      round: rounds.length + 1,
      seq: snapshot.step.seq,
      questions: (questions as ReadonlyArray<{id: string; field?: string; question: string}>).map((q) => {
        const seen = recorded.get(q.id)
        return {...q, status: seen ? seen.status : 'pending', ...(seen?.answer !== undefined ? {answer: seen.answer} : {})}
      }),
    })
  }
  return rounds
}

export function totalUsage(snapshots: Snapshot[]): {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  calls: number
  cost?: number
  currency?: string
} {
  const total: {prompt_tokens: number; completion_tokens: number; total_tokens: number; calls: number; cost?: number; currency?: string} = {
    prompt_tokens: 0,
    completion_tokens: 0,
    total_tokens: 0,
    calls: 0,
  }
  for (const s of snapshots) {
    const u = s.meta.usage
    if (!u) continue
    total.prompt_tokens += u.prompt_tokens
    total.completion_tokens += u.completion_tokens
    total.total_tokens += u.total_tokens
    total.calls += u.calls
    if (u.cost !== undefined) {
      total.cost = Math.round(((total.cost ?? 0) + u.cost) * 1e6) / 1e6
      if (u.currency) total.currency = u.currency
    }
  }
  return total
}
