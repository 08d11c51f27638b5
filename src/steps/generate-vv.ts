import {PROMPT_VARIABLES} from '../providers/prompt.js'
import {bodyOf, requireSpec, promptOf, modelCall, withPrompt} from './model-support.js'
import type {KindOutputs, StepHandler} from './types.js'

export const generateVv: StepHandler<'generate_vv'> = {
  kind: 'generate_vv',
  summary: 'derive verification and validation items linked to acceptance criteria and tasks',
  outcomes: () => ['success'],
  changesSpec: true,
  needsSpec: true,
  safeToRetry: true,
  promptVariables: PROMPT_VARIABLES.generate_vv,
  async run(context) {
    const spec = requireSpec(context, 'verify')
    const provider = await context.provider()
    const reply = await provider.generateVv({spec: bodyOf(spec), ...withPrompt(await promptOf(context))}, modelCall(context))
    const vv = reply.value.vv
    const covered = new Set(vv.flatMap((item) => item.acceptance_criteria))
    const uncovered = spec.acceptance_criteria.filter((ac) => !covered.has(ac.id)).map((ac) => ac.id)
    return {
      type: 'done',
      outcome: 'success',
      reason: `${vv.filter((v) => v.kind === 'verification').length} verification and ${vv.filter((v) => v.kind === 'validation').length} validation item(s)${uncovered.length ? `; acceptance criteria without one: ${uncovered.join(', ')}` : ''}`,
      outputs: {
        vv: vv.map((v) => ({id: v.id, kind: v.kind, method: v.method, acceptance_criteria: v.acceptance_criteria})),
        uncovered_acceptance_criteria: uncovered,
      } satisfies KindOutputs<'generate_vv'>,
      spec: {body: {...bodyOf(spec), vv}, status: 'verified'},
      llmModel: provider.model,
      ...(reply.usage ? {usage: reply.usage} : {}),
    }
  },
}
