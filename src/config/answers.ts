/** Loads an answers file: YAML with positions, then the answers schema. */
import {PipeError} from '../errors.js'
import type {Answers} from '../types/answers.js'
import {formatDiagnostic} from './diagnostics.js'
import {validateDocument} from './document.js'

export async function loadAnswersFile(file: string): Promise<Answers> {
  const result = await validateDocument<Answers>(file, 'answers', 'answers file')
  if (!result.ok) {
    throw new PipeError('E_CONFIG', `invalid answers file ${file}:\n${result.diagnostics.map(formatDiagnostic).join('\n')}`, {
      hint: 'An answers file is a mapping "answers:" of question id (Q-001) or spec field (acceptance_criteria) to the answer text.',
    })
  }
  return result.data
}
