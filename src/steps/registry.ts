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
    Object.values(reg).map((handler) => {
      const h = handler as StepHandler<StepKind>
      return [
        h.kind,
        {
          outcomes: (step: StepOf<StepKind>) => h.outcomes(step),
          ...(h.promptVariables ? {promptVariables: h.promptVariables} : {}),
          ...(h.failures ? {failures: Object.keys(h.failures)} : {}),
          ...(h.stops ? {stops: h.stops} : {}),
          ...(h.outputsSchema ? {outputsSchema: (step: StepOf<StepKind>, pipeline: {dir: string}) => h.outputsSchema!(step, pipeline)} : {}),
          changesSpec: (step: StepOf<StepKind>) => changesSpec(h, step),
          needsSpec: h.needsSpec === true,
        },
      ]
    }),
  )
}
