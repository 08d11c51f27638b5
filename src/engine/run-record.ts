/**
 * The one place a run record is made, for a run a person starts and for a child run a step
 * starts, so both carry the same fields in the same order and a field added to runs reaches both.
 */
import type {LoadedPipeline} from '../config/pipeline.js'
import type {LoadedPolicy} from '../policy/policy.js'
import type {RunDraft, RunStore} from '../store/types.js'
import type {RunEvent, RunRecord} from '../types/run.js'
import {dotGitOf} from '../util/git-dir.js'
import {selfIdentity} from '../util/lock.js'
import type {StartOptions} from './engine-types.js'

export interface NewRun {
  featureId: string
  pipeline: LoadedPipeline
  policy: LoadedPolicy
  provider: RunRecord['provider']
  input: RunRecord['input']
  inputs?: RunRecord['inputs']
  /** For a child run of inline steps: the aliases its expressions read (the foreach item). */
  aliases?: RunRecord['aliases']
  cwd: string
  /** Which repository git steps may use (see RunRecord.workspace_git); left out when unknown. */
  workspaceGit?: RunRecord['workspace_git']
  /** Seed 002's Project Context Ref (pipe run --context-ref PROJECT@VERSION); a child run has its parent's. */
  contextRef?: RunRecord['context_ref']
  startedBy?: RunRecord['started_by']
  toolVersions?: RunRecord['tool_versions']
  answers?: Record<string, string>
  review?: {decision: 'go' | 'hold' | 'drop'; note?: string}
  replayOf?: RunRecord['replay_of']
  /** For a child run: the step of the parent run that started it. */
  parent?: RunRecord['parent']
  /** Why the run exists, for the timeline's first line. */
  reason: string
  now: Date
  user: string
}

/** A run about to be created: its record, the time its ids are taken at, and its first timeline line. */
export interface RunBirth {
  draft: RunDraft
  now: Date
  created: RunEvent
}

/**
 * A run a person starts (pipe run, its --detach, pipe replay), from its settings as the session
 * built them: its feature, created unless one was named, and its birth. The same for a run this
 * process drives (Engine.start) and one put on a queue for a worker (`queue`).
 */
export async function birthOf(store: RunStore, start: StartOptions, at: {now: Date; user: string; queue?: string}): Promise<RunBirth> {
  const name = start.pipeline.pipeline.name
  let featureId = start.featureId
  if (featureId) await store.ensureFeature(featureId, at.now)
  else featureId = await store.createFeature(at.now, name)
  return newRun({
    ...start,
    featureId,
    // Which repository git steps may use: one that appears later may hold a command's hooks.
    workspaceGit: dotGitOf(start.cwd),
    reason: `pipeline ${name}, input ${start.input.ref}${at.queue !== undefined ? `; queued on ${at.queue}` : ''}`,
    now: at.now,
    user: at.user,
  })
}

export function newRun(run: NewRun): RunBirth {
  const at = run.now.toISOString()
  const draft: RunDraft = {
    feature_id: run.featureId,
    status: 'pending',
    pipeline: {path: run.pipeline.file, name: run.pipeline.pipeline.name, hash: run.pipeline.hash},
    policy_version: run.policy.version,
    policy_path: run.policy.file,
    ...(run.toolVersions ? {tool_versions: run.toolVersions} : {}),
    provider: run.provider,
    input: run.input,
    ...(run.inputs && Object.keys(run.inputs).length > 0 ? {inputs: run.inputs} : {}),
    ...(run.aliases ? {aliases: run.aliases} : {}),
    workspace: run.cwd,
    ...(run.workspaceGit !== undefined ? {workspace_git: run.workspaceGit} : {}),
    ...(run.contextRef ? {context_ref: run.contextRef} : {}),
    ...(run.startedBy ? {started_by: run.startedBy} : {}),
    ...(run.parent ? {parent: run.parent} : {}),
    ...(run.answers ? {answers: run.answers} : {}),
    ...(run.review ? {review: {decision: run.review.decision, by: run.user, at, ...(run.review.note ? {note: run.review.note} : {})}} : {}),
    ...(run.replayOf ? {replay_of: run.replayOf} : {}),
    spec_version: null,
    created_at: at,
    updated_at: at,
    owner: {...selfIdentity(), user: run.user},
  }
  return {draft, now: run.now, created: {at, event: 'created', to: 'pending', reason: run.reason, by: run.user}}
}
