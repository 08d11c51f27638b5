/** pipe confirm: a person's yes or no to the tool call a run waits at, and the run continued. */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {Store} from '../../store/store.js'
import type {RunOutcome} from '../engine.js'
import type {SessionOptions} from './shared.js'
import {resumeSession} from './resume.js'

export interface ConfirmSession extends SessionOptions {
  runId: string
  decision: 'yes' | 'no'
  note?: string
}

export async function confirmSession(options: ConfirmSession): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  if (record.status !== 'awaiting_input' || record.pending?.kind !== 'confirm') {
    const what = record.status === 'awaiting_input' ? `it waits for ${record.pending?.kind ?? 'input'}` : `it is ${record.status}`
    throw new PipeError('E_STATE', `run ${options.runId} is not waiting for a confirmation (${what})`, {hint: `pipe runs show ${options.runId} shows its state.`})
  }
  const {decision, note, ...rest} = options
  return resumeSession({...rest, confirm: {decision, ...(note ? {note} : {})}})
}

