/** Read-side questions about the store, for the list and show commands. */
import {readFile} from '../util/fs-async.js'
import {isPipeError} from '../errors.js'
import {isObject} from './trail/shapes.js'
import type {RunRecord, RunStatus} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import type {RunPage, RunQuery, RunStore} from './types.js'

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
  /** When the run ended (succeeded, failed, cancelled): with created_at, how long it took. */
  ended_at?: string
  reason?: string
  /** The run (and step, and item) that started this one as a child run. */
  parent?: NonNullable<RunRecord['parent']>
  /** Child runs of this run (pipeline and foreach steps), oldest first; listed under it unless --all. */
  children?: RunSummary[]
  /** On a shared store, for a running run: the worker holding it (its --name, else host:pid). */
  worker?: string
  /** For a run recorded as running: the step it is in (or was in, when interrupted), and since when. */
  current_step?: {step: string; seq: number; since: string}
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
    ...(record.ended_at ? {ended_at: record.ended_at} : {}),
    ...(record.status_reason ? {reason: record.status_reason} : {}),
    ...(record.parent ? {parent: record.parent} : {}),
    ...(record.status === 'running' && record.current_step
      ? {current_step: {step: record.current_step.step, seq: record.current_step.seq, since: record.current_step.since}}
      : {}),
  }
}

export interface RunFilter {
  limit: number
  status?: RunStatus
  feature?: string
  /** Every run, children too, as one flat list; without it children are nested under their parent. */
  all?: boolean
}

/** The stored status whose runs can show as `status` (a running run whose process is gone shows as interrupted). */
function storedStatus(status: RunStatus): RunStatus {
  return status === 'interrupted' ? 'running' : status
}

/**
 * The runs of a query, page after page, newest first, stopping when `enough` says so: a damaged
 * record is read again through the store so that it says why (E_INTEGRITY), never left out unsaid.
 */
async function eachRun(store: RunStore, query: RunQuery, visit: (record: RunRecord) => Promise<boolean>): Promise<void> {
  let cursor: string | null = null
  do {
    const page: RunPage = await store.listRuns({...query, limit: 200, cursor})
    const damaged = new Set(page.damaged)
    for (const record of page.runs) if (!(await visit(record))) return
    for (const id of damaged) {
      const record = await store.readRun(id).catch((error: unknown) => {
        // A run still being created has no record yet; a damaged one is named.
        if (isPipeError(error) && error.code === 'E_INTEGRITY') throw error
        return null
      })
      if (record && !(await visit(record))) return
    }
    cursor = page.cursor
  } while (cursor !== null)
}

/**
 * Newest first. Without `all`, the filters and the limit apply to top-level runs, each with its
 * child runs (and theirs) nested under `children`; with `all`, every run is a row of its own. Reads
 * what it shows (and the runs the filters pass over), never the whole store.
 */
export async function listRuns(store: RunStore, filter: RunFilter): Promise<RunSummary[]> {
  const out: RunSummary[] = []
  if (filter.limit <= 0) return out
  const query: RunQuery = {
    ...(filter.status ? {status: storedStatus(filter.status)} : {}),
    ...(filter.feature ? {feature: filter.feature} : {}),
    ...(filter.all ? {} : {top: true}),
  }
  await eachRun(store, query, async (record) => {
    const summary = filter.all ? await summarizeRun(store, record) : await nested(store, record)
    if (!filter.status || summary.status === filter.status) out.push(summary)
    return out.length < filter.limit
  })
  return out
}

/** A run's summary with its child runs (and theirs) nested under `children`. */
async function nested(store: RunStore, record: RunRecord): Promise<RunSummary> {
  const summary = await summarizeRun(store, record)
  const children = await childTree(store, record.run_id)
  return children.length > 0 ? {...summary, children} : summary
}

/** The child runs of a run, each with its own children nested (pipe runs show). */
export async function childTree(store: RunStore, runId: string): Promise<RunSummary[]> {
  return Promise.all((await store.listChildren(runId)).map((child) => nested(store, child)))
}

/** The child runs a run started (pipeline and foreach steps), in step and item order. */
export function childrenOf(store: RunStore, runId: string): Promise<RunRecord[]> {
  return store.listChildren(runId)
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
