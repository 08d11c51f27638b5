/**
 * pipe stats: seed 004 §10.2's metrics over the store's runs. A run's child runs (a foreach's
 * tasks) count toward the top-level run that started them. Each run's record and snapshots are read
 * once; what a snapshot contributes (a patch's size, a QA verdict) is its kind's export role's
 * `metrics`, and tasks and attempts are grouped as `pipe export` groups them.
 */
import {isPipeError} from '../errors.js'
import type {RunStore} from '../store/types.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {failureOf, handlerNamed} from '../steps/registry.js'
import {attempts, roleOf} from '../engine/export.js'
import {addRunBudget, runBudget, type PipelineBudget, type RunBudgetStats} from './budget-stats.js'

export interface Metrics {
  runs: number
  /** Steps run (snapshots), the child runs' included. */
  steps: number
  /** Steps that ended with an outcome their kind declares a failure, or with an error. */
  failed_steps: number
  /** Tasks that had at least one attempt (an agent or edit step with its task). */
  tasks: number
  /** Tasks whose last QA verdict passed on an attempt of the agent (or an edit step). */
  tasks_passed: number
  /** Tasks whose last QA passed on code a person fixed (QA run again with no edit of pipe's since): not the agent's passes. */
  tasks_fixed_by_person: number
  task_pass_rate: number | null
  attempts: number
  mean_attempts: number | null
  /** Failed verdicts by error_category: QA's (env_fail for QA that could not run) and failed edits' (patch_apply_fail). */
  failure_categories: Record<string, number>
  patches: number
  mean_patch_lines: number | null
  qa_runs: number
  mean_qa_ms: number | null
  model_calls: number
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  /** Summed over snapshots that recorded a cost (the pipeline's provider.prices); null when none did. */
  cost: number | null
  currency: string | null
}

export interface RunStats extends Metrics {
  run_id: string
  pipeline: string
  status: RunRecord['status']
  created_at: string
  /** Spend against the pipeline's budget and each step's own (grants included); null without one. */
  budget: RunBudgetStats
}

export interface StatsReport {
  filter: {pipeline: string | null; since: string | null}
  totals: Metrics
  pipelines: Array<Metrics & {pipeline: string; budget: PipelineBudget | null}>
  runs: RunStats[]
}

/** Sums that make the means; kept apart so merging runs and pipelines stays exact. */
interface Tally {
  runs: number
  steps: number
  failed_steps: number
  tasks: number
  tasks_passed: number
  tasks_fixed_by_person: number
  attempts: number
  failure_categories: Record<string, number>
  patches: number
  patch_lines: number
  qa_runs: number
  qa_ms: number
  model_calls: number
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  cost: number | null
  currency: string | null
}

function empty(): Tally {
  return {
    runs: 0,
    steps: 0,
    failed_steps: 0,
    tasks: 0,
    tasks_passed: 0,
    tasks_fixed_by_person: 0,
    attempts: 0,
    failure_categories: {},
    patches: 0,
    patch_lines: 0,
    qa_runs: 0,
    qa_ms: 0,
    model_calls: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
    total_tokens: 0,
    cost: null,
    currency: null,
  }
}

function add(into: Tally, from: Tally): void {
  for (const key of [
    'runs',
    'steps',
    'failed_steps',
    'tasks',
    'tasks_passed',
    'tasks_fixed_by_person',
    'attempts',
    'patches',
    'patch_lines',
    'qa_runs',
    'qa_ms',
    'model_calls',
    'prompt_tokens',
    'completion_tokens',
    'total_tokens',
  ] as const)
    into[key] += from[key]
  for (const [category, n] of Object.entries(from.failure_categories)) into.failure_categories[category] = (into.failure_categories[category] ?? 0) + n
  if (from.cost !== null) into.cost = (into.cost ?? 0) + from.cost
  into.currency ??= from.currency
}

const mean = (sum: number, n: number): number | null => (n === 0 ? null : Math.round((sum / n) * 100) / 100)

function metrics(t: Tally): Metrics {
  return {
    runs: t.runs,
    steps: t.steps,
    failed_steps: t.failed_steps,
    tasks: t.tasks,
    tasks_passed: t.tasks_passed,
    tasks_fixed_by_person: t.tasks_fixed_by_person,
    task_pass_rate: t.tasks === 0 ? null : Math.round((t.tasks_passed / t.tasks) * 10000) / 10000,
    attempts: t.attempts,
    mean_attempts: mean(t.attempts, t.tasks),
    failure_categories: Object.fromEntries(Object.entries(t.failure_categories).sort(([a], [b]) => (a < b ? -1 : 1))),
    patches: t.patches,
    mean_patch_lines: mean(t.patch_lines, t.patches),
    qa_runs: t.qa_runs,
    mean_qa_ms: mean(t.qa_ms, t.qa_runs),
    model_calls: t.model_calls,
    prompt_tokens: t.prompt_tokens,
    completion_tokens: t.completion_tokens,
    total_tokens: t.total_tokens,
    cost: t.cost === null ? null : Math.round(t.cost * 1e6) / 1e6,
    currency: t.currency,
  }
}

function isFailure(s: Snapshot): boolean {
  const outcome = s.decisions.at(-1)?.decision
  return outcome === 'error' || (outcome !== undefined && failureOf(handlerNamed(s.step.kind), outcome) !== undefined)
}

/** Where a task stands over a run and its children: a task retried in a new child run is one task. */
type Tasks = Map<string, {attempts: number; passed: boolean; byPerson: boolean}>

const count = (into: Record<string, number>, category: string): void => {
  into[category] = (into[category] ?? 0) + 1
}

/** What one run's own snapshots add (its children are tallied on their own); its tasks go into `tasks`, counted once per family. */
function tallySnapshots(snapshots: Snapshot[], tasks: Tasks): Tally {
  const t = empty()
  for (const s of snapshots) {
    t.steps++
    if (isFailure(s)) t.failed_steps++
    const usage = s.meta.usage
    if (usage) {
      t.model_calls += usage.calls
      t.prompt_tokens += usage.prompt_tokens
      t.completion_tokens += usage.completion_tokens
      t.total_tokens += usage.total_tokens
      if (usage.cost !== undefined) t.cost = (t.cost ?? 0) + usage.cost
      if (usage.currency !== undefined) t.currency ??= usage.currency
    }
    const m = roleOf(s).metrics?.(s) ?? {}
    if (m.patch_lines !== undefined && m.patch_lines > 0) {
      t.patches++
      t.patch_lines += m.patch_lines
    }
    if (m.failure !== undefined) count(t.failure_categories, m.failure)
    if (m.qa) {
      t.qa_runs++
      t.qa_ms += m.qa.duration_ms
      if (m.qa.status === 'fail') count(t.failure_categories, m.qa.category ?? 'unknown')
    }
  }
  const here = new Map<string, number>()
  for (const attempt of attempts(snapshots)) {
    here.set(attempt.task, Math.max(here.get(attempt.task) ?? 0, attempt.number))
    const task = tasks.get(attempt.task) ?? {attempts: 0, passed: false, byPerson: false}
    // The task stands where its latest QA left it; a QA with no edit of pipe's in its attempt checked a person's fix.
    const edited = attempt.snapshots.some((s) => roleOf(s).attempt === 'starts')
    for (const s of attempt.snapshots) {
      const qa = roleOf(s).metrics?.(s).qa
      if (qa) {
        task.passed = qa.status === 'pass'
        task.byPerson = task.passed && !edited
      }
    }
    tasks.set(attempt.task, task)
  }
  for (const [name, n] of here) tasks.get(name)!.attempts += n
  return t
}

/** A family's tasks, each counted once. */
function tallyTasks(tasks: Tasks): Tally {
  const t = empty()
  for (const task of tasks.values()) {
    t.tasks++
    t.attempts += task.attempts
    if (task.passed && task.byPerson) t.tasks_fixed_by_person++
    else if (task.passed) t.tasks_passed++
  }
  return t
}

/** `since` is an ISO date or date-time; runs created before it are left out. */
export async function collectStats(store: RunStore, filter: {pipeline?: string; since?: string}): Promise<StatsReport> {
  const records: RunRecord[] = []
  for (const id of await store.listRunIds()) {
    try {
      records.push(await store.readRun(id))
    } catch (error) {
      // A run still being created has no record yet; a damaged one is named, never counted as nothing.
      if (isPipeError(error) && error.code === 'E_INTEGRITY') throw error
      continue
    }
  }
  const since = filter.since !== undefined ? Date.parse(filter.since) : undefined
  const children = new Map<string, RunRecord[]>()
  for (const r of records) if (r.parent) children.set(r.parent.run_id, [...(children.get(r.parent.run_id) ?? []), r])
  const roots = records
    .filter((r) => !r.parent)
    .filter((r) => filter.pipeline === undefined || r.pipeline.name === filter.pipeline)
    .filter((r) => since === undefined || Date.parse(r.created_at) >= since)
    .sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : a.run_id < b.run_id ? -1 : 1))

  const totals = empty()
  const byPipeline = new Map<string, Tally>()
  const budgets = new Map<string, PipelineBudget>()
  const runs: RunStats[] = []
  for (const root of roots) {
    const t = empty()
    t.runs = 1
    // The root and every run below it, each read once.
    const queue = [root]
    const tasks: Tasks = new Map()
    while (queue.length > 0) {
      const run = queue.shift()!
      add(t, tallySnapshots(await store.readSnapshots(run.run_id), tasks))
      queue.push(...(children.get(run.run_id) ?? []))
    }
    add(t, tallyTasks(tasks))
    const budget = await runBudget(store, root)
    if (budget) budgets.set(root.pipeline.name, addRunBudget(budgets.get(root.pipeline.name) ?? null, budget))
    runs.push({run_id: root.run_id, pipeline: root.pipeline.name, status: root.status, created_at: root.created_at, ...metrics(t), budget})
    const p = byPipeline.get(root.pipeline.name) ?? empty()
    add(p, t)
    byPipeline.set(root.pipeline.name, p)
    add(totals, t)
  }
  return {
    filter: {pipeline: filter.pipeline ?? null, since: filter.since ?? null},
    totals: metrics(totals),
    pipelines: [...byPipeline.entries()]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([pipeline, t]) => ({pipeline, ...metrics(t), budget: budgets.get(pipeline) ?? null})),
    runs,
  }
}
