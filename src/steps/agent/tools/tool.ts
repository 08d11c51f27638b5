/**
 * What every tool of an agent step shares: the place it runs in (the repository root, the policy,
 * the step's edit scope), what it answers, and the helpers that keep every path inside the root
 * and every refusal reported as one.
 */
import {existsSync, lstatSync, readdirSync, statSync, type Stats} from 'node:fs'
import path from 'node:path'
import type {EditResult} from '../../../edit/workspace.js'
import {PipeError} from '../../../errors.js'
import type {CommandResult} from '../../../policy/exec.js'
import type {LoadedPolicy} from '../../../policy/policy.js'
import type {ToolLevel} from '../../../policy/tools.js'
import {assertPath, checkPath} from '../../../policy/rules.js'
import {redact} from '../../../util/redact.js'

export interface ToolPlace {
  policy: LoadedPolicy
  /** The repository root: the run's working directory. */
  root: string
  signal: AbortSignal
  slotsDir: string
  /** The files the step's edits may change (its task's files_touched and forbidden_paths); absent: any the policy allows. */
  edits?: EditScope
  /** Lines the step's edits changed before this call: in this attempt, and in its task (every attempt of the step in this run). */
  patchLines?: {attempt: number; task: number; step: string}
}

/** Paths or globs relative to the repository root (a glob that matches a directory covers what is under it). */
export interface EditScope {
  /** Only these may be changed or created; absent: any. */
  files_touched?: readonly string[]
  /** Never these, even inside files_touched. */
  forbidden_paths?: readonly string[]
}

export interface ToolOutcome {
  /** Whether the tool did what was asked. */
  ok: boolean
  /** What the model gets back (matches the tool's result schema). */
  result: Record<string, unknown>
  /** One line for the snapshot and progress. */
  summary: string
  /** The policy refused it (a path outside the root, a command not allowed). */
  denied?: boolean
  files_changed?: string[]
  /** Unified diff of what it changed. */
  patch?: string
  /** For run_command: each segment's full result. */
  commands?: CommandResult[]
  /** For apply_edit_blocks: what undoes it. */
  edit?: EditResult
}

export interface AgentTool {
  name: string
  description: string
  parameters: Record<string, unknown>
  resultSchema: Record<string, unknown>
  /** Whether it changes the repository or the world (then the run's cache of safe results is dropped). */
  mutates: boolean
  /** The level a pipeline declared for a tool of its own (the policy may make it stricter); absent: the policy's level. */
  level?: ToolLevel
  /** For a tool that runs one argument vector: the vector a call would run (what a person confirms), or why it cannot run. */
  plan?(args: Record<string, unknown>): {ok: true; argv: string[]} | {ok: false; error: string}
  run(args: Record<string, unknown>, place: ToolPlace): Promise<ToolOutcome>
}

/** Most entries a listing answers (list_directory, find_files). */
export const MAX_LIST = 500

const errorResult = {type: 'object', required: ['error'], properties: {error: {type: 'string'}}}
export function withError(schema: Record<string, unknown>): Record<string, unknown> {
  return {anyOf: [schema, errorResult]}
}

export function denied(error: unknown): ToolOutcome | null {
  if (error instanceof PipeError && error.code === 'E_POLICY_DENIED')
    return {ok: false, denied: true, result: {error: redact(error.message)}, summary: `denied: ${redact(error.message)}`}
  return null
}

export function failed(message: string): ToolOutcome {
  return {ok: false, result: {error: message}, summary: message}
}

/** Every file under `dir` (relative to root, forward slashes) that the policy lets the model see. */
export function walk(place: ToolPlace, dir: string, out: string[], limit: number): boolean {
  const full = path.resolve(place.root, dir)
  let names: string[]
  try {
    names = readdirSync(full).sort()
  } catch {
    return true
  }
  for (const name of names) {
    const relative = dir === '.' ? name : `${dir}/${name}`
    if (!checkPath(place.policy, place.root, relative).allowed) continue
    // A link is not descended into (as ripgrep does not): a link to a directory above it would loop.
    const own = lstatSync(path.join(full, name), {throwIfNoEntry: false})
    let info: Stats | undefined
    try {
      info = own?.isSymbolicLink() ? statSync(path.join(full, name), {throwIfNoEntry: false}) : own
    } catch {
      info = undefined
    }
    if (!info) continue
    if (info.isDirectory() && own?.isSymbolicLink()) continue
    if (info.isDirectory()) {
      if (name === 'node_modules') continue
      if (!walk(place, relative, out, limit)) return false
    } else if (info.isFile()) {
      if (out.length >= limit) return false
      out.push(relative)
    }
  }
  return true
}

export function directoryOf(place: ToolPlace, given: string | undefined): string {
  const verdict = assertPath(place.policy, place.root, given ?? '.')
  if (!existsSync(verdict.resolved) || !statSync(verdict.resolved).isDirectory()) throw new PipeError('E_INVALID_ARGS', `"${given ?? '.'}" is not a directory`)
  return verdict.relative === '' ? '.' : verdict.relative
}
