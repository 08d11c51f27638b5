/**
 * The one contract of a step kind: what every part of pipe may know about a kind without running
 * it. The loader, validate's rules, `pipe graph` and the expression checker read these fields; the
 * step handler (steps/types.ts, StepHandler) is this contract plus what only a run needs (run, the
 * roles for export, replay and confirmations), so each fact about a kind is declared once, in its
 * module. Types only: config and steps both import it, and it imports neither's code.
 */
import type {ErrorCode} from '../errors.js'
import type {JsonSchemaLike} from '../expr/index.js'
import type {Step} from '../types/pipeline.js'
import type {LoadedPipeline} from './loaded.js'

export type StepKind = Step['kind']
export type StepOf<K extends StepKind> = Extract<Step, {kind: K}>

/** A problem a kind's own check finds in one of its steps; `at` is relative to the step. */
export interface KindFinding {
  /** The rule's name, as diagnostics show it. */
  rule: string
  at: Array<string | number>
  message: string
  /** Point at the key rather than at its value. */
  key?: boolean
}

/** A step id a step names besides next, on and on_exhausted; `at` is relative to the step. */
export interface StepReference {
  at: Array<string | number>
  target: string
  /** What the reference is, for the message: "rollback target". */
  what: string
  /** The run can go there from this step (a choice's branch): an edge of the graph, labelled by the target's id. */
  route?: boolean
}

/** The node shape `pipe graph` draws: a box, a decision (diamond), a person's input (parallelogram). */
export type GraphShape = 'box' | 'diamond' | 'parallelogram'

/** What a step does to the repository's working tree (see KindContract.workingTree). */
export interface WorkingTreeRole {
  settles?: boolean
  rollbackTo?: string
  ends?: boolean
}

/**
 * Fields the engine leaves as written because the kind evaluates them itself (StepContext.render):
 * lazily (a choice's whens, in order) or once per item of a list (a foreach's with:).
 */
export interface DeferredFields {
  fields: readonly string[]
  /** Fields that belong to an inline child pipeline: never resolved nor checked in this pipeline's scope. */
  foreign?: readonly string[]
  /** Per item: the name each item has in `fields`' expressions... */
  alias?: string
  /** ...and the field holding the list expression. */
  items?: string
  /** What a field's one whole expression must give, checked at validate where it can be typed (a foreach's depends_on: a list). */
  expect?: Readonly<Record<string, 'bool' | 'string' | 'list' | 'map' | 'int'>>
}

export interface ChildPipelineRef {
  /** Where the file (or the inline steps) is named in the step. */
  at: Array<string | number>
  /** Absent: the step's own `steps:` (and `inputs:`) are an anonymous child pipeline. */
  file?: string
  /** The inputs given (`with:`), and where. */
  with?: Readonly<Record<string, unknown>>
  withAt?: Array<string | number>
}

/** What a failure outcome means for the run when nothing routes it (or nothing later recovers it). */
export interface FailureOutcome {
  /** The error the run ends with (run.json `error.code`, the stderr line, the exit code). */
  code: ErrorCode
  /** The next action for a person, naming the run and the step. */
  hint(where: {run_id: string; step: string}): string
}

export interface KindContract<K extends StepKind> {
  kind: K
  /** One line for `pipe graph` and docs. */
  summary: string
  outcomes(step: StepOf<K>): readonly string[]
  /**
   * The outcomes that mean the step failed. Only an `on:` entry routes one (`next:` does not); an
   * unrouted failure ends the run failed with this error, and so does a routed one that the run ends
   * on without a later success of the same step (or a person's decision) recovering it.
   */
  failures?: Readonly<Record<string, FailureOutcome>>
  /**
   * Outcomes that stop the run by themselves, whatever the routes say: `awaiting_input` waits at the
   * step again, `cancelled` ends the run (a review's hold and drop).
   */
  stops?: Readonly<Record<string, 'awaiting_input' | 'cancelled'>>
  /** Whether a successful run of a step of this kind writes a new spec version (per step when it depends on the step's config). */
  changesSpec: boolean | ((step: StepOf<K>) => boolean)
  /** Whether it needs a spec version to exist when it runs (validate checks one can). */
  needsSpec?: boolean
  /** For model steps: the variables its prompt file may use. */
  promptVariables?: readonly string[]
  /**
   * The JSON Schema of what `steps.<id>.outputs` holds (the snapshot's outputs), which the
   * expression checker resolves `${{ steps.<id>.outputs.… }}` against: an object that lists
   * `properties` is closed (unknown fields are errors), a missing schema means "anything".
   * `pipeline.dir` is where a step's own schema files (output_schema) resolve. A shipped kind's
   * handler gives only its narrowing of schemas/kinds/KIND.outputs.json for one step (a command's
   * parse, a model's output_schema), or nothing; the catalog's entry is the whole declaration, with
   * what the engine adds (steps/output-schemas.ts declaredOutputs).
   */
  outputsSchema?(step: StepOf<K>, pipeline: {dir: string}): JsonSchemaLike
  /**
   * Fields the engine leaves unresolved because the kind evaluates them itself: lazily (a choice's
   * whens), or once per item of the list its `items` field gives, with the item bound to `alias` (a
   * foreach's `with:`; validate checks them with the alias typed as the list's element). The engine
   * knows no kind's field names: what it does not resolve is the common routing fields, these, and
   * the fields `references` names.
   */
  deferred?(step: StepOf<K>): DeferredFields
  /**
   * The pipeline files a step runs as child runs, relative to the file that holds the step, with
   * the inputs it gives them (`with:`): validate loads each, recursively, and checks the inputs.
   */
  childPipelines?(step: StepOf<K>): ChildPipelineRef[]
  /**
   * What a step does to the repository's working tree, for validate's rule that every error between
   * a checkpoint and its rollback is routed: `settles` (it commits, checkpoints or rolls back, so
   * the walk stops there), `rollbackTo` (the checkpoint step a rollback returns to), `ends` (it
   * ends the run, so nothing is left to route).
   */
  workingTree?(step: StepOf<K>): WorkingTreeRole
  /**
   * Whether the run ever goes on at a step's `next:` (true when absent): a choice goes where its
   * choices say and an end ends the run (a blocked one goes on at next after pipe resume). An
   * overlay gives a default next only to an inserted step that takes one.
   */
  takesNext?(step: StepOf<K>): boolean
  /** Validate-time checks of one step that the schema cannot express, positioned relative to the step. */
  check?(step: StepOf<K>, pipeline: LoadedPipeline): KindFinding[]
  /**
   * Step ids the step names in its own fields, besides next, on and on_exhausted: routes (`route:
   * true`, a choice's branches: edges of the graph) and plain names (a rollback's checkpoint). The one
   * source for the graph, overlay re-pointing, validate's unknown-step rule and the fields the engine
   * never resolves (config/step-links.ts).
   */
  references?(step: StepOf<K>): StepReference[]
  /** How `pipe graph` draws it: a node shape, and lines under its id. */
  graph?: {shape?: GraphShape; details?(step: StepOf<K>): string[]}
}

/**
 * The kinds the loader checks a pipeline against, by name: a registry's handlers as they are
 * (steps/registry.ts catalogOf). Only `outcomes` is required, so a test can stand in a kind of its
 * own with the hooks it exercises.
 */
export type KindCatalog = Readonly<Record<string, CatalogEntry>>
export type CatalogEntry = Pick<KindContract<StepKind>, 'outcomes'> & Partial<Omit<KindContract<StepKind>, 'outcomes'>>
