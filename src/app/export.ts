/** pipe export: a run's records written as seed 004's files (the layout the engine also keeps live, engine/export.ts). */
import path from 'node:path'
import {exportRun} from '../engine/export.js'
import {Store} from '../store/store.js'

export async function exportSession(options: {cwd: string; store: string; runId: string; dir: string}): Promise<{dir: string; files: string[]}> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  return exportRun(store, options.runId, options.dir)
}
