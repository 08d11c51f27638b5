/** The composed form of a pipeline, for people: `pipe pipeline resolve` prints it. */
import {Document, isMap, isSeq} from 'yaml'
import type {Diagnostic} from './diagnostics.js'
import {composePipeline} from './compose.js'
import type {KindCatalog} from './kind-contract.js'
import {locate, readYamlFile} from './yaml-source.js'

export interface StepSource {
  file: string
  line: number
}

export interface ResolvedPipeline {
  /** The pipeline after extends and overlay: what pipe validates and runs. */
  pipeline: Record<string, unknown>
  /** Where each step was written: the base, the file's own steps, or an overlay entry. */
  sources: Record<string, StepSource>
  /** The files composed, the given one first, then the one it extends, and so on. */
  files: string[]
  /** The pipeline as YAML, each step preceded by a comment naming its file:line. */
  yaml: string
}

export type ResolveResult = {ok: true; resolved: ResolvedPipeline} | {ok: false; diagnostics: Diagnostic[]}

/** Composes a pipeline file without judging the result's graph (pipe validate does). */
export async function resolvePipeline(file: string, catalog: KindCatalog): Promise<ResolveResult> {
  const read = await readYamlFile(file)
  if (!read.ok) return read
  const composed = await composePipeline(read.source, catalog)
  if (!composed.ok) return composed
  const {data, composition} = composed
  const steps = data.steps as Array<{id: string}>
  const sources: Record<string, StepSource> = {}
  steps.forEach((step, i) => {
    const origin = composition.steps[i]!
    sources[step.id] ??= {file: origin.source.file, line: locate(origin.source, origin.segments).line}
  })
  const files = composition.files.map((f) => f.file)
  const doc = new Document(data)
  doc.commentBefore = ` composed from ${files.join(' <- ')} by pipe pipeline resolve`
  const seq = isMap(doc.contents) ? doc.contents.get('steps', true) : undefined
  if (isSeq(seq)) {
    seq.items.forEach((item, i) => {
      const step = steps[i]
      const origin = composition.steps[i]
      if (!step || !origin || !item || typeof item !== 'object') return
      ;(item as {commentBefore?: string}).commentBefore = ` ${origin.source.file}:${locate(origin.source, origin.segments).line}`
    })
  }
  return {ok: true, resolved: {pipeline: data, sources, files, yaml: doc.toString({lineWidth: 0})}}
}
