/** pipe run: a new run, started once everything it needs is checked. */
import {openStore, storeLocation} from '../../store/open.js'
import type {RunOutcome} from '../../engine/engine.js'
import {type StartSession, engineFor, guarding} from './shared.js'
import {measuredTools} from './tool-versions.js'
import {prepareStart} from './prepare.js'

export async function startSession(options: StartSession): Promise<RunOutcome> {
  const {pipeline, policy, answers, input, provider, inputs, contextRef} = await prepareStart(options)
  const store = await openStore(storeLocation(options.cwd, options.store), 'create')
  const guarded = guarding(policy, store)
  // Measured before the run exists, so a refused mismatch leaves nothing behind.
  const toolVersions = await measuredTools(guarded, options.cwd, options.signal)
  return engineFor(store, options, provider.create, provider.replies).start({
    pipeline,
    policy: guarded,
    cwd: options.cwd,
    ...(toolVersions ? {toolVersions} : {}),
    input,
    inputs,
    provider: provider.record,
    ...(options.feature ? {featureId: options.feature} : {}),
    ...(contextRef ? {contextRef} : {}),
    ...(answers ? {answers} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  })
}
