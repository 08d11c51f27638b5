import {PROMPT_VARIABLES} from '../providers/prompt.js'
import type {Citation, Question} from '../providers/types.js'
import {sha256} from '../util/hash.js'
import {answerCitationsToEvidence, bodyOf, promptOf, requireSpec, modelCall, withPrompt} from './model-support.js'
import {questionsAsked} from './clarify-questions.js'
import {outputsOf} from './outputs.js'
import type {KindOutputs, StepDone, StepHandler} from './types.js'

type EvidenceItem = NonNullable<StepDone['evidence']>[number]

interface Applied {
  question_id: string
  field: string
  /** The key the answer was given under: the question id, or the field. */
  key: string
}

export type ApplyAnswersOutputs = {applied: Applied[]; citations_dropped: Citation[]}

/** Which answer keys a round used, so a field's answer given up front answers one question only. */
const appliedAnswers = outputsOf<ApplyAnswersOutputs>()('applied')

/**
 * The answer to a question and the key it was given under: by the question's id, or by its field.
 * An answer given by field (up front, before any question existed) answers the first question about
 * that field only; a later round's question needs an answer of its own.
 */
export function answerFor(
  question: Question,
  answers: Readonly<Record<string, string | undefined>>,
  usedKeys: ReadonlySet<string>,
): {text: string; key: string} | undefined {
  const byId = answers[question.id]
  if (byId !== undefined) return {text: byId, key: question.id}
  const byField = answers[question.field]
  if (byField !== undefined && !usedKeys.has(question.field)) return {text: byField, key: question.field}
  return undefined
}

export const applyAnswers: StepHandler<'apply_answers'> = {
  kind: 'apply_answers',
  waitsFor: 'answers',
  summary: 'apply the answers to the open questions, writing a new spec version',
  outcomes: () => ['success'],
  changesSpec: true,
  needsSpec: true,
  safeToRetry: true,
  promptVariables: PROMPT_VARIABLES.apply_answers,
  async run(context) {
    const spec = requireSpec(context, 'apply answers to')
    const questions = questionsAsked.latest(context.history) ?? []
    const given = context.run.answers ?? {}
    const usedKeys = new Set(context.history.snapshots.flatMap((s) => (appliedAnswers.of(s) ?? []).map((a) => a.key)))
    const unanswered = questions.filter((q) => answerFor(q, given, usedKeys) === undefined)
    if (unanswered.length > 0) {
      return {
        type: 'await',
        kind: 'answers',
        reason: `${unanswered.length} question(s) need an answer`,
        questions: unanswered.map((q) => ({id: q.id, field: q.field, question: q.question})),
      }
    }
    const found = new Map(questions.map((q) => [q.id, answerFor(q, given, usedKeys)!]))
    const answers = Object.fromEntries([...found].map(([id, a]) => [id, a.text]))
    const provider = await context.provider()
    const reply = await provider.applyAnswers({spec: bodyOf(spec), questions, answers, ...withPrompt(await promptOf(context))}, modelCall(context))
    const cited = answerCitationsToEvidence(reply.citations, answers, context.step.id, context.run.run_id)
    // Each answer is evidence in its own right, whatever the model cited from it.
    const answerEvidence = questions.map((q): EvidenceItem => ({
      type: 'doc',
      link: 'doc',
      source: {ref: `run://${context.run.run_id}/answers/${q.id}`, hash: sha256(answers[q.id]!)},
      content: {excerpt: [...answers[q.id]!].slice(0, 500).join(''), note: `answer to ${q.id}: ${q.question}`},
      linked_to: [{spec_path: `spec.${q.field}`}, {step: context.step.id}, {run_id: context.run.run_id}],
    }))
    return {
      type: 'done',
      outcome: 'success',
      reason:
        questions.length > 0
          ? `applied ${questions.length} answer(s) to ${[...new Set(questions.map((q) => q.field))].join(', ')}`
          : 'no questions were asked; spec carried over',
      inputs: {user_answer_ref: questions.map((q) => `run://${context.run.run_id}/answers/${q.id}`)},
      outputs: {
        applied: questions.map((q): Applied => ({question_id: q.id, field: q.field, key: found.get(q.id)!.key})),
        citations_dropped: cited.dropped,
      } satisfies ApplyAnswersOutputs & KindOutputs<'apply_answers'>,
      spec: {body: reply.value.body, status: 'clarified'},
      evidence: [...answerEvidence, ...cited.evidence],
      llmModel: provider.model,
      ...(reply.usage ? {usage: reply.usage} : {}),
    }
  },
}
