/**
 * Finds the `${{ … }}` expressions in one YAML scalar. Offsets are UTF-16 indexes into the
 * scalar's value (what the YAML parser produced); `sourceOffsets` in source-map.ts turns them
 * into offsets in the file for scalars whose source differs from their value (quotes, escapes,
 * folded lines).
 *
 * - `${{` opens an expression; the first `}}` outside a CEL string literal, a `//` comment and
 *   any `{ … }` map literal closes it, so `${{ 'a}}b' }}` and `${{ {'k': {'n': 1}} }}` work.
 * - `$${{` is a literal `${{` (the `$` doubles, as in Docker Compose); `$` elsewhere, a lone `{{`
 *   and a stray `}}` are plain text. There is no other escape.
 * - A scalar that is exactly one expression is "whole": it evaluates to a typed value (a list
 *   stays a list). Any text around it makes the scalar a string, whitespace too: YAML already trims
 *   a plain scalar, so whitespace that reaches here was written on purpose (a quoted "${{ n }}\n",
 *   a block scalar's last newline) and a file's content keeps it.
 */

export interface TextPart {
  readonly kind: 'text'
  /** The literal text, with `$${{` already turned into `${{`. */
  readonly text: string
  readonly offset: number
}

export interface ExprPart {
  readonly kind: 'expr'
  /** The CEL source between the braces, with surrounding whitespace removed. */
  readonly expression: string
  /** Where `${{` starts. */
  readonly offset: number
  /** Just after the closing `}}`. */
  readonly end: number
  /** Where `expression` starts, so an offset inside the expression maps to expressionOffset + n. */
  readonly expressionOffset: number
}

export type TemplatePart = TextPart | ExprPart

export interface TemplateDiagnostic {
  readonly message: string
  readonly offset: number
  readonly length: number
}

export interface Template {
  readonly parts: readonly TemplatePart[]
  /** Set when the scalar is exactly one expression: the scalar's value is that expression's typed value. */
  readonly whole: ExprPart | undefined
  readonly diagnostics: readonly TemplateDiagnostic[]
}

const OPEN = '${{'
const ESCAPED_OPEN = '$${{'

/** Cheap test for callers that walk every scalar of a file. */
export function hasTemplate(text: string): boolean {
  return text.includes(OPEN)
}

export function parseTemplate(text: string): Template {
  const parts: TemplatePart[] = []
  const diagnostics: TemplateDiagnostic[] = []
  let literal = ''
  let literalStart = 0
  let i = 0
  const flushText = (): void => {
    if (literal !== '') parts.push({kind: 'text', text: literal, offset: literalStart})
    literal = ''
  }
  while (i < text.length) {
    if (text.startsWith(ESCAPED_OPEN, i)) {
      if (literal === '') literalStart = i
      literal += OPEN
      i += ESCAPED_OPEN.length
      continue
    }
    if (!text.startsWith(OPEN, i)) {
      if (literal === '') literalStart = i
      literal += text[i]
      i++
      continue
    }
    const bodyStart = i + OPEN.length
    const close = findClose(text, bodyStart)
    if (close.end === undefined) {
      diagnostics.push({message: close.problem, offset: i, length: text.length - i})
      if (literal === '') literalStart = i
      literal += text.slice(i)
      i = text.length
      break
    }
    flushText()
    const body = text.slice(bodyStart, close.end)
    const leading = body.length - body.trimStart().length
    const expression = body.trim()
    const part: ExprPart = {kind: 'expr', expression, offset: i, end: close.end + 2, expressionOffset: bodyStart + leading}
    if (expression === '') diagnostics.push({message: 'empty expression: put a CEL expression between ${{ and }}', offset: i, length: part.end - i})
    parts.push(part)
    i = part.end
  }
  flushText()
  const exprs = parts.filter((p): p is ExprPart => p.kind === 'expr')
  const whole = exprs.length === 1 && parts.length === 1 && diagnostics.length === 0 ? exprs[0] : undefined
  return {parts, whole, diagnostics}
}

type Close = {end: number; problem?: undefined} | {end: undefined; problem: string}

/** Finds the `}}` that ends an expression whose body starts at `from`. */
function findClose(text: string, from: number): Close {
  let depth = 0
  let i = from
  while (i < text.length) {
    const c = text[i]!
    if (c === "'" || c === '"') {
      const after = skipString(text, i)
      if (after === undefined)
        return {
          end: undefined,
          problem: `unterminated string literal in \${{ … }} (opened at ${i - from + 1} in the expression); close the quote, then the expression with }}`,
        }
      i = after
      continue
    }
    if (c === '/' && text[i + 1] === '/') {
      const newline = text.indexOf('\n', i)
      i = newline === -1 ? text.length : newline
      continue
    }
    if (c === '{') depth++
    else if (c === '}') {
      if (depth === 0 && text[i + 1] === '}') return {end: i}
      if (depth > 0) depth--
    }
    i++
  }
  return {end: undefined, problem: 'unterminated ${{: no closing }}'}
}

/**
 * Skips a CEL string or bytes literal starting at the quote `text[at]`; returns the index just
 * after it, or undefined when it does not end. Handles triple quotes and raw (r"…") literals,
 * where a backslash does not escape.
 */
function skipString(text: string, at: number): number | undefined {
  const quote = text[at]!
  const raw = isRawPrefix(text, at)
  const triple = text.startsWith(quote.repeat(3), at)
  const closing = triple ? quote.repeat(3) : quote
  let i = at + closing.length
  while (i < text.length) {
    if (!raw && text[i] === '\\') {
      i += 2
      continue
    }
    if (text.startsWith(closing, i)) return i + closing.length
    if (!triple && text[i] === '\n') return undefined
    i++
  }
  return undefined
}

/** True when the quote at `at` is preceded by a string prefix containing r/R (r, R, rb, br, …). */
function isRawPrefix(text: string, at: number): boolean {
  let start = at
  while (start > 0 && at - start < 2 && /[rRbB]/.test(text[start - 1]!)) start--
  const prefix = text.slice(start, at)
  if (!/[rR]/.test(prefix)) return false
  return start === 0 || !/[\w]/.test(text[start - 1]!)
}
