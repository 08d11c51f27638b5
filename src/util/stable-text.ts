/**
 * Text that is the same wherever and whenever it was made. What pipe sends to a model, what a
 * cassette is keyed by and what a golden compares must depend on the pipeline, its inputs and the
 * repository's content only; these functions take out what depends on the folder, the clock or how
 * fast a machine is, where pipe passes along text a program wrote (a test runner's log, a command's
 * output) or builds a key from text it cannot keep free of them.
 */
import {realpathSync} from 'node:fs'
import path from 'node:path'

/** An ISO 8601 time of day with a date (what loggers and pipe's own records write). */
const ISO_TIME = /\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\b/g

const UNIT = String.raw`(?:ms|msec|milliseconds?|µs|us|ns|s|sec|secs|seconds?|m|min|mins|minutes?)`
const AMOUNT = String.raw`\d+(?:[.,]\d+)?\s?${UNIT}`
/**
 * Durations as test runners and build tools print them: `(12 ms)`, `(0.5s)` (node:test, mocha,
 * jest), `Ran 5 tests in 0.007s` (unittest), `5 passed in 0.12s` (pytest), `Time: 1.2 s` (jest),
 * `ok pkg 0.012s` (go test), `finished in 0.00s` (cargo), `took 3ms`, `duration_ms: 12.5` (TAP).
 */
const TIMINGS: ReadonlyArray<[RegExp, (match: string, ...groups: string[]) => string]> = [
  [new RegExp(String.raw`\((${AMOUNT}(?:\s+${AMOUNT})*)\)`, 'g'), () => '(… ms)'],
  [
    new RegExp(String.raw`\b(in|took|after|elapsed|Time:|time:|Duration:|duration:|Elapsed:|elapsed:)(\s+)${AMOUNT}(?:\s+${AMOUNT})*`, 'g'),
    (_m, word, space) => `${word}${space}…`,
  ],
  [/\b(duration_ms|elapsed_ms|time_ms)(:?\s+)[\d.]+/g, (_m, word, between) => `${word}${between}…`],
  [/(\s)\d+\.\d+s\b/g, (_m, space) => `${space}…s`],
]

/** Durations in `text` masked as `…`, whatever program printed them. */
export function maskTimings(text: string): string {
  let out = text
  for (const [pattern, replace] of TIMINGS) out = out.replace(pattern, replace as (substring: string, ...args: unknown[]) => string)
  return out
}

/** ISO times in `text` masked as `<time>`. */
export function maskTimes(text: string): string {
  return text.replace(ISO_TIME, '<time>')
}

/**
 * The times pipe itself writes into its records (JavaScript's Date#toISOString: milliseconds and
 * Z, always), masked as `<time>`: a spec's `meta.created_at` that a prompt reads through
 * `${{ spec }}` differs on every run. Any other written time (a deadline in a requirement, a log
 * line's timestamp a person pasted) is content, and keeps its place in a request's key.
 */
export function maskPipeTimes(text: string): string {
  return text.replace(/\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\b/g, '<time>')
}

/** `root` as given and as the file system resolves it, longest first. */
export function rootForms(root: string): string[] {
  const forms = [path.resolve(root)]
  try {
    forms.push(realpathSync(root))
  } catch {
    // The folder is gone: its path as given is all there is to drop.
  }
  return [...new Set(forms)].filter((r) => r !== path.parse(r).root).sort((a, b) => b.length - a.length)
}

/**
 * Paths below `root` named relative to it (`file:///w/a.test.js:3:7` reads `a.test.js:3:7`), and
 * the root itself as `.`: a message about the repository reads the same in any checkout of it.
 */
export function relativeToRoot(text: string, root: string): string {
  let out = text
  for (const r of rootForms(root)) {
    const prefix = r + path.sep
    out = out.split(`file://${prefix}`).join('').split(prefix).join('')
    out = out.replace(new RegExp(`${escapeRegExp(r)}(?![\\w.-])`, 'g'), '.')
  }
  return out
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** Output a program wrote, as a model or a golden should read it: no folder of this machine, no timing, no clock. */
export function stableText(text: string, root: string): string {
  return maskTimes(maskTimings(relativeToRoot(text, root)))
}

/**
 * pipe's own ids carry the date and a store's counter (R-20261124-0002, S-…, F-2026-001, E-0042):
 * the same run in another store or on another day gets other ids. Each distinct id becomes an
 * alias by kind and order of first appearance (`R-#1`, `S-#2`), so text that names ids keeps
 * which mentions are the same id, and nothing of when or where they were allocated.
 */
export class IdAliases {
  private readonly seen = new Map<string, string>()
  private readonly counts = new Map<string, number>()

  replace(text: string): string {
    return text.replace(/\b(?:([RS])-\d{8}-\d{4,}|(F)-\d{4}-\d{3,}|(E)-\d{4,})\b/g, (id: string, rs?: string, f?: string, e?: string) => {
      const known = this.seen.get(id)
      if (known) return known
      const kind = rs ?? f ?? e ?? '?'
      const n = (this.counts.get(kind) ?? 0) + 1
      this.counts.set(kind, n)
      const alias = `${kind}-#${n}`
      this.seen.set(id, alias)
      return alias
    })
  }
}
