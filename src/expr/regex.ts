/**
 * CEL's `matches()` with RE2's syntax and RE2's guarantee: time linear in the text, whatever the
 * pattern. cel-js calls JavaScript's backtracking RegExp, which takes exponential time on
 * `'aaaa…ab'.matches('^(a+)+$')` and, holding the thread, lets no signal through. re2js is a
 * pure-JavaScript port of RE2 (no native build); a pattern RE2 cannot express (backreferences,
 * lookaround) is an error, at validate time when the pattern is a literal, else when evaluated.
 *
 * re2js is ~260 KB: it is loaded (loadRegexEngine) only for pipelines whose expressions may call
 * matches (mayUseRegex), before anything evaluates them, so the calls here stay synchronous.
 */
import type {RE2JS} from 're2js'

let engine: typeof RE2JS | undefined

/** Loads re2js, once per process. */
export async function loadRegexEngine(): Promise<void> {
  engine ??= (await import('re2js')).RE2JS
}

/** Whether text holding expressions may call matches(): then the engine must be loaded first. */
export function mayUseRegex(text: string): boolean {
  return text.includes('matches')
}

/** A pattern RE2 refuses, or the engine missing; `message` is ready to follow "matches(): ". */
export class RegexError extends Error {}

const MAX_CACHED = 200
const compiled = new Map<string, RE2JS>()

function compile(pattern: string): RE2JS {
  let re = compiled.get(pattern)
  if (re !== undefined) return re
  if (engine === undefined) throw new RegexError('internal: the regular expression engine was not loaded (loadRegexEngine)')
  try {
    re = engine.compile(pattern)
  } catch (error) {
    const detail = error instanceof Error ? error.message.replace(/^error parsing regexp: /, '') : String(error)
    throw new RegexError(
      `the pattern ${JSON.stringify(pattern.length > 100 ? `${pattern.slice(0, 100)}…` : pattern)} is not an RE2 regular expression (${detail}); RE2 has no backreferences (\\1) and no lookaround ((?=…), (?<=…))`,
    )
  }
  if (compiled.size >= MAX_CACHED) compiled.clear()
  compiled.set(pattern, re)
  return re
}

/** CEL's `text.matches(pattern)`: whether the pattern matches any part of the text. */
export function regexMatches(text: string, pattern: string): boolean {
  return compile(pattern).test(text)
}

/** Why a pattern cannot be used, or undefined when RE2 takes it. */
export function regexProblem(pattern: string): string | undefined {
  try {
    compile(pattern)
    return undefined
  } catch (error) {
    if (error instanceof RegexError) return error.message
    throw error
  }
}
