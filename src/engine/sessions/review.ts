/** pipe review: a decision given to a run that waits at a review, and what the reviewer sees first. */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {Store} from '../../store/store.js'
import type {RunOutcome} from '../engine.js'
import type {Decision, SessionOptions} from './shared.js'
import {resumeSession} from './resume.js'

export interface ReviewSession extends SessionOptions {
  runId: string
  decision: Decision
  note?: string
}

export async function reviewSession(options: ReviewSession): Promise<RunOutcome> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  if (record.status !== 'awaiting_input' || record.pending?.kind !== 'review') {
    const what = record.status === 'awaiting_input' ? `it waits for ${record.pending?.kind ?? 'input'}` : `it is ${record.status}`
    throw new PipeError('E_STATE', `run ${options.runId} is not waiting for a review (${what})`, {
      hint: record.pending?.kind === 'answers' ? `Answer its questions first: pipe answer ${options.runId} --file answers.yaml` : record.pending?.kind === 'confirm' ? `It waits at a tool call: pipe confirm ${options.runId} --yes|--no` : `pipe runs show ${options.runId} shows its state.`,
    })
  }
  return resumeSession({...options})
}

/** What a reviewer sees before deciding: the spec under review and its latest gate result. */
export async function reviewSummary(options: SessionOptions & {runId: string}): Promise<{spec: import('../../types/spec.js').CanonicalSpec | null; gate: import('../../gates/evaluate.js').GateResult | null; reason: string}> {
  const store = await Store.existing(path.resolve(options.cwd, options.store))
  const record = await store.readRun(options.runId)
  const snapshots = await store.readSnapshots(options.runId)
  const {gateResult} = await import('../../steps/gate.js')
  const gate = gateResult.latest(snapshots) ?? null
  const spec = record.spec_version ? await store.readSpec(record.spec_version) : null
  return {spec, gate, reason: record.pending?.reason ?? ''}
}

// Ending a run by hand.
