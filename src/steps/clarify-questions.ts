import {PROMPT_VARIABLES} from '../providers/prompt.js'
import type {GateResult, SingleGateResult} from '../gates/evaluate.js'
import type {Question} from '../providers/types.js'
import {gateResult} from './gate.js'
import {bodyOf, requireSpec, promptOf, modelCall, withPrompt} from './model-support.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepHandler} from './types.js'

export type ClarifyOutputs = {questions: Question[]; round: number}

/** The questions a round asked; apply_answers answers the newest round, pipe answer lists every round. */
export const questionsAsked = outputsOf<ClarifyOutputs>()('questions')

function failureMessages(result: GateResult): Map<string, string> {
  const messages = new Map<string, string>()
  for (const value of Object.values(result)) {
    const failures = (value as SingleGateResult | undefined)?.failed_rules
    if (!Array.isArray(failures)) continue
    for (const failure of failures) if (!messages.has(failure.path)) messages.set(failure.path, failure.message)
  }
  return messages
}

export const clarifyQuestions: StepHandler<'clarify_questions'> = {
  kind: 'clarify_questions',
  summary: 'ask one question for each missing field of the latest gate result',
  outcomes: () => ['success'],
  changesSpec: false,
  needsSpec: true,
  safeToRetry: true,
  promptVariables: PROMPT_VARIABLES.clarify_questions,
  async run(context) {
    const spec = requireSpec(context, 'ask about')
    const gate = gateResult.latest(context.history)
    const missingPaths = gate?.missing_fields ?? spec.meta.missing_fields ?? []
    const messages = gate ? failureMessages(gate) : new Map<string, string>()
    const missing = missingPaths.map((path) => ({path, ...(messages.has(path) ? {message: messages.get(path)!} : {})}))
    const asked = context.history.snapshots.reduce((n, s) => n + (questionsAsked.of(s) ?? []).length, 0)
    const round = context.history.snapshots.filter((s) => Array.isArray(questionsAsked.of(s))).length + 1
    const provider = await context.provider()
    const reply = await provider.clarify(
      {spec: bodyOf(spec), missing, maxQuestions: context.step.max_questions ?? 10, firstNumber: asked + 1, ...withPrompt(await promptOf(context))},
      modelCall(context),
    )
    const questions = reply.value.questions
    return {
      type: 'done',
      outcome: 'success',
      reason:
        questions.length > 0
          ? `round ${round}: ${questions.length} question(s) about ${questions.map((q) => q.field).join(', ')}`
          : 'nothing is missing; no questions',
      inputs: {gate_result_ref: gate ? 'latest gate_result' : null, missing_fields: missingPaths},
      outputs: {questions, round} satisfies ClarifyOutputs & KindOutputs<'clarify_questions'>,
      llmModel: provider.model,
      ...(reply.usage ? {usage: reply.usage} : {}),
    }
  },
}
