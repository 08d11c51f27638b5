/** Every step kind, one handler each. A kind added to schemas/pipeline.schema.json fails to compile until it is here. */
import type {KindCatalog} from '../config/pipeline.js'
import {applyAnswers} from './apply-answers.js'
import {command} from './command.js'
import {edit} from './edit.js'
import {git} from './git.js'
import {qa} from './qa.js'
import {clarifyQuestions} from './clarify-questions.js'
import {compile} from './compile.js'
import {gate} from './gate.js'
import {generateVv} from './generate-vv.js'
import {ingest} from './ingest.js'
import {model} from './model.js'
import {noop} from './noop.js'
import {planTasks} from './plan-tasks.js'
import {publish} from './publish.js'
import {review} from './review.js'
import {changesSpec, type StepHandler, type StepKind, type StepOf, type StepRegistry} from './types.js'

export const registry: StepRegistry = {
  ingest,
  compile,
  clarify_questions: clarifyQuestions,
  apply_answers: applyAnswers,
  plan_tasks: planTasks,
  generate_vv: generateVv,
  gate,
  review,
  publish,
  noop,
  command,
  qa,
  git,
  edit,
  model,
}

export function handlerFor<K extends StepKind>(kind: K): StepHandler<K> {
  return registry[kind]
}

/** The metadata the pipeline loader checks against. */
export const kindCatalog: KindCatalog = Object.fromEntries(
  Object.values(registry).map((handler) => [
    handler.kind,
    {
      outcomes: (step: StepOf<StepKind>) => (handler as StepHandler<StepKind>).outcomes(step),
      ...(handler.promptVariables ? {promptVariables: handler.promptVariables} : {}),
      ...(handler.failures ? {failures: Object.keys(handler.failures)} : {}),
      ...(handler.stops ? {stops: handler.stops} : {}),
      changesSpec: (step: StepOf<StepKind>) => changesSpec(handler as StepHandler<StepKind>, step),
      needsSpec: handler.needsSpec === true,
    },
  ]),
)
