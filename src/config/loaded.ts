/**
 * The shapes the loader produces and its rules read: a loaded pipeline, the result of loading one,
 * and where each node of a composed pipeline came from. Types only.
 */
import type {AliasTypes} from '../expr/scope.js'
import type {Pipeline} from '../types/pipeline.js'
import type {Diagnostic} from './diagnostics.js'
import type {YamlSource} from './yaml-source.js'

/** A step in a path: a key or a list index. */
export type Segment = string | number

export interface LoadedPipeline {
  file: string
  dir: string
  pipeline: Pipeline
  source: YamlSource
  /** sha256 of the file's text; of every file of the chain when the pipeline extends another. */
  hash: string
  /** Present when the pipeline extends another: where each composed node came from (see compose.ts). */
  composition?: Composition
  /** A foreach's inline steps: the aliases every expression of theirs reads (the item, typed as an element of the foreach's list). */
  aliases?: AliasTypes
}

/** `warnings` are problems that do not stop a run: pipe validate and --dry-run show them. */
export type PipelineResult = {ok: true; loaded: LoadedPipeline; warnings: Diagnostic[]} | {ok: false; diagnostics: Diagnostic[]}

/** A node of one of the composed files. */
export interface NodeOrigin {
  source: YamlSource
  segments: Segment[]
  /** The node stands for the whole composed value: paths below it are not looked up beneath it. */
  exact?: boolean
}

export interface StepOrigin extends NodeOrigin {
  /** The directory the step's files (prompt, output_schema, blocks_file) are relative to: its file's. */
  dir: string
  /** Fields composition wrote or carried over (keyed by dotted path: next, on, on.pass), and the node that caused it. */
  fields: Record<string, NodeOrigin>
}

export interface Composition {
  /** Every file that went into the pipeline: the loaded one first, then its base, that base's base... */
  files: YamlSource[]
  /** Parallel to the composed pipeline's steps. */
  steps: StepOrigin[]
  /** Top-level keys, and `key.name` for the keys merged by name (gates.gate_s, provider.model). */
  keys: Record<string, NodeOrigin>
  /** Step ids an overlay removed with nothing to send their transitions to, and the operation. */
  removed: Record<string, NodeOrigin>
}
