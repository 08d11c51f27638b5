import {evaluateGates, gateSummary} from '../gates/evaluate.js'
import {requireSpec} from './model-support.js'
import type {StepHandler} from './types.js'
import {any, bool, list, num, obj, str} from './outputs.js'

export const gate: StepHandler<'gate'> = {
  kind: 'gate',
  summary: 'evaluate gates and the completeness score; outcome pass or fail',
  outcomes: () => ['pass', 'fail'],
  failures: {fail: {code: 'E_GATE_FAIL', hint: ({run_id, step}) => `Read the failed rules with pipe snapshot show ${run_id} --step ${step}, improve the requirement and run again; or route the outcome with on: {fail: STEP} (e.g. to clarify_questions).`}},
  changesSpec: false,
  needsSpec: true,
  safeToRetry: true,
  outputsSchema: () => obj({gate_result: {type: 'object', properties: {pass: bool, missing_fields: list(str), completeness_score: num, completeness_threshold: num}, additionalProperties: obj({pass: bool, missing_fields: list(str), failed_rules: list(any)})}}),
  async run({step, spec: current, pipeline, ...rest}) {
    const spec = requireSpec({step, spec: current, pipeline, ...rest}, 'evaluate gates on')
    const useCompleteness = step.completeness ?? pipeline.pipeline.completeness !== undefined
    const completeness = useCompleteness ? pipeline.pipeline.completeness : undefined
    const result = evaluateGates(spec, pipeline.pipeline.gates ?? {}, step.gates, completeness)
    return {
      type: 'done',
      outcome: result.pass ? 'pass' : 'fail',
      reason: gateSummary(result, step.gates),
      inputs: {canonical_spec_ref: spec.meta.spec_version, gates: step.gates},
      outputs: {gate_result: result},
    }
  },
}
