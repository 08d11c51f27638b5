import type {Question} from '../providers/types.js'
import {sha256} from '../util/hash.js'
import {bodyOf, requireSpec} from './model-support.js'
import type {StepHandler} from './types.js'

/** The answer to a question, given by its id or by the spec field it asks about. */
export function answerFor(question: Question, answers: Readonly<Record<string, string | undefined>>): string | undefined {
  return answers[question.id] ?? answers[question.field]
}

export const applyAnswers: StepHandler<'apply_answers'> = {
  kind: 'apply_answers',
  summary: 'apply the answers to the open questions, writing a new spec version',
  outcomes: () => ['success'],
  changesSpec: true,
  safeToRetry: true,
  async run(context) {
    const spec = requireSpec(context, 'apply answers to')
    const questions = context.history.latestOutput<Question[]>('questions') ?? []
    const given = context.run.answers ?? {}
    const unanswered = questions.filter((q) => answerFor(q, given) === undefined)
    if (unanswered.length > 0) {
      return {type: 'await', kind: 'answers', reason: `${unanswered.length} question(s) need an answer`, questions: unanswered.map((q) => ({id: q.id, field: q.field, question: q.question}))}
    }
    const answers = Object.fromEntries(questions.map((q) => [q.id, answerFor(q, given)!]))
    const provider = await context.provider()
    const reply = await provider.applyAnswers({spec: bodyOf(spec), questions, answers}, context.signal)
    return {
      type: 'done',
      outcome: 'success',
      reason: questions.length > 0 ? `applied ${questions.length} answer(s) to ${[...new Set(questions.map((q) => q.field))].join(', ')}` : 'no questions were asked; spec carried over',
      inputs: {user_answer_ref: questions.map((q) => `run://${context.run.run_id}/answers/${q.id}`)},
      outputs: {applied: questions.map((q) => ({question_id: q.id, field: q.field}))},
      spec: {body: reply.value.body, status: 'clarified'},
      evidence: questions.map((q) => ({
        type: 'doc' as const,
        link: 'doc' as const,
        source: {ref: `run://${context.run.run_id}/answers/${q.id}`, hash: sha256(answers[q.id]!)},
        content: {excerpt: [...answers[q.id]!].slice(0, 500).join(''), note: `answer to ${q.id}: ${q.question}`},
        linked_to: [{spec_path: `spec.${q.field}`}, {step: context.step.id}, {run_id: context.run.run_id}],
      })),
      llmModel: provider.model,
    }
  },
}
