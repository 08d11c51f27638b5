import type {KindFinding} from '../config/kind-contract.js'
import type {KindOutputs, StepHandler} from './types.js'

export const end: StepHandler<'end'> = {
  kind: 'end',
  summary: 'end the run: succeeded, failed, blocked or cancelled, with a reason',
  // Its outcome is the status it ends with; nothing routes it (a blocked end resumes at next, or at the failed step).
  outcomes: (step) => (step.status === 'blocked' ? ['blocked', 'resumed'] : [step.status]),
  changesSpec: false,
  safeToRetry: true,
  takesNext: (step) => step.status === 'blocked',
  workingTree: () => ({ends: true}),
  check(step) {
    // An end ends the run: routes on it would never be taken (but a blocked end goes on at its next after pipe resume).
    const out: KindFinding[] = []
    if (step.next !== undefined && step.status !== 'blocked')
      out.push({
        rule: 'own-routes',
        at: ['next'],
        message: `an end step with status ${step.status} ends the run; next: applies only to status blocked (where pipe resume goes on)`,
        key: true,
      })
    for (const outcome of Object.keys(step.on ?? {})) {
      if (outcome !== 'error' && outcome !== 'skipped')
        out.push({rule: 'own-routes', at: ['on', outcome], message: 'an end step ends the run; only on.error and on.skipped apply to it', key: true})
    }
    return out
  },
  async run({step, run, history}) {
    // `reason` was resolved by the engine: expressions inside it are values now.
    // A reason that resolved to nothing still says something: records need one.
    const reason = step.reason !== undefined && step.reason.trim() !== '' ? step.reason : `the pipeline ends at step ${step.id} (${step.status})`
    const done = {type: 'done' as const, outcome: step.status, reason, outputs: {status: step.status, reason} satisfies KindOutputs<'end'>}
    switch (step.status) {
      case 'succeeded':
        return {...done, end: {status: 'succeeded', reason}}
      case 'cancelled':
        return {...done, cancel: {reason}}
      case 'failed':
        return {
          ...done,
          end: {
            status: 'failed',
            reason,
            code: 'E_ENDED',
            hint: `The pipeline ended the run at step ${step.id}; read why with pipe snapshot show ${run.run_id} --step ${step.id}.`,
          },
        }
      case 'blocked': {
        // What resume does after the block (see README "end"): the author's next, else the step whose
        // failure led here runs again (the run succeeds only once it passes), else the run ends succeeded.
        const failed = step.next === undefined ? history.unrecoveredFailure() : null
        const resumed = (run.redrives ?? []).at(-1)
        const blockedHere = history.snapshots.findLast((s) => s.step.name === step.id && s.run_id === run.run_id)
        if (resumed !== undefined && blockedHere !== undefined && resumed.seq === blockedHere.step.seq) {
          const person = {by: resumed.by, at: resumed.at}
          const after = `${resumed.by} resumed the run after: ${reason}`
          const outputs = {status: 'blocked', reason} satisfies KindOutputs<'end'>
          if (step.next !== undefined) return {type: 'done', outcome: 'resumed', reason: after, outputs, person}
          if (failed) return {type: 'done', outcome: 'resumed', reason: `${after}; step ${failed.step} runs again`, outputs, person, next: failed.step}
          return {type: 'done', outcome: 'resumed', reason: after, outputs, person, end: {status: 'succeeded', reason: after}}
        }
        // The hint says what resume will do; the command itself is added where the error is spoken.
        const hint =
          step.next !== undefined
            ? `Deal with it; resuming goes on at step ${step.next}.`
            : failed
              ? `Fix what made step ${failed.step} fail (pipe snapshot show ${run.run_id} --step ${failed.step} shows it); resuming runs ${failed.step} again and goes on from its outcome.`
              : 'Deal with it; resuming ends the run succeeded.'
        return {...done, end: {status: 'blocked', reason, code: 'E_ENDED', hint}}
      }
    }
  },
}
