/**
 * The language server's diagnostics: `pipe validate`'s own check (validateFile, every rule, every
 * error in one pass) of an editor's unsaved buffer, each problem given the range an editor
 * underlines. Files a pipeline reads (prompts, schemas, child pipelines) resolve beside the
 * document's path, as they do for `pipe validate`.
 */
import path from 'node:path'
import type {Diagnostic} from '../../config/diagnostics.js'
import type {KindCatalog} from '../../config/kind-contract.js'
import {kindOf, validateFile} from '../../config/validate-files.js'
import {readBuffer, spanAt, type BufferView} from './buffer.js'

export interface Position {
  line: number
  character: number
}

export interface BufferProblem {
  range: {start: Position; end: Position}
  message: string
  severity: 'error' | 'warning'
  /** The check that found it: yaml, schema, or a rule's name (as `pipe validate --json` says). */
  code: string
}

/**
 * The problems of `text`, the content of the pipeline at `file`. A file that is not a pipeline (a
 * policy, an answers file, a test file: told as `pipe validate` tells it) has none here: those are
 * checked on disk by `pipe validate`.
 */
export async function checkBuffer(file: string, text: string, catalog: KindCatalog): Promise<BufferProblem[]> {
  if (!isPipelineText(file, text)) return []
  const report = await validateFile(file, catalog, undefined, text)
  const view = readBuffer(text)
  return [...report.diagnostics.map((d) => problem(view, file, d, 'error')), ...report.warnings.map((d) => problem(view, file, d, 'warning'))]
}

/**
 * Whether an editor's YAML file is a pipeline: its $schema line says so, or it has a top-level
 * `version:` and `steps:` (or `extends:`). An editor starts the server for every YAML file; a
 * compose file or a CI workflow is none of pipe's business.
 */
export function isPipelineText(file: string, text: string): boolean {
  const head = text.slice(0, 2000)
  if (kindOf(file, head) !== 'pipeline') return false
  if (/#\s*yaml-language-server:\s*\$schema=\S*pipeline\.schema\.json/.test(head)) return true
  return /^version:/m.test(text) && /^(steps|extends):/m.test(text)
}

function problem(view: BufferView, file: string, d: Diagnostic, severity: 'error' | 'warning'): BufferProblem {
  const code = d.rule || 'pipe'
  // A problem in another file (a pipeline this one extends): said at the top, with where it is.
  if (path.resolve(d.file) !== path.resolve(file)) {
    const zero = {line: 0, character: 0}
    return {range: {start: zero, end: zero}, message: `${d.file}:${d.line}:${d.col}: ${d.message}`, severity, code}
  }
  const offset = offsetOf(view, d.line, d.col)
  const [from, to] = spanAt(view, offset)
  return {range: {start: positionOf(view, from), end: positionOf(view, to)}, message: d.message, severity, code}
}

function offsetOf(view: BufferView, line: number, col: number): number {
  const starts = view.lineCounter.lineStarts
  const start = starts[Math.min(Math.max(0, line - 1), starts.length - 1)] ?? 0
  return Math.min(view.text.length, start + Math.max(0, col - 1))
}

function positionOf(view: BufferView, offset: number): Position {
  const pos = view.lineCounter.linePos(offset)
  return {line: pos.line - 1, character: pos.col - 1}
}
