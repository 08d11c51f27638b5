/** Every step kind, one handler each. A kind added to schemas/pipeline.schema.json fails to compile until it is here. */
import type {KindCatalog} from '../config/pipeline.js'
import {applyAnswers} from './apply-answers.js'
import {choice} from './choice.js'
import {command} from './command.js'
import {end} from './end.js'
import {edit} from './edit.js'
import {git} from './git.js'
import {qa} from './qa.js'
import {clarifyQuestions} from './clarify-questions.js'
import {compile} from './compile.js'
import {gate} from './gate.js'
import {generateVv} from './generate-vv.js'
import {ingest} from './ingest.js'
import {noop} from './noop.js'
import {planTasks} from './plan-tasks.js'
import {publish} from './publish.js'
import {review} from './review.js'
import type {StepHandler, StepKind, StepOf, StepRegistry} from './types.js'

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
  choice,
  end,
}

export function handlerFor<K extends StepKind>(kind: K): StepHandler<K> {
  return registry[kind]
}

/** The metadata the pipeline loader checks against. */
export const kindCatalog: KindCatalog = catalogOf(registry)

/** The loader's view of a registry (the engine builds one for an injected registry too). */
export function catalogOf(reg: StepRegistry): KindCatalog {
  return Object.fromEntries(
  Object.values(reg).map((handler) => [
    handler.kind,
    {
      outcomes: (step: StepOf<StepKind>) => (handler as StepHandler<StepKind>).outcomes(step),
      ...(handler.promptVariables ? {promptVariables: handler.promptVariables} : {}),
      ...(handler.failures ? {failures: Object.keys(handler.failures)} : {}),
      ...(handler.stops ? {stops: handler.stops} : {}),
      ...(handler.outputsSchema ? {outputsSchema: (step: StepOf<StepKind>, pipeline: {dir: string}) => (handler as StepHandler<StepKind>).outputsSchema!(step, pipeline)} : {}),
      changesSpec: handler.changesSpec,
      needsSpec: handler.needsSpec === true,
    },
  ]),
)
}
