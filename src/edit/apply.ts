/**
 * Applying SEARCH/REPLACE blocks: exact matches first, then matches that ignore trailing white
 * space, then matches that ignore indentation (the replacement is re-indented by the same amount).
 * All blocks are matched in memory before any file is written: all apply or none.
 */
import type {EditBlock} from './blocks.js'

export interface BlockFailure {
  block: number
  path: string
  line: number
  reason: string
  /** The lines of the file that come closest to the SEARCH text, with their line numbers. */
  nearest?: {from: number; to: number; text: string}
}

export interface FileChange {
  path: string
  before: string | null
  after: string
  /** Blocks that undo this change, in the order to apply them. */
  reverse: Array<{search: string; replace: string}>
}

type Match = {start: number; end: number; replacement: string[]} | null

function splitLines(text: string): string[] {
  return text === '' ? [] : text.split('\n')
}

function indentOf(line: string): string {
  return /^[ \t]*/.exec(line)![0]
}

/** Finds `search` in `lines` at or after `from`, by increasingly tolerant comparisons. */
function find(lines: string[], search: string[], replace: string[], from: number): Match {
  const tries: Array<(a: string, b: string) => boolean> = [(a, b) => a === b, (a, b) => a.trimEnd() === b.trimEnd(), (a, b) => a.trim() === b.trim()]
  for (const [level, same] of tries.entries()) {
    for (let start = from; start + search.length <= lines.length; start++) {
      let ok = true
      for (let i = 0; i < search.length && ok; i++) ok = same(lines[start + i]!, search[i]!)
      if (!ok) continue
      let replacement = replace
      if (level === 2) {
        // Re-indent the replacement by the difference between the file's and the block's indentation.
        const firstSearch = search.find((l) => l.trim() !== '') ?? ''
        const firstFile = lines[start + search.indexOf(firstSearch)] ?? ''
        const have = indentOf(firstFile)
        const gave = indentOf(firstSearch)
        replacement = replace.map((l) => (l.trim() === '' ? l : l.startsWith(gave) ? have + l.slice(gave.length) : have + l.trimStart()))
      }
      return {start, end: start + search.length, replacement}
    }
  }
  return null
}

/**
 * The window of the file most like the SEARCH text, to show the author what is really there. A
 * window's score is the share of distinct white-space-separated tokens it has in common with the
 * SEARCH text (of the larger token set); it is kept as the window slides one line at a time, so a
 * big file and a long SEARCH cost lines + search, not their product.
 */
function nearest(lines: string[], search: string[]): BlockFailure['nearest'] {
  if (lines.length === 0) return undefined
  const size = Math.max(1, Math.min(search.length, lines.length))
  const right = new Set(search.join('\n').split(/\s+/).filter(Boolean))
  const tokens = lines.map((line) => line.split(/\s+/).filter(Boolean))
  // The window's distinct tokens with their counts, and how many of them the SEARCH text has.
  const counts = new Map<string, number>()
  let shared = 0
  const add = (line: string[]): void => {
    for (const t of line) {
      const n = counts.get(t) ?? 0
      counts.set(t, n + 1)
      if (n === 0 && right.has(t)) shared++
    }
  }
  const remove = (line: string[]): void => {
    for (const t of line) {
      const n = counts.get(t)!
      if (n === 1) {
        counts.delete(t)
        if (right.has(t)) shared--
      } else counts.set(t, n - 1)
    }
  }
  const score = (): number => (counts.size === 0 && right.size === 0 ? 1 : shared / Math.max(counts.size, right.size))
  for (let i = 0; i < size; i++) add(tokens[i]!)
  let best = {score: score(), start: 0}
  for (let start = 1; start + size <= lines.length; start++) {
    remove(tokens[start - 1]!)
    add(tokens[start + size - 1]!)
    const now = score()
    if (now > best.score) best = {score: now, start}
  }
  const from = Math.max(0, best.start - 2)
  const to = Math.min(lines.length, best.start + size + 2)
  return {from: from + 1, to, text: lines.slice(from, to).join('\n')}
}

export interface PlannedEdit {
  changes: FileChange[]
  failures: BlockFailure[]
}

/** Matches every block against the current contents; writes nothing. `read` returns null for a missing file. */
export function planEdits(blocks: EditBlock[], read: (path: string) => string | null): PlannedEdit {
  const files = new Map<string, {before: string | null; lines: string[]; reverse: FileChange['reverse']}>()
  const failures: BlockFailure[] = []
  blocks.forEach((block, index) => {
    let file = files.get(block.path)
    if (!file) {
      const before = read(block.path)
      file = {before, lines: before === null ? [] : splitLines(before.replace(/\n$/, '')), reverse: []}
      files.set(block.path, file)
    }
    const search = splitLines(block.search)
    const replace = splitLines(block.replace)
    if (search.length === 0) {
      if (file.lines.length > 0 && file.before !== null && file.before.trim() !== '') {
        failures.push({block: index + 1, path: block.path, line: block.line, reason: 'an empty SEARCH creates a file, but this file exists and is not empty'})
        return
      }
      file.reverse.push({search: replace.join('\n'), replace: ''})
      file.lines = [...file.lines, ...replace]
      return
    }
    if (file.before === null && file.lines.length === 0) {
      failures.push({block: index + 1, path: block.path, line: block.line, reason: 'the file does not exist'})
      return
    }
    const match = find(file.lines, search, replace, 0)
    if (!match) {
      const near = nearest(file.lines, search)
      failures.push({
        block: index + 1,
        path: block.path,
        line: block.line,
        reason: 'the SEARCH text does not occur in the file',
        ...(near ? {nearest: near} : {}),
      })
      return
    }
    const old = file.lines.slice(match.start, match.end)
    file.lines = [...file.lines.slice(0, match.start), ...match.replacement, ...file.lines.slice(match.end)]
    file.reverse.unshift({search: match.replacement.join('\n'), replace: old.join('\n')})
  })
  const changes: FileChange[] = []
  for (const [path, file] of files) {
    const trailing = file.before === null || file.before.endsWith('\n') || file.before === '' ? '\n' : ''
    const after = file.lines.length === 0 ? '' : `${file.lines.join('\n')}${trailing}`
    if (after === file.before) continue
    changes.push({path, before: file.before, after, reverse: file.reverse})
  }
  return {changes, failures}
}

export interface LineDiff {
  /** Lines the change removes plus lines it adds, by a real line diff: what max_patch_lines bounds. */
  changed_lines: number
  /** A unified diff in git's format that `git apply` and `patch -p1` accept. */
  diff: string
}

/**
 * The real line diff of a change. A block whose SEARCH and REPLACE share most lines changes only
 * the lines that differ, so only those count. Past `limit` changed lines the diff stops early and
 * gives undefined, so that rewriting a large file costs no quadratic diff only to be refused.
 * `diff` is imported here, not at module top, so that commands that never edit do not load it.
 */
export async function lineDiff(change: FileChange, limit = Number.MAX_SAFE_INTEGER): Promise<LineDiff | undefined> {
  const {structuredPatch, formatPatch, FILE_HEADERS_ONLY} = await import('diff')
  const created = change.before === null
  const patch = structuredPatch(created ? '/dev/null' : `a/${change.path}`, `b/${change.path}`, change.before ?? '', change.after, undefined, undefined, {
    context: 3,
    maxEditLength: limit,
  })
  if (!patch) return undefined
  let changed = 0
  for (const hunk of patch.hunks) for (const line of hunk.lines) if (line.startsWith('+') || line.startsWith('-')) changed++
  const head = `diff --git a/${change.path} b/${change.path}\n${created ? 'new file mode 100644\n' : ''}`
  // An empty new file has no hunks; git writes it as the header alone.
  const body = patch.hunks.length > 0 ? formatPatch(patch, FILE_HEADERS_ONLY).replace(/\n*$/, '\n') : ''
  return {changed_lines: changed, diff: `${head}${body}`}
}
