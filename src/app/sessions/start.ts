/** pipe run: a new run, started once everything it needs is checked. */
import {openStore, storeLocation} from '../../store/open.js'
import type {RunOutcome} from '../../engine/engine.js'
import {type StartSession, engineFor} from './shared.js'
import {prepareStart, storeSettings, type PreparedStart} from './prepare.js'

/** `prepared`: prepareStart's result when the caller checked first (a schedule's slot is taken only once its run can start). */
export async function startSession(options: StartSession, prepared?: PreparedStart): Promise<RunOutcome> {
  const {settings, provider} = prepared ?? (await prepareStart(options))
  const store = await openStore(storeLocation(options.cwd, options.store), 'create')
  return engineFor(store, options, provider.create, provider.replies).start(await storeSettings(settings, store, options.signal))
}
