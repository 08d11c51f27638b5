/**
 * A run's timeline (runs/R/events.jsonl): append-only, each line chained to the one before and
 * binding the run record's state at that change (see integrity.ts, sealLine).
 */
import {PipeError} from '../../errors.js'
import type {RunEvent} from '../../types/run.js'
import {appendSynced} from '../../util/fs.js'
import {readFile} from '../../util/fs-async.js'
import {within, type FileLayout} from './files.js'
import {sealLine} from '../trail/integrity.js'
import {lineText} from '../trail/records.js'
import {eventLineProblem, isObject, notAnObject} from '../trail/shapes.js'
import {readText} from './trail.js'

export function timelineFile(layout: FileLayout, runId: string): string {
  return within(layout.runDir(runId), 'events.jsonl')
}

/** Appends a chained line to the run's timeline, cutting off a torn last line first. */
export async function appendLine(layout: FileLayout, runId: string, event: RunEvent): Promise<{count: number; hash: string}> {
  const file = timelineFile(layout, runId)
  // The tail this store appended itself under the run's lock needs no reading (see FileLayout.owned).
  let tail: {count: number; hash: string | null} | undefined = layout.owned.get(runId)?.timeline
  if (!tail) {
    // Complete lines only: a torn last line (a crash mid-append) is cut off by appendSynced.
    const text = (await readText(file)) ?? ''
    const lines = text
      .slice(0, text.lastIndexOf('\n') + 1)
      .split('\n')
      .filter((l) => l.trim())
    const last = lines.at(-1)
    const parsed = last ? (JSON.parse(last) as unknown) : null
    if (last && !(isObject(parsed) && typeof parsed.hash === 'string'))
      throw new PipeError('E_INTEGRITY', `the last line of ${file} is not a timeline line pipe wrote`, {hint: 'Run pipe audit verify to see the damage.'})
    tail = {count: lines.length, hash: isObject(parsed) ? (parsed.hash as string) : null}
  }
  const sealed = sealLine(event, tail.hash)
  await appendSynced(file, `${lineText(sealed)}\n`)
  return {count: tail.count + 1, hash: sealed.hash}
}

export async function readEvents(layout: FileLayout, runId: string): Promise<RunEvent[]> {
  const file = timelineFile(layout, runId)
  const text = await readFile(file, 'utf8').catch(() => '')
  const events: RunEvent[] = []
  const lines = text.split('\n')
  for (const [i, line] of lines.entries()) {
    if (!line.trim()) continue
    let event: unknown
    try {
      event = JSON.parse(line)
    } catch {
      // A crash mid-append can leave a torn last line; everything before it is intact.
      if (i === lines.length - 1) continue
      throw new PipeError('E_INTEGRITY', `line ${i + 1} of the timeline of ${runId} is not valid JSON (${file})`, {
        hint: 'Lines are appended whole, so it was changed outside pipe; run pipe audit verify to see all damage.',
      })
    }
    const problem = isObject(event) ? eventLineProblem(event) : notAnObject(event)
    if (problem)
      throw new PipeError('E_INTEGRITY', `line ${i + 1} of the timeline of ${runId} is malformed (${file}): ${problem}`, {
        hint: 'It was changed outside pipe; run pipe audit verify to see all damage.',
      })
    events.push(event as RunEvent)
  }
  return events
}
