/**
 * `pipe stats [--pipeline NAME] [--since DATE] --json` read in this process: the report the command
 * builds (`collectStats` over the store it opens) as it prints it (JSON). A process spawned only to
 * read a run's metrics for an assertion costs a whole CLI start; a test of how the command itself
 * prints, filters or refuses its flags still runs it as a process.
 */
import path from 'node:path'
import {collectStats, type StatsReport} from '../../src/app/stats.js'
import {readIn} from './stores.js'

/** The stats of the folder store under `cwd` (its .pipe), as `pipe stats --json` run there prints them. */
export async function statsIn(cwd: string, filter: {pipeline?: string; since?: string} = {}): Promise<StatsReport> {
  const report = await readIn(path.join(cwd, '.pipe'), (store) => collectStats(store, filter))
  return JSON.parse(JSON.stringify(report)) as StatsReport
}
