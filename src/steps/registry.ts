/** Every step kind, one handler each. A kind added to schemas/pipeline.schema.json fails to compile until it is here. */
import type {Diagnostic} from '../config/diagnostics.js'
import type {CatalogEntry, KindCatalog} from '../config/kind-contract.js'
import type {LoadedPipeline} from '../config/loaded.js'
import type {LoadedPolicy} from '../policy/policy.js'
import type {Snapshot} from '../types/snapshot.js'
import {agent} from './agent.js'
import {applyAnswers} from './apply-answers.js'
import {choice} from './choice.js'
import {command} from './command.js'
import {context} from './context.js'
import {end} from './end.js'
import {foreach} from './foreach.js'
import {appliedEdit, edit} from './edit.js'
import {checkpointMade, git} from './git.js'
import {qa} from './qa.js'
import {clarifyQuestions, questionsAsked} from './clarify-questions.js'
import {compile} from './compile.js'
import {gate, gateResult} from './gate.js'
import {generateVv} from './generate-vv.js'
import {ingest} from './ingest.js'
import {model} from './model.js'
import {noop} from './noop.js'
import {deniedCommandsOf, type KnownValues} from './policy-check.js'
import {pipeline} from './pipeline.js'
import {planTasks} from './plan-tasks.js'
import {publish, publishTargets} from './publish.js'
import {approves, review} from './review.js'
import {write} from './write.js'
import {declaredOutputs} from './output-schemas.js'
import type {AttestSubject, StepHandler, StepKind, StepRegistry} from './types.js'

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
  write,
  model,
  choice,
  end,
  pipeline,
  foreach,
  agent,
  context,
}

/**
 * What the layers above steps (app, engine, commands) read from a kind's snapshots and steps, asked
 * of the kind here: no file above steps imports a kind's module (eslint.config.js enforces it), so
 * what a kind records stays its own and a renamed field fails to compile where it is read.
 */
export const views = {
  /** The gate's verdict on the spec (a review shows the latest; runs show hides it from the outputs). */
  gate: {result: gateResult},
  /** Whether a snapshot is a "go" for that spec version (only approved versions are published by hand). */
  review: {approves},
  /** The targets the pipeline's publish steps declare. */
  publish: {targets: publishTargets},
  /** The files an edit step applied (what pipe rollback restores). */
  edit: {applied: appliedEdit},
  /** The commit a git checkpoint made (what pipe rollback --checkpoint returns to). */
  git: {checkpoint: checkpointMade},
  /** The questions a clarify step asked (what pipe answer answers). */
  clarify_questions: {questions: questionsAsked},
} as const satisfies Partial<Record<StepKind, object>>

/** Before a run: the commands of a pipeline's steps the policy will deny (pipe validate --policy, pipe run --dry-run). */
export {unmatchedApprovals} from './policy-check.js'

export function deniedCommands(loaded: LoadedPipeline, policy: LoadedPolicy, known?: KnownValues): Diagnostic[] {
  return deniedCommandsOf(registry, loaded, policy, known)
}

/** The hash that binds a person's confirmation to the action a kind paused with (the engine checks it on resume). */
export {actionHash, sealedAction, standingAnswer, type ConfirmAction} from './confirm-action.js'
/** Which outcomes mean a step failed: its kind's, and `denied` (a person refused it) for every kind. */
export {DENIED_OUTCOME, OVER_BUDGET_OUTCOME, failureOf, failuresOf} from './denied.js'

export function handlerFor<K extends StepKind>(kind: K): StepHandler<K> {
  return registry[kind]
}

/** The handler of a kind named in a record (a snapshot's step.kind), or undefined for a kind this pipe does not have. */
export function handlerNamed(kind: string): StepHandler<StepKind> | undefined {
  return Object.hasOwn(registry, kind) ? (registry[kind as StepKind] as StepHandler<StepKind>) : undefined
}

/** The kinds as the pipeline loader sees them: the registry's handlers, by kind. */
export const kindCatalog: KindCatalog = catalogOf(registry)

/** The loader's view of a registry (the engine builds one for an injected registry too): each handler as it is, by its kind, its outputs as steps/output-schemas.ts assembles them. */
export function catalogOf(reg: StepRegistry): KindCatalog {
  return Object.fromEntries(
    Object.values(reg).map((one): [string, CatalogEntry] => {
      // The catalog is keyed by kind, so each handler only ever sees steps of its own kind.
      const handler = one as StepHandler<StepKind>
      // Its outputs as declared (schemas/kinds/KIND.outputs.json, narrowed for the step), with what the engine adds.
      return [handler.kind, {...handler, outputsSchema: (step, pipeline) => declaredOutputs(handler, step as never, pipeline)}]
    }),
  )
}

/** What a snapshot made that leaves the run, asked of the kind that wrote it (for pipe attest). */
export function attestSubjects(snapshot: Snapshot): AttestSubject[] {
  return handlerNamed(snapshot.step.kind)?.attestSubjects?.(snapshot) ?? []
}

/** The ledger keys any snapshot records as delivered, asked of the kind that wrote it (for audit verify). */
export function deliveredKeys(snapshot: Snapshot): readonly string[] {
  return handlerNamed(snapshot.step.kind)?.deliveredKeys?.(snapshot) ?? []
}
