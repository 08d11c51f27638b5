import {sleep} from '../util/sleep.js'
import type {StepHandler} from './types.js'

export const noop: StepHandler<'noop'> = {
  kind: 'noop',
  summary: 'record a snapshot and move on (a placeholder or join point)',
  outcomes: (step) => [step.outcome ?? 'success'],
  changesSpec: false,
  safeToRetry: true,
  // The signal is read only when the step waits: reading it makes the step's AbortController.
  async run(context) {
    const {step} = context
    if (step.sleep_ms) await sleep(step.sleep_ms, context.signal)
    const outcome = step.outcome ?? 'success'
    return {type: 'done', outcome, reason: `no-op, outcome ${outcome}`, outputs: {}}
  },
}
