/**
 * A confirmation's deadline (policy confirm.timeout_s) passed while a person was being asked: the
 * run stays paused, and its record and timeline say so. Nothing else changes: pipe confirm still
 * answers it, and the run never goes on by itself.
 */
import type {RunOutcome} from '../../engine/engine.js'
import {openStore, storeLocation} from '../../store/open.js'
import type {SessionOptions} from './shared.js'

export async function confirmDeadlinePassed(options: SessionOptions & {runId: string}): Promise<RunOutcome> {
  const store = await openStore(storeLocation(options.cwd, options.store), 'existing')
  const release = await store.acquireRun(options.runId)
  try {
    let record = await store.readRun(options.runId)
    const pending = record.pending
    const at = (options.now ?? (() => new Date()))().toISOString()
    // Answered meanwhile (another terminal), or not yet due: there is nothing to say.
    if (record.status === 'awaiting_input' && pending?.kind === 'confirm' && pending.deadline !== undefined && pending.deadline <= at) {
      const reason = `confirmation deadline passed at ${pending.deadline}; the run stays paused: pipe confirm ${options.runId} --yes|--no`
      if (record.status_reason !== reason)
        record = await store.updateRun(
          options.runId,
          (r) => {
            r.status_reason = reason
            r.updated_at = at
          },
          {at, event: 'confirm_deadline_passed', step: pending.step, reason},
        )
    }
    return {
      run_id: record.run_id,
      feature_id: record.feature_id,
      status: record.status,
      spec_version: record.spec_version ?? null,
      steps_run: 0,
      ...(record.status_reason ? {reason: record.status_reason} : {}),
      ...(record.pending ? {pending: record.pending} : {}),
    }
  } finally {
    await release()
  }
}
