/** Loads an answers file (YAML with positions, then the answers schema) and checks answers against what they answer. */
import {PipeError} from '../errors.js'
import type {Answers} from '../types/answers.js'
import type {Pipeline} from '../types/pipeline.js'
import {formatDiagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'
import {didYouMean} from '../util/suggest.js'

export async function loadAnswersFile(file: string): Promise<Answers> {
  const result = await validateDocument<Answers>(file, 'answers', 'answers file')
  if (!result.ok) {
    throw new PipeError('E_CONFIG', `invalid answers file ${file}:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {
      hint: 'An answers file is a mapping "answers:" of question id (Q-001) or spec field (acceptance_criteria) to the answer text.',
    })
  }
  return result.data
}

/** The answers a file holds, without the keys it left empty. */
export function answersOf(file: Answers): Record<string, string> {
  return Object.fromEntries(Object.entries(file.answers).filter((entry): entry is [string, string] => entry[1] !== undefined))
}

export interface OpenQuestion {
  id: string
  field?: string
}

/**
 * What answers are checked against:
 * - a run waiting for answers: its open questions; every key must be one of their ids or fields,
 *   and every question needs an answer (here or given earlier to the run);
 * - a run not started yet (`pipe run --answers`, `pipe replay --answers`): no question exists, so a
 *   key must be shaped like a question id (Q-001) or name a field a question of the pipeline can be
 *   about (see `answerableFields`).
 */
export type AnswerScope =
  {run_id: string; questions: readonly OpenQuestion[]; given?: Readonly<Record<string, string>>} | {pipeline: string; fields: readonly string[]}

const QUESTION_ID = /^Q-[0-9]{3,}$/

function label(q: OpenQuestion): string {
  return `${q.id}${q.field ? ` [${q.field}]` : ''}`
}

/** The one check every way of giving answers goes through (pipe answer, resume --answers, run --answers); nothing is written before it passes. */
export function checkAnswers(answers: Readonly<Record<string, string>>, scope: AnswerScope): void {
  if ('questions' in scope) {
    const keys = new Set(scope.questions.flatMap((q) => [q.id, ...(q.field ? [q.field] : [])]))
    for (const key of Object.keys(answers)) {
      if (!keys.has(key)) {
        throw new PipeError('E_INPUT', `"${key}" is not a question of run ${scope.run_id}${didYouMean(key, keys)}`, {
          hint: `Its open questions: ${scope.questions.map(label).join(', ')}; key each answer by one of these ids or fields.`,
        })
      }
    }
    const known = {...(scope.given ?? {}), ...answers}
    const missing = scope.questions.filter((q) => known[q.id] === undefined && (q.field === undefined || known[q.field] === undefined))
    if (missing.length > 0) {
      throw new PipeError('E_INPUT', `no answer to ${missing.map(label).join(', ')}`, {
        hint: 'Answer every open question (by its id or its field); an answer of "TBD" is allowed and keeps the field open.',
      })
    }
    return
  }
  for (const key of Object.keys(answers)) {
    if (QUESTION_ID.test(key) || scope.fields.includes(key)) continue
    throw new PipeError(
      'E_INPUT',
      `"${key}" is neither a question id (Q-001) nor a field a question of pipeline ${scope.pipeline} can be about${didYouMean(key, scope.fields)}`,
      {
        hint: `Before a run has asked anything, key answers by question id (Q-001, Q-002, ... in the order questions are asked) or by field: ${scope.fields.join(', ')}.`,
      },
    )
  }
}

/**
 * The fields a clarifying question of this pipeline can be about: a question asks about a path the
 * gates found missing (a gate rule's `path`) or, before any gate ran, a key field the compile step
 * left empty (`keyFields`).
 */
export function answerableFields(pipeline: Pipeline, keyFields: readonly string[]): string[] {
  const paths = Object.values(pipeline.gates ?? {}).flatMap((gate) => gate?.rules.map((rule) => rule.path) ?? [])
  return [...new Set([...keyFields, ...paths])]
}
