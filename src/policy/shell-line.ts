/**
 * A compound command line as a model writes it (`npm test && node x.js`), parsed into argument
 * vectors joined by &&, ||, ; and |, so that each vector is checked against allowed_commands and
 * run without a shell. Quotes are honoured; nothing is expanded: variables, globs, `~`, command
 * substitution, redirections, subshells and background jobs are refused with the reason, since a
 * shell would run something other than the argv the policy judged.
 */

export type Joiner = '&&' | '||' | ';' | '|'

export interface Segment {
  argv: string[]
  /** How this segment joins the one before it; absent for the first. */
  after?: Joiner
}

export type SplitResult = {ok: true; segments: Segment[]} | {ok: false; error: string}

const REFUSED: Record<string, string> = {
  $: 'variables and command substitution ($) are not expanded',
  '`': 'command substitution (`) is not run',
  '>': 'redirections (>) are not supported; the output is captured for you',
  '<': 'redirections (<) are not supported',
  '(': 'subshells and grouping ( ) are not supported',
  ')': 'subshells and grouping ( ) are not supported',
  '{': 'brace expansion and grouping { } are not supported',
  '}': 'brace expansion and grouping { } are not supported',
  '*': 'globs (*) are not expanded; name the files, or quote the argument',
  '?': 'globs (?) are not expanded; quote the argument',
  '[': 'globs ([) are not expanded; quote the argument',
  '\n': 'a line break is not a separator here; use ; or &&',
}

export function splitCommandLine(line: string): SplitResult {
  const segments: Segment[] = []
  let argv: string[] = []
  let word: string | null = null
  let after: Joiner | undefined
  const fail = (error: string, at: number): SplitResult => ({ok: false, error: `${error} (at character ${at + 1} of ${JSON.stringify(line)})`})
  const endWord = (): void => {
    if (word !== null) argv.push(word)
    word = null
  }
  const endSegment = (joiner: Joiner, at: number): SplitResult | null => {
    endWord()
    if (argv.length === 0) return fail(`"${joiner}" has no command before it`, at)
    segments.push({argv, ...(after ? {after} : {})})
    argv = []
    after = joiner
    return null
  }
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (c === "'") {
      const end = line.indexOf("'", i + 1)
      if (end < 0) return fail('unterminated single quote', i)
      word = (word ?? '') + line.slice(i + 1, end)
      i = end
      continue
    }
    if (c === '"') {
      let text = ''
      let j = i + 1
      for (; j < line.length && line[j] !== '"'; j++) {
        const d = line[j]!
        if (d === '\\' && j + 1 < line.length && '"\\$`'.includes(line[j + 1]!)) text += line[++j]!
        else if (d === '$' || d === '`') return fail(REFUSED[d]!, j)
        else text += d
      }
      if (j >= line.length) return fail('unterminated double quote', i)
      word = (word ?? '') + text
      i = j
      continue
    }
    if (c === '\\') {
      if (i + 1 >= line.length) return fail('a line may not end in a backslash', i)
      word = (word ?? '') + line[++i]!
      continue
    }
    if (c === ' ' || c === '\t') {
      endWord()
      continue
    }
    if (c === '&' || c === '|') {
      const double = line[i + 1] === c
      if (c === '&' && !double) return fail('background jobs (&) are not supported', i)
      const failed = endSegment(double ? (c === '&' ? '&&' : '||') : '|', i)
      if (failed) return failed
      if (double) i++
      continue
    }
    if (c === ';') {
      const failed = endSegment(';', i)
      if (failed) return failed
      continue
    }
    if (c === '#' && word === null) return fail('comments (#) are not supported', i)
    if (c === '~' && word === null) return fail('~ is not expanded; give a path relative to the repository root', i)
    const refused = REFUSED[c]
    if (refused) return fail(refused, i)
    word = (word ?? '') + c
  }
  endWord()
  if (argv.length === 0)
    return segments.length === 0 ? {ok: false, error: 'the command line is empty'} : fail(`"${after}" has no command after it`, line.length - 1)
  segments.push({argv, ...(after ? {after} : {})})
  return {ok: true, segments}
}
