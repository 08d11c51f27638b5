/**
 * pipe export: the run's records as seed 004's artifact layout, for people who want files.
 *
 *   DIR/prd.md, DIR/tasks.json                 the run's latest spec, when it has one
 *   DIR/runs/RUN/state.json                    run id, project, current task, phase, attempts, last commit, policy
 *   DIR/runs/RUN/timeline.md                   one entry per step and state change
 *   DIR/runs/RUN/verdict.json                  the last QA verdict
 *   DIR/runs/RUN/task_ID/attempt_NN/           plan.json, patch.diff, patch_apply.json, qa_step_NN_STAGE.log, verdict.json
 *   DIR/runs/RUN/steps/NN_STEP/                a run without tasks: each step's logs and verdict, by step
 *   DIR/runs/CHILD/…                           each child run (pipeline and foreach steps), the same way
 */

import {existsSync} from 'node:fs'
import path from 'node:path'
import type {CommandResult} from '../policy/exec.js'
import {specToMarkdown} from '../spec/markdown.js'
import {handlerNamed} from '../steps/registry.js'
import type {ExportRole} from '../steps/types.js'
import type {Snapshot} from '../types/snapshot.js'
import {loadPolicyFile} from '../config/policy.js'
import {childrenOf} from '../store/queries.js'
import type {RunStore} from '../store/types.js'
import {faultPoint} from '../util/faults.js'
import {makeDirs} from '../util/fs.js'
import {writeHeld} from '../util/held-dir.js'

/**
 * The folder of a task's attempts, task_ID. A task id may be known only at run time (an input, an
 * item of a model's plan), so it is one folder name whatever it holds: percent-encoded, a
 * separator included, so that "/../../x" can take the files nowhere outside the run's folder.
 * An id of letters, digits, "-", "_" and "." is unchanged.
 */
function taskFolder(task: string): string {
  return `task_${encodeURIComponent(task)}`
}

export interface Attempt {
  task: string
  number: number
  snapshots: Snapshot[]
}

function log(result: CommandResult): string {
  const part = (name: string, s: CommandResult['stdout']): string =>
    `--- ${name} (${s.total_bytes} bytes)\n${s.head}${s.omitted_bytes > 0 ? `\n... ${s.omitted_bytes} bytes omitted ...\n` : ''}${s.tail}`
  return `$ ${result.argv.join(' ')}\n# cwd ${result.cwd}\n# exit ${result.exit_code ?? '-'}${result.signal ? ` signal ${result.signal}` : ''}${result.timed_out ? ' (timed out)' : ''} in ${result.duration_ms} ms\n${part('stdout', result.stdout)}\n${part('stderr', result.stderr)}\n`
}

/** What the snapshot's kind writes; a kind this version of pipe does not know writes nothing. */
export function roleOf(s: Snapshot): ExportRole {
  return handlerNamed(s.step.kind)?.exportRole ?? {}
}

/** The task a snapshot worked on: its inputs say so, or, for a step that failed before it gave any, its error. */
function taskOf(s: Snapshot): string | undefined {
  const given = (s.inputs as {task?: unknown}).task ?? (s.errors.at(-1)?.details as {task?: unknown} | undefined)?.task
  return typeof given === 'string' ? given : undefined
}

/**
 * Whether a run's steps did coding tasks: a step that starts attempts (an edit, an agent) or names
 * its task. A run of commands alone (a review that reads a diff) has steps, not tasks.
 */
export function hasTasks(snapshots: readonly Snapshot[]): boolean {
  return snapshots.some((s) => roleOf(s).attempt === 'starts' || taskOf(s) !== undefined)
}

/** Groups the coding steps into tasks and attempts, as each kind's export role says (an edit starts an attempt of its task); none for a run without tasks. */
export function attempts(snapshots: Snapshot[]): Attempt[] {
  const out: Attempt[] = []
  if (!hasTasks(snapshots)) return out
  const current = new Map<string, Attempt>()
  for (const s of snapshots) {
    const role = roleOf(s).attempt
    if (role === undefined) continue
    const task = taskOf(s) ?? 'main'
    let attempt = current.get(task)
    if (!attempt || role === 'starts' || (role === 'once' && attempt.snapshots.some((x) => x.step.kind === s.step.kind))) {
      attempt = {task, number: out.filter((a) => a.task === task).length + 1, snapshots: []}
      out.push(attempt)
      current.set(task, attempt)
    }
    attempt.snapshots.push(s)
  }
  return out
}

/**
 * Seed 004's artifacts written as a run goes: the layout of `exportRun` under STORE/artifacts/ (the
 * store is git-ignored and outside the sandbox, so neither a checkpoint nor an agent touches them).
 * Called after each recorded step and status change of a run whose pipeline says `artifacts: true`,
 * and of its child runs: it rewrites that run's files (each atomically) from the records, so after a
 * crash the next write, or the resume, makes them consistent again.
 */
export async function writeLiveArtifacts(store: RunStore, runId: string, kept = true): Promise<void> {
  // The whole family is written from its top run, as pipe export of that run writes it: a child's
  // change shows in its parent's state.json too, and artifacts/ is never a mix of two moments.
  let top = await store.readRun(runId)
  while (top.parent) top = await store.readRun(top.parent.run_id)
  const dir = liveArtifactsDir(store)
  // A run whose own pipeline does not say artifacts: true keeps them when its family's are kept.
  if (!kept && !existsSync(path.join(dir, 'runs', top.run_id, 'state.json'))) return
  await exportRun(store, top.run_id, dir)
}

export function liveArtifactsDir(store: RunStore): string {
  return path.join(store.root, 'artifacts')
}

/**
 * What state.json says of a run and the runs below it: attempts per task (a task retried in a new
 * child run adds that run's attempts), the task worked on last and the last commit, in the order
 * the steps ended.
 */
async function familyOf(
  store: RunStore,
  runId: string,
  own: Snapshot[],
): Promise<{attemptsByTask: Record<string, number>; currentTask: string | null; lastCommit: string | null}> {
  const attemptsByTask: Record<string, number> = {}
  const worked: Array<{at: string; task: string}> = []
  const commits: Array<{at: string; hash: string}> = []
  const visit = async (id: string, snapshots: Snapshot[]): Promise<void> => {
    const here: Record<string, number> = {}
    for (const a of attempts(snapshots)) {
      here[a.task] = Math.max(here[a.task] ?? 0, a.number)
      worked.push({at: a.snapshots.at(-1)!.step.ended_at, task: a.task})
    }
    for (const [task, n] of Object.entries(here)) attemptsByTask[task] = (attemptsByTask[task] ?? 0) + n
    for (const s of snapshots) {
      const hash = roleOf(s).commit?.(s)
      if (hash) commits.push({at: s.step.ended_at, hash})
    }
    for (const child of await childrenOf(store, id)) await visit(child.run_id, await store.readSnapshots(child.run_id))
  }
  await visit(runId, own)
  const last = <T extends {at: string}>(list: T[]): T | undefined => list.reduce<T | undefined>((a, b) => (a === undefined || b.at >= a.at ? b : a), undefined)
  return {attemptsByTask, currentTask: last(worked)?.task ?? null, lastCommit: last(commits)?.hash ?? null}
}

export async function exportRun(store: RunStore, runId: string, dir: string, top = true, recurse = true): Promise<{dir: string; files: string[]}> {
  const record = await store.readRun(runId)
  const snapshots = await store.readSnapshots(runId)
  const events = await store.readEvents(runId)
  const root = path.resolve(dir)
  const runDir = path.join(root, 'runs', runId)
  const files: string[] = []
  // Each file's folders are held on the way down (util/held-dir.ts): a link swapped into the tree
  // (the export dir may lie in the repository, where commands write) is refused, not followed.
  makeDirs(root)
  const write = async (file: string, content: string): Promise<void> => {
    await writeHeld(root, path.relative(root, file), content, {sync: false})
    faultPoint('artifact-file')
    files.push(path.relative(root, file))
  }
  const json = (value: unknown): string => `${JSON.stringify(value, null, 2)}\n`

  const children = await childrenOf(store, runId)
  // The spec files are the exported run's; a child's spec versions stay in its own state.json.
  if (top && record.spec_version) {
    const spec = await store.readSpec(record.spec_version)
    await write(path.join(root, 'prd.md'), specToMarkdown(spec))
    // A pipeline that planned its own tasks (a model step with spec_path: tasks) and architecture (spec_path: arch) has them as sections.
    const sections = (spec as {sections?: Record<string, unknown>}).sections ?? {}
    const planned = (sections['tasks'] as {tasks?: unknown} | undefined)?.tasks
    await write(path.join(root, 'tasks.json'), json(Array.isArray(planned) ? planned : spec.tasks))
    if (sections['arch'] !== undefined) await write(path.join(root, 'arch.json'), json(sections['arch']))
  }

  const groups = attempts(snapshots)
  // A parent's tasks are its children's: its state.json counts their attempts and names their last commit.
  const family = await familyOf(store, runId, snapshots)
  const policy = record.policy_path ? await loadPolicyFile(record.policy_path) : null
  let measured = record.tool_versions
  // A child measures nothing of its own: the tools are its top run's, measured when that run started.
  for (let up = record.parent; measured === undefined && up;) {
    const above = await store.readRun(up.run_id)
    measured = above.tool_versions
    up = above.parent
  }
  await write(
    path.join(runDir, 'state.json'),
    json({
      run_id: runId,
      project_id: record.feature_id,
      current_task_id: family.currentTask,
      phase: record.status,
      attempts_by_task: family.attemptsByTask,
      last_commit_hash: family.lastCommit,
      policy_version: record.policy_version,
      // As measured when the run (or its top run) started (declared, actual, status); a run from before that has only what its policy declared.
      tool_versions: measured ?? (policy?.ok ? (policy.loaded.policy.tool_versions ?? {}) : {}),
      spec_version: record.spec_version ?? null,
      ...(record.parent ? {parent: record.parent} : {}),
      ...(children.length > 0 ? {child_runs: children.map((c) => c.run_id)} : {}),
    }),
  )

  let lastVerdict: unknown = null
  // A run without tasks keeps its steps' files by step: steps/NN_STEP/ (a command's log, a QA verdict).
  const places =
    groups.length > 0
      ? groups.map((attempt) => ({
          task: attempt.task,
          base: path.join(runDir, taskFolder(attempt.task), `attempt_${String(attempt.number).padStart(2, '0')}`),
          snapshots: attempt.snapshots,
        }))
      : snapshots
          .filter((s) => roleOf(s).files !== undefined)
          .map((s) => ({
            task: '',
            base: path.join(runDir, 'steps', `${String(s.step.seq).padStart(2, '0')}_${encodeURIComponent(s.step.name)}`),
            snapshots: [s],
          }))
  for (const attempt of places) {
    const base = attempt.base
    let qaIndex = 0
    for (const s of attempt.snapshots) {
      const part = roleOf(s).files?.(s, {task: attempt.task}) ?? {}
      for (const [name, content] of Object.entries(part.files ?? {})) await write(path.join(base, name), typeof content === 'string' ? content : json(content))
      const logs: string[] = []
      for (const {label, result} of part.logs ?? []) {
        qaIndex++
        const file = path.join(base, `qa_step_${String(qaIndex).padStart(2, '0')}_${label}.log`)
        await write(file, log(result))
        logs.push(path.relative(root, file).split(path.sep).join('/'))
      }
      if (part.verdict) {
        // full_logs names the log files written for this snapshot (relative to the artifacts root), the failing one last.
        const verdict =
          typeof part.verdict === 'object' && part.verdict !== null && 'full_logs' in part.verdict ? {...part.verdict, full_logs: logs} : part.verdict
        lastVerdict = verdict
        await write(path.join(base, 'verdict.json'), json(verdict))
      }
    }
  }
  if (lastVerdict) await write(path.join(runDir, 'verdict.json'), json(lastVerdict))

  const entries: Array<{at: string; text: string}> = events.map((e) => ({
    at: e.at,
    text: `**${e.event}**${e.to ? ` -> ${e.to}` : ''}${e.tool ? ` \`${e.tool}\`${e.step ? ` in ${e.step}` : ''}` : ''}${e.reason ? `: ${e.reason}` : ''}${e.by && !e.reason?.includes(`by ${e.by}`) ? ` (by ${e.by})` : ''}`,
  }))
  // Seed 004 §10.1: each entry of a task's step names its attempt.
  const attemptOf = new Map(groups.flatMap((a) => a.snapshots.map((s) => [s, a.number] as const)))
  for (const s of snapshots) {
    const d = s.decisions.at(-1)
    const task = taskOf(s) ?? (attemptOf.has(s) ? 'main' : undefined)
    const bits = [
      `#${s.step.seq} \`${s.step.name}\` (${s.step.kind})${task ? ` task ${task}` : ''}${attemptOf.has(s) ? ` attempt ${attemptOf.get(s)}` : ''}: ${d?.decision ?? '?'}`,
    ]
    bits.push(...(roleOf(s).timeline?.(s) ?? []))
    if (s.errors.length) bits.push(`error: ${s.errors.at(-1)!.code} ${s.errors.at(-1)!.message}`)
    entries.push({at: s.step.ended_at, text: bits.join('; ')})
  }
  entries.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
  await write(path.join(runDir, 'timeline.md'), `# Timeline of ${runId}\n\n${entries.map((e) => `- ${e.at} ${e.text}`).join('\n')}\n`)
  if (recurse) for (const child of children) files.push(...(await exportRun(store, child.run_id, root, false)).files)
  return {dir: root, files: files.sort()}
}
