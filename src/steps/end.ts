import {obj, oneOf, str} from './output-schemas.js'
import type {KindFinding} from '../config/pipeline.js'
import type {StepHandler} from './types.js'

const STATUSES = ['succeeded', 'failed', 'blocked', 'cancelled'] as const

export const end: StepHandler<'end'> = {
  kind: 'end',
  summary: 'end the run: succeeded, failed, blocked or cancelled, with a reason',
  // Its outcome is the status it ends with; nothing routes it (a blocked end resumes at next).
  outcomes: (step) => (step.status === 'blocked' ? ['blocked', 'resumed'] : [step.status]),
  changesSpec: false,
  safeToRetry: true,
  outputsSchema: () => obj({status: oneOf(STATUSES), reason: str}),
  check(step) {
    // An end ends the run: routes on it would never be taken (but a blocked end goes on at its next after pipe resume).
    const out: KindFinding[] = []
    if (step.next !== undefined && step.status !== 'blocked') out.push({rule: 'own-routes', at: ['next'], message: `an end step with status ${step.status} ends the run; next: applies only to status blocked (where pipe resume goes on)`, key: true})
    for (const outcome of Object.keys(step.on ?? {})) {
      if (outcome !== 'error' && outcome !== 'skipped') out.push({rule: 'own-routes', at: ['on', outcome], message: 'an end step ends the run; only on.error and on.skipped apply to it', key: true})
    }
    return out
  },
  async run({step, run, history}) {
    // `reason` was resolved by the engine: expressions inside it are values now.
    // A reason that resolved to nothing still says something: records need one.
    const reason = step.reason !== undefined && step.reason.trim() !== '' ? step.reason : `the pipeline ends at step ${step.id} (${step.status})`
    const done = {type: 'done' as const, outcome: step.status, reason, outputs: {status: step.status, reason}}
    switch (step.status) {
      case 'succeeded':
        return {...done, end: {status: 'succeeded', reason}}
      case 'cancelled':
        return {...done, cancel: {reason}}
      case 'failed':
        return {...done, end: {status: 'failed', reason, code: 'E_ENDED', hint: `The pipeline ended the run at step ${step.id}; read why with pipe snapshot show ${run.run_id} --step ${step.id}.`}}
      case 'blocked': {
        // A person resumed the run after the block: it goes on at next (or ends, having been dealt with).
        const resumed = (run.redrives ?? []).at(-1)
        const blockedHere = history.snapshots.findLast((s) => s.step.name === step.id && s.run_id === run.run_id)
        if (resumed !== undefined && blockedHere !== undefined && resumed.seq === blockedHere.step.seq) {
          const by = {by: resumed.by, at: resumed.at}
          return {type: 'done', outcome: 'resumed', reason: `${resumed.by} resumed the run after: ${reason}`, outputs: {status: 'blocked', reason}, person: by}
        }
        return {...done, end: {status: 'blocked', reason, code: 'E_ENDED', hint: `Deal with it, then pipe resume ${run.run_id} continues at ${step.next ?? 'the end of the pipeline'}.`}}
      }
    }
  },
}
