/**
 * Maps offsets in a YAML scalar's value back to offsets in its source text, so a diagnostic
 * inside `"${{ inputs.sinc }}..HEAD"` points at the column of `sinc` in the file, even when the
 * source has quotes, escapes or folded lines that the value does not.
 *
 * The source is what the `yaml` package's node range covers, `text.slice(node.range[0],
 * node.range[1])`, and the type is `node.type`. The mapping decodes the source again, keeping
 * for each value character the source index it came from, and is trusted only when that
 * decoding reproduces the parsed value exactly; otherwise (an exotic form this decoder does not
 * follow, such as a block scalar with an explicit indentation indicator) every offset maps to
 * the scalar's start, which is still the right line for the user to look at.
 */

export type ScalarType = 'PLAIN' | 'QUOTE_SINGLE' | 'QUOTE_DOUBLE' | 'BLOCK_LITERAL' | 'BLOCK_FOLDED'

export interface ScalarMap {
  /** The value as decoded from the source. */
  readonly value: string
  /** offsets[i] is the source index of value[i]; offsets[value.length] is the end of the content. */
  readonly offsets: readonly number[]
}

/**
 * Returns a function from value offsets to source offsets (both relative to the scalar's start).
 * `value` is the parsed value, which the decoding must reproduce for the map to be used.
 */
export function scalarOffsetMapper(source: string, type: string | undefined, value: string): (valueOffset: number) => number {
  const map = decodeScalar(source, (type ?? 'PLAIN') as ScalarType)
  if (map === undefined || map.value !== value) return () => 0
  return (valueOffset) => map.offsets[Math.max(0, Math.min(valueOffset, map.offsets.length - 1))]!
}

export function decodeScalar(source: string, type: ScalarType): ScalarMap | undefined {
  switch (type) {
    case 'PLAIN':
      return flow(source, 0, source.length, 'plain')
    case 'QUOTE_SINGLE':
    case 'QUOTE_DOUBLE': {
      const quote = type === 'QUOTE_SINGLE' ? "'" : '"'
      if (source[0] !== quote || source.length < 2 || source[source.length - 1] !== quote) return undefined
      return flow(source, 1, source.length - 1, type === 'QUOTE_SINGLE' ? 'single' : 'double')
    }
    case 'BLOCK_LITERAL':
    case 'BLOCK_FOLDED':
      return block(source, type === 'BLOCK_FOLDED')
    default:
      return undefined
  }
}

class Builder {
  value = ''
  offsets: number[] = []
  push(text: string, at: number): void {
    for (let i = 0; i < text.length; i++) this.offsets.push(at)
    this.value += text
  }
  done(end: number): ScalarMap {
    return {value: this.value, offsets: [...this.offsets, end]}
  }
}

interface Line {
  start: number
  end: number
}

function linesOf(source: string, from: number, to: number): Line[] {
  const lines: Line[] = []
  let start = from
  for (let i = from; i < to; i++) {
    if (source[i] === '\n') {
      lines.push({start, end: i > start && source[i - 1] === '\r' ? i - 1 : i})
      start = i + 1
    }
  }
  lines.push({start, end: to})
  return lines
}

const BLANK = /[ \t]/

/** Plain and quoted scalars: lines are trimmed and folded (one break -> space, n empty lines -> n breaks). */
function flow(source: string, from: number, to: number, style: 'plain' | 'single' | 'double'): ScalarMap | undefined {
  const out = new Builder()
  const lines = linesOf(source, from, to)
  let empties = 0
  let joinNext = false
  let started = false
  for (let li = 0; li < lines.length; li++) {
    let {start, end} = lines[li]!
    const first = li === 0
    const last = li === lines.length - 1
    if (!first) while (start < end && BLANK.test(source[start]!)) start++
    if (!last) while (end > start && BLANK.test(source[end - 1]!) && !(style === 'double' && source[end - 2] === '\\')) end--
    if (start === end && !first && !last) {
      empties++
      continue
    }
    if (!first) {
      const breakAt = lines[li - 1]!.end
      if (joinNext) joinNext = false
      else if (empties > 0) out.push('\n'.repeat(empties), breakAt)
      else if (started || style !== 'plain') out.push(' ', breakAt)
      empties = 0
    }
    if (style === 'double' && !last && end > start && source[end - 1] === '\\' && !escapedBackslash(source, start, end - 1)) {
      joinNext = true
      end--
    }
    if (!decodeRun(source, start, end, style, out)) return undefined
    started = true
  }
  return out.done(to)
}

/** True when the backslash at `at` is itself escaped (preceded by an odd run of backslashes). */
function escapedBackslash(source: string, from: number, at: number): boolean {
  let n = 0
  for (let i = at - 1; i >= from && source[i] === '\\'; i--) n++
  return n % 2 === 1
}

const SIMPLE_ESCAPES: Record<string, string> = {
  '0': '\0',
  a: '\x07',
  b: '\b',
  t: '\t',
  '\t': '\t',
  n: '\n',
  v: '\v',
  f: '\f',
  r: '\r',
  e: '\x1b',
  ' ': ' ',
  '"': '"',
  '/': '/',
  '\\': '\\',
  N: '\x85',
  _: '\xa0',
  L: '\u2028',
  P: '\u2029',
}

function decodeRun(source: string, start: number, end: number, style: 'plain' | 'single' | 'double', out: Builder): boolean {
  let i = start
  while (i < end) {
    const c = source[i]!
    if (style === 'single' && c === "'" && source[i + 1] === "'") {
      out.push("'", i)
      i += 2
      continue
    }
    if (style === 'double' && c === '\\') {
      const e = source[i + 1]
      if (e === undefined) return false
      const simple = SIMPLE_ESCAPES[e]
      if (simple !== undefined) {
        out.push(simple, i)
        i += 2
        continue
      }
      const width = e === 'x' ? 2 : e === 'u' ? 4 : e === 'U' ? 8 : 0
      const hex = source.slice(i + 2, i + 2 + width)
      if (width === 0 || !/^[0-9a-fA-F]+$/.test(hex) || hex.length !== width) return false
      out.push(String.fromCodePoint(parseInt(hex, 16)), i)
      i += 2 + width
      continue
    }
    out.push(c, i)
    i++
  }
  return true
}

/** Block scalars (`|` and `>`), with auto-detected indentation and any chomping indicator. */
function block(source: string, folded: boolean): ScalarMap | undefined {
  const headerEnd = source.indexOf('\n')
  if (headerEnd === -1) return {value: '', offsets: [source.length]}
  const header = source
    .slice(0, headerEnd)
    .replace(/\s+#.*$/, '')
    .trim()
  const match = /^[|>]([+-]?)$/.exec(header)
  if (match === null) return undefined // an explicit indentation indicator: not followed here
  const chomp = match[1] ?? ''
  const lines = linesOf(source, headerEnd + 1, source.length)
  // A trailing empty piece after the last newline is not a line.
  if (lines.length > 0 && lines[lines.length - 1]!.start === source.length) lines.pop()
  const firstContent = lines.find((l) => source.slice(l.start, l.end).trim() !== '')
  if (firstContent === undefined) return chomp === '+' ? undefined : {value: '', offsets: [source.length]}
  let indent = 0
  while (source[firstContent.start + indent] === ' ') indent++
  const out = new Builder()
  let pendingBreaks: number[] = []
  let previous: 'none' | 'normal' | 'more' = 'none'
  for (const line of lines) {
    const text = source.slice(line.start, line.end)
    if (text.slice(0, indent).trim() !== '' && text.trim() !== '') return undefined // less indented: the scalar ended earlier
    const contentStart = Math.min(line.start + indent, line.end)
    const content = source.slice(contentStart, line.end)
    if (content.trim() === '') {
      pendingBreaks.push(line.start - 1)
      continue
    }
    const kind = BLANK.test(content[0] ?? '') ? 'more' : 'normal'
    if (previous !== 'none') {
      const breakAt = pendingBreaks[0] ?? line.start - 1
      if (!folded) out.push('\n'.repeat(pendingBreaks.length + 1), breakAt)
      else if (pendingBreaks.length === 0) out.push(previous === 'normal' && kind === 'normal' ? ' ' : '\n', breakAt)
      else out.push('\n'.repeat(pendingBreaks.length + (previous === 'more' || kind === 'more' ? 1 : 0)), breakAt)
    } else if (pendingBreaks.length > 0) {
      out.push('\n'.repeat(pendingBreaks.length), pendingBreaks[0]!)
    }
    pendingBreaks = []
    out.push(content, contentStart)
    // Builder.push gives one offset for a whole run; fix each character's own index.
    for (let k = 0; k < content.length; k++) out.offsets[out.offsets.length - content.length + k] = contentStart + k
    previous = kind
  }
  const lastEnd = out.offsets.length > 0 ? out.offsets[out.offsets.length - 1]! + 1 : source.length
  if (chomp === '-') return out.done(lastEnd)
  if (chomp === '+') {
    out.push('\n'.repeat(pendingBreaks.length + 1), lastEnd)
    return out.done(source.length)
  }
  out.push('\n', lastEnd)
  return out.done(source.length)
}
