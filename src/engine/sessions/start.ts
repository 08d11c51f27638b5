/** pipe run: a new run, started once everything it needs is checked. */
import path from 'node:path'
import {Store} from '../../store/store.js'
import type {RunOutcome} from '../engine.js'
import {type StartSession, engineFor, guarding} from './shared.js'
import {prepareStart} from './prepare.js'

export async function startSession(options: StartSession): Promise<RunOutcome> {
  const {pipeline, policy, answers, input, provider, inputs} = await prepareStart(options)
  const store = await Store.open(path.resolve(options.cwd, options.store))
  return engineFor(store, options, provider.create, provider.replies).start({
    pipeline,
    policy: guarding(policy, store),
    cwd: options.cwd,
    input,
    inputs,
    provider: provider.record,
    ...(options.feature ? {featureId: options.feature} : {}),
    ...(answers ? {answers} : {}),
    ...(options.decision ? {review: {decision: options.decision, ...(options.note ? {note: options.note} : {})}} : {}),
  })
}
