import {PROMPT_VARIABLES} from '../providers/prompt.js'
import {PipeError} from '../errors.js'
import {bodyOf, requireSpec, promptOf, modelCall, withPrompt} from './model-support.js'
import type {KindOutputs, StepHandler} from './types.js'

export const planTasks: StepHandler<'plan_tasks'> = {
  kind: 'plan_tasks',
  summary: 'derive tasks with a definition of done from features and acceptance criteria',
  outcomes: () => ['success'],
  changesSpec: true,
  needsSpec: true,
  safeToRetry: true,
  promptVariables: PROMPT_VARIABLES.plan_tasks,
  async run(context) {
    const spec = requireSpec(context, 'plan')
    if (spec.features.length === 0 && spec.acceptance_criteria.length === 0) {
      throw new PipeError('E_STATE', 'nothing to plan: the spec has no features and no acceptance criteria', {
        hint: 'Route the pipeline through a gate that requires features before plan_tasks.',
      })
    }
    const provider = await context.provider()
    const reply = await provider.planTasks({spec: bodyOf(spec), ...withPrompt(await promptOf(context))}, modelCall(context))
    const tasks = reply.value.tasks
    const body = {...bodyOf(spec), tasks}
    const uncovered = spec.acceptance_criteria.filter((ac) => !tasks.some((t) => t.acceptance_criteria?.includes(ac.id))).map((ac) => ac.id)
    return {
      type: 'done',
      outcome: 'success',
      reason: `planned ${tasks.length} task(s) for ${spec.features.length} feature(s)${uncovered.length ? `; not covered by a task: ${uncovered.join(', ')}` : ''}`,
      outputs: {
        tasks: tasks.map((t) => ({id: t.id, title: t.title, type: t.type, depends_on: t.depends_on ?? []})),
        uncovered_acceptance_criteria: uncovered,
      } satisfies KindOutputs<'plan_tasks'>,
      spec: {body, status: 'planned'},
      llmModel: provider.model,
      ...(reply.usage ? {usage: reply.usage} : {}),
    }
  },
}
