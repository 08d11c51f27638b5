/**
 * What the run page shows, read from the store and nothing else: the run record, its timeline and
 * snapshots, its child runs, the spec versions and evidence its snapshots name, the prompts and
 * replies of its model calls (from the store's reply cache, which keeps every reply that answered
 * one of its runs), an agent's conversation (its sealed step state), its ledger entries and the
 * audit verdict for the run. Reading changes nothing.
 */
import path from 'node:path'
import {existsSync} from 'node:fs'
import {loadPipeline} from '../config/pipeline.js'
import type {PathTaken} from '../config/graph-render.js'
import {redriveRefusal} from '../app/redrive-check.js'
import {pathOf} from '../app/run-path.js'
import {deliveredKeys, kindCatalog} from '../steps/registry.js'
import {childTree, effectiveStatus, totalUsage, type RunSummary} from '../store/queries.js'
import {ReplyCache} from '../store/replies.js'
import type {AuditReport, RunStore} from '../store/types.js'
import type {Evidence} from '../types/evidence.js'
import type {LedgerEntry} from '../types/ledger.js'
import type {RunEvent, RunRecord, RunStatus} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import type {CanonicalSpec} from '../types/spec.js'
import type {Pipeline} from '../types/pipeline.js'

/** One model request of a step: the messages as sent and the reply, when the store kept them. */
export interface ModelCallView {
  key: string
  source: string
  request: {messages: Array<{role: string; content: unknown; tool_calls?: unknown; tool_call_id?: unknown}>; model?: string} | null
  reply: unknown
  /** Why the request or reply is not shown (not in the store's reply cache, unreadable). */
  missing?: string
}

export interface StepView {
  snapshot: Snapshot
  calls: ModelCallView[]
}

export interface RunGraph {
  pipeline: Pipeline | null
  /** Why the pipeline's own graph is not drawn (its file changed or is gone): only the path taken is. */
  problem?: string
  taken: PathTaken
}

export interface RunView {
  record: RunRecord
  status: RunStatus
  events: RunEvent[]
  steps: StepView[]
  children: RunSummary[]
  specs: CanonicalSpec[]
  evidence: Array<Evidence | {evidence_id: string; problem: string}>
  ledger: LedgerEntry[]
  audit: AuditReport
  usage: ReturnType<typeof totalUsage>
  graph: RunGraph
  /** The command that continues the run, when it waits for a person or can be resumed. */
  next_command?: string
  /** The other commands a person may give instead (hold, drop, --no). */
  alternatives?: string[]
  waits_for?: string
  /** A failed run pipe resume would refuse: why, and what to do instead. */
  cannot_continue?: {message: string; hint?: string}
}

export async function modelCalls(cache: ReplyCache, snapshot: Snapshot): Promise<ModelCallView[]> {
  const out: ModelCallView[] = []
  for (const call of snapshot.meta.model_calls ?? []) {
    try {
      const cached = await cache.read(call.key)
      if (cached === null)
        out.push({
          key: call.key,
          source: call.source,
          request: null,
          reply: null,
          missing: "not in the store's reply cache (the store was copied without replies/, or the reply was deleted)",
        })
      else out.push({key: call.key, source: call.source, request: cached.request as ModelCallView['request'], reply: cached.reply})
    } catch (error) {
      out.push({key: call.key, source: call.source, request: null, reply: null, missing: (error as Error).message})
    }
  }
  return out
}

async function graphOf(record: RunRecord, snapshots: Snapshot[], events: RunEvent[]): Promise<RunGraph> {
  const file = record.pipeline.path
  const bare = (problem: string): RunGraph => ({
    pipeline: null,
    problem,
    taken: pathOf({name: record.pipeline.name, steps: []} as unknown as Pipeline, record, snapshots, events),
  })
  if (!file || !existsSync(file))
    return bare(`the pipeline file ${file ? path.basename(file) : ''} is no longer where the run read it: the path taken is drawn alone`)
  const loaded = await loadPipeline(file, kindCatalog).catch((error: Error) => ({ok: false as const, error}))
  if (!loaded.ok) return bare(`the pipeline file ${path.basename(file)} no longer loads: the path taken is drawn alone`)
  if (loaded.loaded.hash !== record.pipeline.hash)
    return bare(`the pipeline file ${path.basename(file)} has changed since this run: the path taken is drawn alone`)
  return {pipeline: loaded.loaded.pipeline, taken: pathOf(loaded.loaded.pipeline, record, snapshots, events)}
}

/** A word for a POSIX shell: as it is when it needs no quoting, else in single quotes. */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`
}

/**
 * What continues the run: one command that runs as it is shown (copied whole, it works), the
 * other choices beside it, or — when pipe resume would refuse (a failed run that would only fail
 * again the same way) — why, and what to do instead. `store` is the --store the commands need.
 */
export function nextCommand(
  record: RunRecord,
  status: RunStatus,
  snapshots: readonly Snapshot[],
  store?: string,
): Pick<RunView, 'next_command' | 'alternatives' | 'waits_for' | 'cannot_continue'> {
  const pending = record.pending
  const at = store !== undefined ? ` --store ${shellWord(store)}` : ''
  const id = record.run_id
  if (status === 'awaiting_input' && pending?.kind === 'answers')
    return {waits_for: 'answers to the questions below', next_command: `pipe answer ${id} --file answers.yaml${at}`}
  if (status === 'awaiting_input' && pending?.kind === 'confirm')
    return {
      waits_for: 'a person to confirm the action below',
      next_command: `pipe confirm ${id} --yes${at}`,
      alternatives: [`pipe confirm ${id} --no --note 'why not'${at}`],
    }
  if (status === 'awaiting_input' && pending?.kind === 'budget')
    return {
      waits_for: 'a person to raise its budget (a request over it was not sent)',
      next_command: `pipe budget ${id} --add-tokens 50000 --note 'why'${at}`,
      alternatives: [`pipe budget ${id} --add-usd 1 --note 'why'${at}`, `pipe cancel ${id}${at}`],
    }
  if (status === 'awaiting_input')
    return {
      waits_for: 'a review decision',
      next_command: `pipe review ${id} --decision go${at}`,
      alternatives: [`pipe review ${id} --decision hold --note 'why'${at}`, `pipe review ${id} --decision drop --note 'why'${at}`],
    }
  if (status === 'interrupted' || status === 'blocked')
    return {
      waits_for: status === 'blocked' ? 'a person to fix the cause, then resume' : 'a resume (its process is gone)',
      next_command: `pipe resume ${id}${at}`,
    }
  if (status === 'failed') {
    // The judgement pipe resume makes: a failed run it would refuse gets the reason, not a command that fails.
    const refused = redriveRefusal(record, snapshots)
    if (refused) return {cannot_continue: refused}
    return {waits_for: 'nothing: it failed. Once the cause is fixed, a redrive from the failed step', next_command: `pipe resume ${id}${at}`}
  }
  return {}
}

/** `store`: the --store the commands on the page carry (none in an exported file, read elsewhere). */
export async function loadRunView(store: RunStore, runId: string, options: {store?: string} = {}): Promise<RunView> {
  const record = await store.readRun(runId)
  const [events, snapshots, status, children] = await Promise.all([
    store.readEvents(runId),
    store.readSnapshots(runId),
    effectiveStatus(store, record),
    childTree(store, runId),
  ])
  const cache = new ReplyCache(store.root)
  const steps: StepView[] = []
  for (const snapshot of snapshots) steps.push({snapshot, calls: await modelCalls(cache, snapshot)})
  const specVersions = new Set<string>()
  for (const s of snapshots) {
    if (s.spec_version_in) specVersions.add(s.spec_version_in)
    if (s.spec_version_out) specVersions.add(s.spec_version_out)
  }
  const specs: CanonicalSpec[] = []
  for (const version of [...specVersions].sort()) {
    try {
      specs.push(await store.readSpec(version))
    } catch {
      // A missing or damaged version shows in the audit verdict, which names it.
    }
  }
  const evidenceIds = [...new Set(snapshots.flatMap((s) => s.evidence_links.map((l) => l.evidence_id)))].sort()
  const evidence: RunView['evidence'] = []
  for (const id of evidenceIds) {
    try {
      evidence.push(await store.readEvidence(id))
    } catch (error) {
      evidence.push({evidence_id: id, problem: (error as Error).message})
    }
  }
  const ledger = await store.ledger().list({run: runId})
  const audit = await store.audit(runId, {deliveredKeys})
  return {
    record,
    status,
    events,
    steps,
    children,
    specs,
    evidence,
    ledger,
    audit,
    usage: totalUsage(snapshots),
    graph: await graphOf(record, snapshots, events),
    ...nextCommand(record, status, snapshots, options.store),
  }
}
