import {didYouMean} from '../util/suggest.js'
import type {KindFinding} from '../config/kind-contract.js'
import {evaluateGates, gateSummary, type GateResult} from '../gates/evaluate.js'
import type {Pipeline, Step} from '../types/pipeline.js'
import type {CanonicalSpec} from '../types/spec.js'
import {requireSpec} from './model-support.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler} from './types.js'

type GateStep = Extract<Step, {kind: 'gate'}>

export type GateOutputs = {
  gate_result: GateResult
}

/** The gate result a gate step recorded; clarify_questions and review read the newest one. */
export const gateResult = outputsOf<GateOutputs>()('gate_result')

/** A pure function of the spec and the pipeline's gate config, so replay can compare it byte for byte. */
function evaluate(step: GateStep, spec: CanonicalSpec, pipeline: Pipeline): GateResult {
  const useCompleteness = step.completeness ?? pipeline.completeness !== undefined
  return evaluateGates(spec, pipeline.gates ?? {}, step.gates, useCompleteness ? pipeline.completeness : undefined)
}

export const gate: StepHandler<'gate'> = {
  kind: 'gate',
  summary: 'evaluate gates and the completeness score; outcome pass or fail',
  outcomes: () => ['pass', 'fail'],
  failures: {
    fail: {
      code: 'E_GATE_FAIL',
      hint: ({run_id, step}) =>
        `Read the failed rules with pipe snapshot show ${run_id} --step ${step}, improve the requirement and run again; or route the outcome with on: {fail: STEP} (e.g. to clarify_questions).`,
    },
  },
  changesSpec: false,
  needsSpec: true,
  safeToRetry: true,
  check(step, {pipeline}) {
    const defined = Object.keys(pipeline.gates ?? {})
    const out: KindFinding[] = []
    step.gates.forEach((name, j) => {
      if (!defined.includes(name)) {
        const where = defined.length
          ? `${didYouMean(name, defined)} (defined: ${defined.join(', ')})`
          : ' (the pipeline defines no gates: add a gates: section)'
        out.push({rule: 'unknown-gate', at: ['gates', j], message: `gate "${name}" is used but not defined${where}`})
      }
    })
    if (step.completeness === true && pipeline.completeness === undefined) {
      out.push({rule: 'unknown-gate', at: ['completeness'], message: 'completeness is on but the pipeline defines no completeness: section'})
    }
    return out
  },
  graph: {shape: 'diamond', details: (step) => [`gates: ${step.gates.join(', ')}`]},
  replay: {
    recorded: (snapshot) => gateResult.of(snapshot),
    recompute: evaluate,
  },
  async run({step, spec: current, pipeline, ...rest}) {
    const spec = requireSpec({step, spec: current, pipeline, ...rest}, 'evaluate gates on')
    const result = evaluate(step, spec, pipeline.pipeline)
    const outputs = {gate_result: result} satisfies GateOutputs & KindOutputs<'gate'>
    return {
      type: 'done',
      outcome: result.pass ? 'pass' : 'fail',
      reason: gateSummary(result, step.gates),
      inputs: {canonical_spec_ref: spec.meta.spec_version, gates: step.gates},
      outputs: {...outputs},
    }
  },
}
