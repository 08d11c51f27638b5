/**
 * Prompt files: Markdown with {{variable}} placeholders, filled from the step's inputs. The set of
 * variables each model step fills is fixed here, so pipe validate can reject a prompt that uses
 * one the step never fills.
 */
import {readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import {PipeError} from '../errors.js'
import {PLACEHOLDER} from '../util/template.js'

export type ModelKind = 'compile' | 'clarify_questions' | 'apply_answers' | 'plan_tasks' | 'generate_vv'

export const PROMPT_VARIABLES: Readonly<Record<ModelKind, readonly string[]>> = {
  compile: ['input', 'source_ref', 'previous_spec'],
  clarify_questions: ['spec', 'missing_fields', 'max_questions'],
  apply_answers: ['spec', 'answers'],
  plan_tasks: ['spec'],
  generate_vv: ['spec'],
}

export function renderPrompt(template: string, values: Readonly<Record<string, string>>): string {
  return template.replace(PLACEHOLDER, (_all, name: string) => {
    const value = values[name]
    if (value === undefined)
      throw new PipeError('E_CONFIG', `the prompt uses {{${name}}}, which this step does not fill`, {
        hint: 'pipe validate lists the variables each step fills.',
      })
    return value
  })
}

const shippedDir = fileURLToPath(new URL('../../pipelines/prompts/', import.meta.url))

/** The shipped prompt of a model step, used when a pipeline's step names none. */
export function defaultPrompt(kind: ModelKind): string {
  return readFileSync(`${shippedDir}${kind}.md`, 'utf8')
}
