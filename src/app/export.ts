/** pipe export: a run's records written as seed 004's files (the layout the engine also keeps live, engine/export.ts). */
import {exportRun} from '../engine/export.js'
import {openStore, storeLocation} from '../store/open.js'

export async function exportSession(options: {cwd: string; store: string; runId: string; dir: string}): Promise<{dir: string; files: string[]}> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  return exportRun(store, options.runId, options.dir)
}
