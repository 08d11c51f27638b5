/**
 * Schedules (a pipeline's `schedules:`): which slots are due, and firing each exactly once.
 *
 * A slot's key is (workspace, pipeline file under the workspace's root, schedule name or index),
 * so another checkout of the repository on another machine shares it. On a PostgreSQL store the
 * firing's row and its queued run are one transaction whose primary key is the slot (store/
 * postgres/work.ts): every worker may look, one run is queued. On a folder store a file per slot,
 * made only if absent, takes the slot before its run starts (store/file/firings.ts).
 *
 * The clock is PIPE_NOW when set (an ISO 8601 instant), so a test moves it instead of waiting for a slot.
 */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {dueSlots, loadCron, parseCron, CATCH_UP_CAP, type CatchUp} from '../../util/cron.js'
import type {LoadedPipeline} from '../../config/loaded.js'
import {loadPipelineOrThrow} from '../sessions/shared.js'
import {workspaceOf, type LocalWorkspace} from '../worker/workspace.js'
import type {Cron} from 'croner'
import {readdir, readFile} from '../../util/fs-async.js'

export interface ScheduleEntry {
  /** The pipeline file as given. */
  pipeline: string
  name: string
  key: string
  cron: string
  timezone: string
  queue: string
  catch_up: CatchUp
  inputs: Record<string, unknown>
  parsed: Cron
}

export interface Scheduled {
  file: string
  loaded: LoadedPipeline
  workspace: LocalWorkspace
  entries: ScheduleEntry[]
}

/** The pipelines given (or, with none, those of ./pipelines/ that declare schedules), each loaded and checked as pipe run would. */
export async function loadScheduled(files: readonly string[], cwd: string): Promise<Scheduled[]> {
  const Cron = await loadCron()
  const given = files.length > 0 ? files : await declaringSchedules(cwd)
  const out: Scheduled[] = []
  for (const file of given) {
    const loaded = await loadPipelineOrThrow(path.resolve(cwd, file))
    const workspace = await workspaceOf(path.dirname(loaded.file))
    const where = path.relative(workspace.root, path.resolve(loaded.file)).split(path.sep).join('/')
    const entries = (loaded.pipeline.schedules ?? []).map((s, index): ScheduleEntry => {
      const name = s.name ?? String(index)
      const timezone = s.timezone ?? 'UTC'
      const parsed = parseCron(Cron, s.cron, timezone)
      // pipe validate's rule said so already; a pipeline loaded here passed it.
      if (parsed.cron === undefined)
        throw new PipeError('E_CONFIG', `${file}: schedule ${name}: ${parsed.problem}`, {hint: `pipe validate ${file} shows where.`})
      return {
        pipeline: file,
        name,
        key: `${workspace.id}:${where}#${name}`,
        cron: s.cron,
        timezone,
        queue: s.queue ?? 'default',
        catch_up: s.catch_up ?? 'none',
        inputs: s.inputs ?? {},
        parsed: parsed.cron,
      }
    })
    if (entries.length === 0 && files.length > 0)
      throw new PipeError('E_INVALID_ARGS', `${file} declares no schedules`, {
        hint: 'Add schedules: [{cron: "0 2 * * *"}] to the pipeline (docs/team.md, Schedules), or leave it out.',
      })
    out.push({file, loaded, workspace, entries})
  }
  return out
}

async function declaringSchedules(cwd: string): Promise<string[]> {
  const dir = path.join(cwd, 'pipelines')
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) => /\.ya?ml$/.test(n)).sort()
  const found: string[] = []
  for (const name of names) {
    const file = path.join(dir, name)
    const loaded = await loadPipelineOrThrow(file).catch(async (error: unknown) => {
      // A broken pipeline that declares schedules would otherwise never fire, and run-due say nothing.
      if (/^schedules:/m.test(await readFile(file, 'utf8').catch(() => ''))) throw error
      return null
    })
    if ((loaded?.pipeline.schedules ?? []).length > 0) found.push(path.join('pipelines', name))
  }
  if (found.length === 0)
    throw new PipeError('E_INVALID_ARGS', 'no pipeline given, and none under ./pipelines declares schedules', {
      hint: 'Name the pipelines: pipe schedule list pipelines/nightly.yaml.',
    })
  return found
}

/** One slot to fire, and what was left out of the missed ones. */
export interface DuePlan {
  entry: ScheduleEntry
  fire: Date[]
  skipped: number
  /** More slots were missed than were looked at: skipped is at least this many. */
  capped: boolean
}

export function planDue(entries: readonly ScheduleEntry[], last: ReadonlyMap<string, Date>, now: Date): DuePlan[] {
  return entries.map((entry) => ({entry, ...dueSlots(entry.parsed, now, last.get(entry.key) ?? null, entry.catch_up)}))
}

/** What a plan's skipped slots say in a log. */
export function skippedNote(plan: DuePlan): string | undefined {
  if (plan.skipped === 0) return undefined
  const why = plan.entry.catch_up === 'all' ? `more than ${CATCH_UP_CAP} slots were missed` : `catch_up: ${plan.entry.catch_up}`
  return `${plan.entry.pipeline} schedule ${plan.entry.name}: ${plan.capped ? 'at least ' : ''}${plan.skipped} missed slot(s) not fired (${why})`
}

/** The next slot after `now`, or null when the expression fires no more. */
export function nextSlot(entry: ScheduleEntry, now: Date): Date | null {
  return entry.parsed.nextRun(now)
}
