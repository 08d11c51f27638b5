/**
 * A run's commit log (runs/R/commits.jsonl): one line per step that writes records, appended and
 * synced before the records are written (see commit.ts). Also the journal file an older pipe wrote
 * for an interrupted commit (runs/R/journal.json), read once and moved into the log.
 */
import {PipeError} from '../../errors.js'
import {appendSynced} from '../../util/fs.js'
import {rm} from '../../util/fs-async.js'
import {readOwnJson, type FileLayout} from './files.js'
import {readText} from './trail.js'

/** Appends a journal to the run's commit log: the step's one sync. A torn last line (a crash mid-append) is cut off first. */
export async function appendCommit(layout: FileLayout, runId: string, journal: unknown): Promise<void> {
  await appendSynced(layout.commitLogFile(runId), `${JSON.stringify(journal)}\n`)
}

/**
 * The commit log's lines; a torn last line is left out. A line that is not JSON elsewhere was
 * changed outside pipe: E_INTEGRITY, or with `lenient` (repairing a run that has ended, where only
 * records a snapshot binds are rewritten) left out.
 */
export async function readCommitLog(layout: FileLayout, runId: string, lenient = false): Promise<unknown[]> {
  const text = (await readText(layout.commitLogFile(runId))) ?? ''
  const raw = text.split('\n')
  // The last element is '' after a complete last line, or a torn line: either way not a line.
  raw.pop()
  return raw.map((line, i) => {
    try {
      return JSON.parse(line) as unknown
    } catch {
      if (lenient) return undefined
      throw new PipeError('E_INTEGRITY', `line ${i + 1} of the commit log of ${runId} is not valid JSON`, {
        hint: `It is appended whole, so it was changed outside pipe: ${layout.commitLogFile(runId)}`,
      })
    }
  })
}

export async function readJournal(layout: FileLayout, runId: string): Promise<unknown> {
  return (await readOwnJson(layout.journalFile(runId), `the commit journal of ${runId}`)) ?? null
}

export async function deleteJournal(layout: FileLayout, runId: string): Promise<void> {
  await rm(layout.journalFile(runId), {force: true})
}
