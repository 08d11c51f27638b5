/**
 * Where a node of a loaded pipeline is: the file that holds it (a base pipeline, an overlay entry,
 * the file of an inline child's parent), its position, and the directory its step's files lie in.
 * Every rule and every kind's check reports through diag(), so a problem is named at file:line:col.
 */
import {readFileSync, statSync} from 'node:fs'
import path from 'node:path'
import type {Step} from '../types/pipeline.js'
import {formatPath, type Diagnostic} from './diagnostics.js'
import type {Composition, LoadedPipeline, NodeOrigin, Segment} from './loaded.js'
import {fileEscape} from './pipeline-files.js'
import {locate, type YamlSource} from './yaml-source.js'

/** The directory a step's files (prompt, output_schema, blocks_file) are relative to: that of the file that holds the step. */
export function stepDir(loaded: LoadedPipeline, step: number | string): string {
  const index = typeof step === 'number' ? step : loaded.pipeline.steps.findIndex((s) => s.id === step)
  return loaded.composition?.steps[index]?.dir ?? loaded.dir
}

/**
 * A diagnostic at a node of the pipeline, in the file that holds the node (a base pipeline, an
 * overlay entry). `offset`, when known, is a character offset in the file that holds the node (a
 * place inside a scalar). Its rule is filled in by the rule that reports it.
 */
export function diag(loaded: LoadedPipeline, segments: readonly Segment[], message: string, preferKey = false, offset?: number): Diagnostic {
  const at = origin(loaded, segments)
  const pos = offset === undefined ? locate(at.source, at.segments, preferKey) : at.source.lineCounter.linePos(offset)
  return {file: at.source === loaded.source ? loaded.file : at.source.file, line: pos.line, col: pos.col, path: formatPath(at.segments), message, rule: ''}
}

/** The file and path within it of a node of the (composed) pipeline. */
export function origin(loaded: LoadedPipeline, segments: readonly Segment[]): {source: YamlSource; segments: Segment[]} {
  return loaded.composition ? originOf(loaded.composition, loaded.source, segments) : {source: loaded.source, segments: [...segments]}
}

/** The node of a composed file a path of the composed pipeline stands for. */
export function originOf(composition: Composition, fallback: YamlSource, segments: readonly Segment[]): NodeOrigin {
  const [head, second] = segments
  if (head === 'steps' && typeof second === 'number' && composition.steps[second]) {
    const step = composition.steps[second]
    const rest = segments.slice(2)
    for (let n = rest.length; n > 0; n--) {
      const field = step.fields[rest.slice(0, n).join('.')]
      if (field) return field.exact ? field : {source: field.source, segments: [...field.segments, ...rest.slice(n)]}
    }
    return {source: step.source, segments: [...step.segments, ...rest]}
  }
  if (typeof head === 'string') {
    const entry = second !== undefined ? composition.keys[`${head}.${String(second)}`] : undefined
    if (entry) return {source: entry.source, segments: [...entry.segments, ...segments.slice(2)]}
    const key = composition.keys[head]
    if (key) return key.exact ? key : {source: key.source, segments: [...segments]}
  }
  return {source: fallback, segments: [...segments]}
}

/** The text of a step's prompt file, when it has one inside the pipeline's tree that can be read. */
export function promptText(loaded: LoadedPipeline, step: Step, index: number): string | undefined {
  if (!('prompt' in step) || typeof step.prompt !== 'string') return undefined
  const dir = stepDir(loaded, index)
  // Never read a file outside the pipeline's tree, not even to check it.
  if (fileEscape(dir, step.prompt)) return undefined
  try {
    const full = path.resolve(dir, step.prompt)
    // A FIFO or a device would block or never end; missing-file reports it.
    if (!statSync(full).isFile()) return undefined
    return readFileSync(full, 'utf8')
  } catch {
    return undefined
  }
}
