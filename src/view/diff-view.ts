/**
 * Diffs read as diffs: a unified diff (an `edit` step's patch, an agent's patch, two spec versions)
 * drawn by diff2html as a table with file names and line numbers. diff2html escapes every line
 * and file name it writes; characters that reorder text are shown as their code point first, as
 * everywhere else on the pages. Loaded when a page is built, not when the CLI starts.
 */
import {INVISIBLE, showInvisible, trusted, type Html} from './html.js'

/** Draws one unified diff (one or more files) as markup. */
export type DiffRenderer = (patch: string) => Html

/** A string that is a unified diff: a file header followed by at least one hunk. */
export function isUnifiedDiff(value: unknown): value is string {
  return typeof value === 'string' && /^(diff --git |--- |Index: )/m.test(value) && /^@@ -\d+(,\d+)? \+\d+(,\d+)? @@/m.test(value)
}

export async function diffRenderer(): Promise<DiffRenderer> {
  const {html} = await import('diff2html')
  return (patch) =>
    trusted(
      html(patch.replace(INVISIBLE, showInvisible), {
        drawFileList: false,
        outputFormat: 'line-by-line',
        // Word-level marks within a changed line; 'none' pairs no lines across files, which keeps it fast.
        diffStyle: 'word',
        matching: 'none',
      }),
    )
}

/** Two texts (a spec version before and after, as JSON) as one file's unified diff. */
export async function textsDiff(): Promise<(name: string, before: string, after: string) => string> {
  const {createTwoFilesPatch} = await import('diff')
  return (name, before, after) => createTwoFilesPatch(`a/${name}`, `b/${name}`, before, after, undefined, undefined, {context: 3})
}

/** What a page needs to draw diffs, loaded once per page. */
export async function diffTools(): Promise<{diff: DiffRenderer; textDiff: (name: string, before: string, after: string) => string}> {
  const [diff, textDiff] = await Promise.all([diffRenderer(), textsDiff()])
  return {diff, textDiff}
}

/** Every unified diff among a step's outputs (an edit's files[].diff, an agent's patch), by where it is. */
export function diffsIn(value: unknown, at = '', depth = 0): Array<{path: string; patch: string}> {
  if (isUnifiedDiff(value)) return [{path: at, patch: value}]
  if (depth > 6 || value === null || typeof value !== 'object') return []
  const entries = Array.isArray(value)
    ? value.map((v, i) => [`${at}[${i}]`, v] as const)
    : Object.entries(value).map(([k, v]) => [at ? `${at}.${k}` : k, v] as const)
  return entries.flatMap(([p, v]) => diffsIn(v, p, depth + 1))
}
