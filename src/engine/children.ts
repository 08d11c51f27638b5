/**
 * The child runs of one step (pipeline, foreach). A child is keyed by (parent run, step, seq, item
 * index) in its run.json `parent`, written when the run is created, so a re-entry of the step (a
 * retry, a resume after a crash, a redrive of a blocked step) finds each child it already started
 * and continues it, and never runs a finished one again. Each child is driven by a sub-engine on
 * the same store, under its own run lock; the engine hands in how to make one, so this module
 * needs no import of it.
 */
import {catalogOf} from '../steps/registry.js'
import {loadInlinePipeline, loadPipeline, type LoadedPipeline} from '../config/pipeline.js'
import {PipeError} from '../errors.js'
import type {JsonValue} from '../expr/index.js'
import {resolveInputs, type InputDeclaration} from '../expr/inputs.js'
import type {ChildResult, ChildRuns, SkippedChild, StepRegistry} from '../steps/types.js'
import {childrenOf} from '../store/queries.js'
import type {RunStore} from '../store/types.js'
import type {Step} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import type {Snapshot} from '../types/snapshot.js'
import {addSecretsNamedIn} from '../util/redact.js'
import {retriedSeqs} from './cursor.js'
import type {ChildDispatch, ResumeOptions, RunOutcome, RunSettings} from './engine-types.js'
import {readSecrets} from './expressions.js'
import {isFinal} from './lifecycle.js'
import {newRun, type RunBirth} from './run-record.js'

/** What the children of a step need of the engine that drives one of them. */
export interface ChildEngine {
  /** Creates the run started and drives it; `hookPoint` is the fault-injection point after creation. */
  launch(birth: RunBirth, settings: RunSettings, hookPoint: string): Promise<RunOutcome>
  resume(runId: string, options: ResumeOptions): Promise<RunOutcome>
  cancel(runId: string, reason: string): Promise<RunOutcome>
  childResult(runId: string): Promise<ChildResult>
}

/** What the parent's engine lends its step's children. */
export interface ChildEnvironment {
  store: RunStore
  registry: StepRegistry
  now: () => Date
  user: string
  /** The parent's signal: a child the step gives no signal of its own stops with its parent. */
  signal: AbortSignal | undefined
  /** A sub-engine on the same store, stopped by `signal`, whose progress is reported under `label`. */
  engineFor(signal: AbortSignal | undefined, label: string): ChildEngine
  /** Set when children are jobs of a queue (pipe worker): they are driven there, not by a sub-engine here. */
  dispatch?: ChildDispatch
}

/** The step whose children these are, in its run. */
export interface ParentStep {
  parent: RunRecord
  step: Step
  seq: number
  settings: RunSettings
  /** The run's history, to find an earlier blocked visit of the step whose children continue. */
  snapshots: readonly Snapshot[]
}

export function childRuns(env: ChildEnvironment, of: ParentStep): ChildRuns {
  const {store} = env
  const {parent, step, seq, settings} = of
  const existing = once(() => existingChildren(store, parent.run_id, step.id, childSeqs(of)))
  const load = childLoader(env.registry, of)
  return {
    run: async (request) => {
      const loaded = await load(request.file)
      const prices = settings.pipeline.pipeline.provider?.prices ?? settings.inheritedPrices
      const childSettings: RunSettings = {
        pipeline: loaded,
        policy: settings.policy,
        cwd: settings.cwd,
        ...(prices ? {inheritedPrices: prices} : {}),
        ...(settings.env ? {env: settings.env} : {}),
        budgetParents: [
          {run_id: parent.run_id, pipeline: settings.pipeline.pipeline, step, ...(settings.inheritedPrices ? {inherited: settings.inheritedPrices} : {})},
          ...(settings.budgetParents ?? []),
        ],
      }
      const index = request.index ?? 0
      const sub = env.engineFor(request.signal ?? env.signal, request.index !== undefined ? `${step.id}[${request.index}]` : step.id)
      const known = (await existing()).get(index)
      let runId: string
      if (known === undefined) {
        const now = env.now()
        const inputs = childInputs(step.id, loaded, request.inputs)
        const link = {
          run_id: parent.run_id,
          step: step.id,
          seq,
          ...(request.index !== undefined ? {index: request.index} : {}),
          ...(request.key !== undefined ? {key: request.key} : {}),
        }
        const birth = newRun({
          featureId: parent.feature_id,
          pipeline: loaded,
          policy: settings.policy,
          provider: parent.provider,
          input: parent.input,
          inputs,
          // Inline steps are the parent's own text: they read its aliases too, and this item under its own.
          ...(request.aliases !== undefined ? {aliases: {...(parent.aliases as Record<string, JsonValue> | undefined), ...request.aliases}} : {}),
          cwd: settings.cwd,
          // The parent's, not found anew: a command of the parent may have planted a .git by now.
          workspaceGit: parent.workspace_git,
          ...(parent.context_ref ? {contextRef: parent.context_ref} : {}),
          parent: link,
          // Whoever started the parent started its children: a rule's self_approval holds for a child's gate too.
          ...(parent.started_by ? {startedBy: parent.started_by} : {}),
          reason: `pipeline ${loaded.pipeline.name}, child of run ${parent.run_id} step ${step.id} (#${seq})${request.index !== undefined ? ` item ${request.index}` : ''}`,
          now,
          user: env.user,
        })
        runId = env.dispatch
          ? await env.dispatch.drive({birth}, request.concurrency ?? 1, request.signal ?? env.signal)
          : (await sub.launch(birth, childSettings, `child-created:${step.id}`)).run_id
      } else if (env.dispatch) {
        runId = known.run_id
        if (!isFinal(known.status)) await env.dispatch.drive({runId}, request.concurrency ?? 1, request.signal ?? env.signal)
      } else {
        runId = known.run_id
        // A finished child keeps its result; a failed one is the item's failure, not something to redrive.
        if (!isFinal(known.status)) await sub.resume(runId, childSettings)
      }
      return sub.childResult(runId)
    },
    skipped: async () => {
      const out = new Map<number, SkippedChild>()
      const skips = parent.skips ?? []
      if (!skips.some((s) => s.step === step.id)) return out
      // Bound to the very child the person skipped: an item of another visit of the step is not this one.
      for (const [index, record] of await existing()) {
        const skip = skips.findLast((s) => s.step === step.id && s.run_id === record.run_id)
        if (skip) out.set(index, {run_id: skip.run_id, by: skip.by, at: skip.at, note: skip.note, run_dependents: skip.run_dependents})
      }
      return out
    },
    cancel: async (runId, reason) => {
      const record = await store.readRun(runId)
      if (isFinal(record.status)) return
      const here = async (): Promise<void> => void (await env.engineFor(undefined, step.id).cancel(runId, reason))
      await (env.dispatch ? env.dispatch.cancel(runId, reason, here) : here())
    },
  }
}

/**
 * The seqs of the step whose children are this visit's: its own, those a redrive retried (it runs
 * the step again under the next seq), and those of an earlier visit that ended blocked and routed
 * on (its children wait for a person) when the run comes back to the step (pipe resume of a blocked
 * end whose next is this step).
 */
function childSeqs({parent, step, seq, snapshots}: ParentStep): Set<number> {
  const seqs = new Set([seq, ...retriedSeqs(parent, step.id, seq)])
  for (;;) {
    const first = Math.min(...seqs)
    const before = snapshots.findLast((s) => s.run_id === parent.run_id && s.step.name === step.id && s.step.seq < first)
    if (before?.decisions.at(-1)?.decision !== 'blocked' || seqs.has(before.step.seq)) break
    seqs.add(before.step.seq)
    for (const s of retriedSeqs(parent, step.id, before.step.seq)) seqs.add(s)
  }
  return seqs
}

/** The children the step started already, by item index (the latest when an index has two). */
async function existingChildren(store: RunStore, runId: string, stepId: string, seqs: ReadonlySet<number>): Promise<Map<number, RunRecord>> {
  const out = new Map<number, RunRecord>()
  // A child a crash left staged after indexing it is this step's child: finish it before looking.
  await store.finishCreations()
  for (const record of await childrenOf(store, runId)) {
    const link = record.parent!
    if (link.step !== stepId || !seqs.has(link.seq)) continue
    const index = link.index ?? 0
    const before = out.get(index)
    if (!before || before.created_at <= record.created_at) out.set(index, record)
  }
  return out
}

/** Loads each child pipeline once per step visit, however many items run it. */
function childLoader(registry: StepRegistry, {step, settings}: ParentStep): (file: string | undefined) => Promise<LoadedPipeline> {
  const loaded = new Map<string, Promise<LoadedPipeline>>()
  return (file) => {
    const key = file ?? ''
    let loading = loaded.get(key)
    if (!loading) {
      // No file: the step's inline steps, taken from the pipeline as loaded (never resolved by this run's expressions).
      const index = settings.pipeline.pipeline.steps.findIndex((s) => s.id === step.id)
      const loader = file === undefined ? loadInlinePipeline(settings.pipeline, index, catalogOf(registry)) : loadPipeline(file, catalogOf(registry))
      loading = loader.then((result) => {
        if (result.ok) {
          // As for a run started by hand: its *_env values are secrets, and its declared secrets must be set before the child exists.
          addSecretsNamedIn(result.loaded.pipeline)
          readSecrets(result.loaded.pipeline, settings.env)
          return result.loaded
        }
        const first = result.diagnostics[0]
        throw new PipeError(
          'E_CONFIG',
          `step ${step.id}: the child pipeline ${file ?? '(inline steps)'} is not valid${first ? ` (${first.file}:${first.line}:${first.col} ${first.message})` : ''}`,
          {hint: `Check it with pipe validate ${file ?? settings.pipeline.file}.`},
        )
      })
      loaded.set(key, loading)
    }
    return loading
  }
}

/** Runs `make` on the first call only: the children are looked up when a child first runs, once per visit. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined
  return () => (made ??= make())
}

/** A child's inputs from its parent step's `with:`, checked against the child's declarations; a list or map given to a string input is passed as its JSON text. */
function childInputs(stepId: string, loaded: LoadedPipeline, given: Record<string, JsonValue>): NonNullable<RunRecord['inputs']> {
  const declarations = (loaded.pipeline.inputs ?? {}) as Record<string, InputDeclaration>
  const data: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(given)) {
    // A string input takes any value as its text, as an argument vector element does.
    data[name] =
      declarations[name]?.type === 'string' && value !== null && typeof value !== 'string'
        ? typeof value === 'object'
          ? JSON.stringify(value)
          : String(value)
        : value
  }
  const resolved = resolveInputs(declarations, {file: {name: `with: of step ${stepId}`, data}})
  if (resolved.problems.length > 0) {
    throw new PipeError(
      'E_CONFIG',
      `step ${stepId}: the inputs for ${loaded.file} do not fit its inputs: ${resolved.problems.map((p) => p.message).join('; ')}`,
      {hint: `Compare with: in step ${stepId} with the inputs: the child pipeline declares.`},
    )
  }
  return resolved.values
}

/** What a parent's step learns of a child run: its status, why, its error and its last step. */
export function childResultOf(record: RunRecord, last: Snapshot | undefined): ChildResult {
  const runId = record.run_id
  const outcome = last?.decisions.at(-1)?.decision
  return {
    run_id: runId,
    status: record.status,
    ...(record.status_reason ? {reason: record.status_reason} : last?.decisions.at(-1) ? {reason: last.decisions.at(-1)!.reason} : {}),
    ...(record.error ? {error: {code: record.error.code, message: record.error.message}} : {}),
    ...(last && outcome !== undefined ? {last_step: {id: last.step.name, outcome}} : {}),
    spec_version: record.spec_version ?? null,
    ...(record.status === 'succeeded' && record.outputs ? {outputs: record.outputs as Record<string, JsonValue>} : {}),
  }
}
