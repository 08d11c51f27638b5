/**
 * What an editor's buffer of a pipeline holds, read as leniently as a half-typed file allows: the
 * language server completes and explains while the author types, when the file is rarely valid.
 */
import {LineCounter, parseDocument, visit, type Document} from 'yaml'
import type {Pipeline} from '../../types/pipeline.js'

export interface BufferView {
  text: string
  lines: string[]
  /** The YAML document, errors and all (the yaml package recovers what it can). */
  doc: Document.Parsed
  lineCounter: LineCounter
  /** The steps that are at least steps (an id and a kind, both strings), in order. */
  steps: Array<Pipeline['steps'][number]>
  /** The pipeline as far as it reads: these steps, and its inputs and secrets when they are what they should be. */
  pipeline: Pipeline
}

export function readBuffer(text: string): BufferView {
  const lineCounter = new LineCounter()
  const doc = parseDocument(text, {lineCounter, uniqueKeys: false, prettyErrors: false, strict: false})
  let data: unknown
  try {
    data = doc.toJS({maxAliasCount: 200})
  } catch {
    data = undefined
  }
  const top = isRecord(data) ? data : {}
  const listed = Array.isArray(top['steps']) ? (top['steps'] as unknown[]) : []
  let steps: Array<Pipeline['steps'][number]> = listed.filter(
    (s): s is Pipeline['steps'][number] => isRecord(s) && typeof s['id'] === 'string' && typeof s['kind'] === 'string',
  )
  // A buffer the parser gives up on still names its steps line by line.
  if (steps.length === 0) steps = stepsByLine(text)
  const pipeline = {
    version: 1,
    name: typeof top['name'] === 'string' ? top['name'] : 'pipeline',
    ...(isRecord(top['inputs']) ? {inputs: top['inputs']} : {}),
    ...(Array.isArray(top['secrets']) ? {secrets: top['secrets'].filter((s) => typeof s === 'string')} : {}),
    steps,
  } as unknown as Pipeline
  return {text, lines: text.split(/\r?\n/), doc, lineCounter, steps, pipeline}
}

/** `- id: NAME` lines, each with the `kind:` that follows it before the next step. */
function stepsByLine(text: string): Array<Pipeline['steps'][number]> {
  const steps: Array<{id: string; kind: string}> = []
  for (const line of text.split(/\r?\n/)) {
    const id = /^\s*-\s+id:\s*["']?([a-z][a-z0-9_]*)/.exec(line)?.[1]
    if (id) steps.push({id, kind: ''})
    const kind = /^\s*(?:-\s+)?kind:\s*["']?([a-z][a-z0-9_-]*)/.exec(line)?.[1]
    if (kind && steps.length > 0 && steps.at(-1)!.kind === '') steps.at(-1)!.kind = kind
  }
  return steps as unknown as Array<Pipeline['steps'][number]>
}

/**
 * The span of the YAML node that starts at `offset` (the smallest: a key rather than its mapping),
 * kept to its first line; else the word there. A diagnostic knows where a problem starts; an
 * editor underlines a range.
 */
export function spanAt(view: BufferView, offset: number): [number, number] {
  let end: number | undefined
  visit(view.doc, (_key, node) => {
    const range = (node as {range?: [number, number, number]}).range
    if (range && range[0] === offset && range[1] > offset && (end === undefined || range[1] < end)) end = range[1]
  })
  const lineEnd = view.text.indexOf('\n', offset) === -1 ? view.text.length : view.text.indexOf('\n', offset)
  if (end !== undefined) return [offset, Math.min(end, lineEnd)]
  const word = /^[^\s,{}[\]'"]+/.exec(view.text.slice(offset, lineEnd))?.[0]
  return [offset, offset + Math.max(1, word?.length ?? 0)]
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}
