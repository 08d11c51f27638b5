/**
 * Reads a YAML file keeping node positions, so that every later check can point at the line and
 * column of the value it is about. Refuses the inputs a YAML parser should never be trusted with:
 * binary files, huge files, alias-expansion bombs, documents of more nodes than any hand-written
 * file holds. Parsing stays linear in the file's size: the yaml package's own duplicate-key check
 * compares each key with every earlier key of its mapping (64k keys took 38 s), so keys are
 * checked here instead, one Set per mapping.
 */
import {stat} from '../util/fs-async.js'
import {Alias, CST, Document, isAlias, isMap, isPair, isScalar, isSeq, Lexer, LineCounter, parseDocument, type Node} from 'yaml'
import {PipeError} from '../errors.js'
import {readInputFile} from '../util/text-input.js'
import type {Diagnostic} from './diagnostics.js'

export const MAX_YAML_BYTES = 5 * 1024 * 1024
/** Aliases a document may expand; a bomb needs thousands, real pipelines use a handful. */
export const MAX_ALIAS_COUNT = 200
/**
 * Nodes a document may hold, counted as written: its scalars (keys, values, list items), aliases and
 * flow collections (`{...}`, `[...]`); a 500-step pipeline holds ~10,000.
 */
export const MAX_YAML_NODES = 100_000
/**
 * How deep values may nest (a pipeline's deepest is ~10: steps, a step, its with:, a list in it):
 * the yaml package's parser recurses per level and ran out of stack at ~800 (a 2 KB file of `[`),
 * and the checks after it recurse too.
 */
export const MAX_YAML_DEPTH = 200

export interface YamlSource {
  file: string
  text: string
  doc: Document.Parsed
  lineCounter: LineCounter
  data: unknown
}

export type LoadResult = {ok: true; source: YamlSource} | {ok: false; diagnostics: Diagnostic[]}

function at(file: string, message: string, rule = 'yaml', line = 1, col = 1): Diagnostic {
  return {file, line, col, path: '', message, rule}
}

export async function readYamlFile(file: string, expect: 'mapping' = 'mapping'): Promise<LoadResult> {
  let size: number
  try {
    const info = await stat(file)
    if (info.isDirectory()) return {ok: false, diagnostics: [at(file, 'is a directory, not a YAML file', 'file')]}
    size = info.size
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    const message = code === 'ENOENT' ? 'file not found' : `cannot read file (${code ?? String(error)})`
    return {ok: false, diagnostics: [at(file, message, 'file')]}
  }
  if (size > MAX_YAML_BYTES) {
    return {ok: false, diagnostics: [at(file, `file is ${size} bytes; the limit is ${MAX_YAML_BYTES} bytes`, 'file')]}
  }
  let bytes: Buffer
  try {
    // Bounded while reading: a FIFO or a device (/dev/urandom) has no size to check up front.
    bytes = await readInputFile(file, 'file', MAX_YAML_BYTES)
  } catch (error) {
    return {
      ok: false,
      diagnostics: [
        at(file, error instanceof PipeError ? error.message : `cannot read file (${(error as NodeJS.ErrnoException).code ?? String(error)})`, 'file'),
      ],
    }
  }
  return parseYamlBytes(file, bytes, expect)
}

export function parseYamlBytes(file: string, bytes: Uint8Array, expect: 'mapping' = 'mapping'): LoadResult {
  // Checked here too, for text that never was a file on disk (an editor's buffer, pipe lsp): past the limit it would read as valid.
  if (bytes.length > MAX_YAML_BYTES) return {ok: false, diagnostics: [at(file, `file is ${bytes.length} bytes; the limit is ${MAX_YAML_BYTES} bytes`, 'file')]}
  if (bytes.length === 0) return {ok: false, diagnostics: [at(file, 'file is empty; expected a YAML mapping', 'empty')]}
  const nul = bytes.indexOf(0)
  if (nul !== -1) return {ok: false, diagnostics: [at(file, `file is binary (NUL byte at offset ${nul}), not YAML text`, 'binary')]}
  let text: string
  try {
    text = new TextDecoder('utf-8', {fatal: true}).decode(bytes)
  } catch {
    return {ok: false, diagnostics: [at(file, 'file is not valid UTF-8 text; save it as UTF-8', 'binary')]}
  }
  return parseYamlText(file, text, expect)
}

export function parseYamlText(file: string, rawText: string, expect: 'mapping' = 'mapping'): LoadResult {
  const text = rawText.charCodeAt(0) === 0xfeff ? rawText.slice(1) : rawText
  const lineCounter = new LineCounter()
  // Counted from the tokenizer first (~6× cheaper than building the document) when the text could
  // pass the bound: each node counted takes a character at least, so a shorter text cannot.
  const counted = text.length > MAX_YAML_NODES ? tokenNodePast(text) : undefined
  const doc = counted === undefined ? parseDocument(text, {lineCounter, uniqueKeys: false, prettyErrors: false, strict: true, merge: true}) : undefined
  const shape: ReturnType<typeof walkNodes> = doc ? walkNodes(doc.contents) : {duplicates: [], ...(counted !== undefined ? {tooMany: counted} : {})}
  // Past the parser's own stack (values nested ~800 deep) it says only that, at where it gave up.
  const overflow = doc?.errors.find((e) => /Maximum call stack size exceeded/.test(e.message))
  const tooDeep = shape.tooDeep ?? overflow?.pos[0]
  if (tooDeep !== undefined) {
    const pos = lineCounter.linePos(tooDeep)
    return {
      ok: false,
      diagnostics: [
        at(
          file,
          `refused: values nested more than ${MAX_YAML_DEPTH} deep; no pipeline, policy, answers or inputs file needs that`,
          'yaml-depth',
          pos.line,
          pos.col,
        ),
      ],
    }
  }
  if (shape.tooMany !== undefined) {
    const pos = doc ? lineCounter.linePos(shape.tooMany) : linePos(text, shape.tooMany)
    return {
      ok: false,
      diagnostics: [
        at(
          file,
          `refused: the document holds more than ${MAX_YAML_NODES} YAML nodes (keys, values and list items); no pipeline, policy, answers or inputs file needs that many`,
          'yaml-size',
          pos.line,
          pos.col,
        ),
      ],
    }
  }
  if (!doc) throw new PipeError('E_INTERNAL', 'a YAML text was counted past its bound without being refused')
  const problems = firstSyntaxError(
    [...doc.errors, ...doc.warnings.filter((w) => w.code !== 'TAG_RESOLVE_FAILED'), ...shape.duplicates].sort((a, b) => a.pos[0] - b.pos[0]),
  )
  if (problems.length > 0) {
    return {
      ok: false,
      diagnostics: problems.map((problem) => {
        const pos = lineCounter.linePos(problem.pos[0])
        const key = text
          .slice(problem.pos[0])
          .split(/[:\n]/)[0]!
          .trim()
          .replace(/^["']|["']$/g, '')
        const message =
          problem.code === 'DUPLICATE_KEY'
            ? `duplicate key "${key}" (keys of a mapping must be unique)`
            : `${firstLine(problem.message)}${quoteTrap(text.split('\n')[pos.line - 1] ?? '')}`
        return at(file, message, 'yaml', pos.line, pos.col)
      }),
    }
  }
  if (doc.contents === null || (isScalar(doc.contents) && (doc.contents.value === null || doc.contents.value === ''))) {
    return {ok: false, diagnostics: [at(file, `file has no content (only comments or blank lines); expected a YAML ${expect}`, 'empty')]}
  }
  if (!isMap(doc.contents)) {
    const found = isSeq(doc.contents) ? 'a list' : isScalar(doc.contents) ? `a single value (${JSON.stringify(doc.contents.value)})` : 'something else'
    const pos = positionOf({doc, lineCounter}, doc.contents)
    return {
      ok: false,
      diagnostics: [at(file, `the top level must be a mapping (key: value lines), but the file holds ${found}`, 'not-a-mapping', pos.line, pos.col)],
    }
  }
  let data: unknown
  try {
    data = doc.toJS({maxAliasCount: MAX_ALIAS_COUNT})
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error)
    if (/alias/i.test(message)) {
      return {ok: false, diagnostics: [at(file, `refused: aliases would expand past ${MAX_ALIAS_COUNT} nodes (an alias-expansion bomb?)`, 'alias-bomb')]}
    }
    return {ok: false, diagnostics: [at(file, message)]}
  }
  return {ok: true, source: {file, text, doc, lineCounter, data}}
}

interface Problem {
  readonly code: string
  readonly message: string
  readonly pos: readonly [number, number]
}

/**
 * The offset of the first node past MAX_YAML_NODES as the tokenizer sees the text (see
 * MAX_YAML_NODES: a scalar, an alias, the start of a flow collection), or undefined when there are
 * no more than that. The same nodes walkNodes counts, in the same order.
 */
function tokenNodePast(text: string): number | undefined {
  let count = 0
  let offset = 0
  // A block scalar is counted at its header (`|`, `>-`), where its node starts; its text follows as a scalar.
  let inBlock = false
  for (const token of new Lexer().lex(text)) {
    const type = CST.tokenType(token)
    // The lexer's control characters (before a plain or block scalar's text, at a document's start, a flow's end) are not in the text.
    if (type === 'scalar' || type === 'doc-mode' || type === 'flow-error-end' || type === 'byte-order-mark') {
      if (type === 'scalar' && !inBlock && ++count > MAX_YAML_NODES) return offset
      inBlock = false
      continue
    }
    if (type === 'block-scalar-header') inBlock = true
    if (TOKEN_NODES.has(type) && ++count > MAX_YAML_NODES) return offset
    offset += token.length
  }
  return undefined
}

/** The tokens that start a node of their own (besides a plain scalar's): see MAX_YAML_NODES. */
const TOKEN_NODES = new Set<string | null | undefined>([
  'single-quoted-scalar',
  'double-quoted-scalar',
  'block-scalar-header',
  'alias',
  'flow-map-start',
  'flow-seq-start',
])

/** Line and column (1-based) of an offset, as LineCounter gives them for a parsed text. */
function linePos(text: string, offset: number): {line: number; col: number} {
  let line = 1
  let start = 0
  for (let at = text.indexOf('\n'); at !== -1 && at < offset; at = text.indexOf('\n', at + 1)) {
    line++
    start = at + 1
  }
  return {line, col: offset - start + 1}
}

/**
 * One pass over the document in source order: counts its nodes (see MAX_YAML_NODES), stopping at
 * the first past MAX_YAML_NODES (its offset in `tooMany`), and finds keys repeated in a mapping. Keys are equal
 * as the yaml package's uniqueKeys check has them: scalars of the same value (1 and "1" differ; two
 * `<<` merge keys do not clash), any other key only with itself.
 */
function walkNodes(root: unknown): {duplicates: Problem[]; tooMany?: number; tooDeep?: number} {
  const duplicates: Problem[] = []
  const stack: unknown[] = [root]
  // Each collection's depth, the root's 1: its items are one deeper.
  const depths = new Map<unknown, number>([[root, 1]])
  let count = 0
  while (stack.length > 0) {
    const node = stack.pop()
    if (node === null || node === undefined) continue
    if (counts(node) && ++count > MAX_YAML_NODES) return {duplicates, tooMany: (node as Node).range?.[0] ?? 0}
    const depth = depths.get(node) ?? 1
    if ((isMap(node) || isSeq(node)) && depth > MAX_YAML_DEPTH) return {duplicates, tooDeep: (node as Node).range?.[0] ?? 0}
    if (isMap(node)) {
      for (const pair of node.items) for (const part of [pair.key, pair.value]) if (isMap(part) || isSeq(part)) depths.set(part, depth + 1)
      const seen = new Set<unknown>()
      for (const pair of node.items) {
        const key = pair.key
        if (isScalar(key) && !Number.isNaN(key.value)) {
          if (seen.has(key.value)) duplicates.push({code: 'DUPLICATE_KEY', message: 'Map keys must be unique', pos: [key.range?.[0] ?? 0, key.range?.[1] ?? 0]})
          else seen.add(key.value)
        }
      }
      // Reversed, so that popping visits the nodes in the order they are written.
      for (let i = node.items.length - 1; i >= 0; i--) stack.push(node.items[i]!.value, node.items[i]!.key)
    } else if (isSeq(node)) {
      for (const item of node.items) if (isMap(item) || isSeq(item)) depths.set(item, depth + 1)
      for (let i = node.items.length - 1; i >= 0; i--) stack.push(node.items[i])
    }
  }
  return {duplicates}
}

/** Whether a node is one the tokenizer sees as a token of its own: a value written (an empty one, `key:`, is not), an alias, a flow collection. */
function counts(node: unknown): boolean {
  if (isScalar(node)) return node.range !== undefined && node.range !== null && node.range[1] > node.range[0]
  if (isAlias(node)) return true
  return (isMap(node) || isSeq(node)) && node.flow === true
}

function firstLine(message: string): string {
  return message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')
}

export interface NodeLookup {
  /** The value node at the path, or the deepest ancestor that exists. */
  node: Node | null
  /** The key node of the last path segment when it names a mapping key that exists. */
  key: Node | null
  /** Whether the whole path was found. */
  exact: boolean
}

/** Finds the node at a JSON path, following aliases. */
export function findNode(source: Pick<YamlSource, 'doc'>, segments: ReadonlyArray<string | number>): NodeLookup {
  let current: unknown = source.doc.contents
  let key: Node | null = null
  for (const segment of segments) {
    current = resolveAlias(source.doc, current)
    if (isMap(current)) {
      const pair = current.items.find((item) => isPair(item) && isScalar(item.key) && String(item.key.value) === String(segment))
      if (!pair) return {node: current, key: null, exact: false}
      key = pair.key as Node
      current = pair.value
      if (current === null) return {node: key, key, exact: true}
    } else if (isSeq(current) && typeof segment === 'number') {
      const item = current.items[segment]
      if (item === undefined) return {node: current, key: null, exact: false}
      key = null
      current = item
    } else {
      return {node: (current as Node | null) ?? null, key: null, exact: false}
    }
  }
  return {node: (resolveAlias(source.doc, current) as Node | null) ?? null, key, exact: true}
}

function resolveAlias(doc: Document.Parsed, node: unknown): unknown {
  let current = node
  for (let hops = 0; current instanceof Alias && hops < 100; hops++) current = current.resolve(doc)
  return current
}

export function positionOf(
  source: Pick<YamlSource, 'lineCounter'> & Partial<Pick<YamlSource, 'doc'>>,
  node: Node | null | undefined,
): {line: number; col: number} {
  const offset = node?.range?.[0]
  if (offset === undefined) return {line: 1, col: 1}
  return source.lineCounter.linePos(offset)
}

/** Position of the value at a path (or of its key, when `preferKey`), falling back to the nearest ancestor. */
export function locate(source: YamlSource, segments: ReadonlyArray<string | number>, preferKey = false): {line: number; col: number} {
  const found = findNode(source, segments)
  return positionOf(source, preferKey && found.key ? found.key : found.node)
}

/**
 * A syntax error leaves what follows it unreliable (an unclosed quote can turn every later line
 * into an error): only the first is reported, with every duplicate key (each independent of the
 * others).
 */
function firstSyntaxError<P extends {code: string}>(problems: P[]): P[] {
  const first = problems.find((p) => p.code !== 'DUPLICATE_KEY')
  return first ? problems.filter((p) => p === first || p.code === 'DUPLICATE_KEY') : problems
}

/** The commonest YAML trap in a pipeline: a double quote inside a double-quoted expression ends the string there. */
function quoteTrap(line: string): string {
  if (!/"\$\{\{[^"]*"/.test(line) || (line.match(/"/g) ?? []).length < 3) return ''
  return `; a double-quoted string ends at its next ": quote the whole value with single quotes ('\${{ inputs.x == "a" }}') or use single quotes inside ("\${{ inputs.x == 'a' }}")`
}
