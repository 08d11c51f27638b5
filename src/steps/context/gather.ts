/**
 * Repository context for a model (seed 000 CONTEXT_BUILDING, seed 004 READ_CONTEXT): the file tree,
 * the files chosen by glob or by a search, and recent history, inside the policy's forbidden_paths
 * and a byte budget. The text is a function of the repository's content and the step's settings
 * alone: paths relative to the root, everything in byte order, no clock, no absolute path, so the
 * same repository in another folder gives the same bytes (and the same model request key).
 */
import {lstatSync, readFileSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../../errors.js'
import {globMatches} from '../../policy/glob.js'
import type {LoadedPolicy} from '../../policy/policy.js'
import {checkPath} from '../../policy/rules.js'
import {sha256} from '../../util/hash.js'
import {compareText} from '../../util/order.js'
import {redact} from '../../util/redact.js'
import {gitEnv, SAFE_GIT_CONFIG} from '../../vcs/git.js'
import {childProcess} from '../../util/fs-async.js'

/** How pipe estimates tokens everywhere (an agent's max_context_bytes: 200000 bytes, about 50k tokens). */
export const BYTES_PER_TOKEN = 4

export function estimateTokens(bytes: number): number {
  return Math.ceil(bytes / BYTES_PER_TOKEN)
}

export interface ContextSettings {
  tree: boolean
  maxTreeFiles: number
  files: readonly string[]
  search: readonly string[]
  maxFiles: number
  maxFileBytes: number
  history: number
  /** The whole text's budget in bytes (the smaller of max_bytes and max_tokens × 4). */
  budget: number
}

export const CONTEXT_DEFAULTS = {maxTreeFiles: 500, maxFiles: 50, maxFileBytes: 8000, history: 10, maxBytes: 32000}

export interface ContextFile {
  path: string
  bytes: number
  sha256: string
  shown_bytes: number
  cut: 'none' | 'truncated' | 'omitted'
  why?: string
  redacted?: boolean
}

export interface ContextBundle {
  text: string
  hash: string
  bytes: number
  tokens: number
  budget_bytes: number
  tree: {total: number; listed: number}
  files: ContextFile[]
  history: {commits: number; shown: number}
  cut: string[]
}

/** Most bytes of a file read to hash it; a bigger file is listed as too large and not read. */
const MAX_READ_BYTES = 8 * 1024 * 1024

export interface GitPlace {
  root: string
  /** The .git the run found when it started (RunRecord.workspace_git). */
  dotGit: string | null | undefined
  signal: AbortSignal
}

/** Runs one read-only git command in the run's repository: no shell, no hook, no program from config, no pager. */
function git(place: GitPlace, args: readonly string[]): Promise<string> {
  const pinned = typeof place.dotGit === 'string' ? {gitDir: place.dotGit, workTree: path.dirname(place.dotGit)} : null
  const argv = [...SAFE_GIT_CONFIG.flatMap((c) => ['-c', c]), ...args]
  return new Promise((resolve, reject) => {
    childProcess().execFile(
      'git',
      argv,
      {cwd: place.root, env: gitEnv(pinned), maxBuffer: 64 * 1024 * 1024, timeout: 60_000, signal: place.signal, encoding: 'utf8'},
      (error, stdout, stderr) => {
        // git grep exits 1 when nothing matched.
        if (error && !(args[0] === 'grep' && (error as {code?: unknown}).code === 1)) {
          reject(
            new PipeError('E_IO', `git ${args[0]} failed while gathering context: ${redact(String(stderr || error.message).trim()).slice(0, 500)}`, {
              hint: 'Run the same git command in the repository to see why.',
            }),
          )
          return
        }
        resolve(stdout)
      },
    )
  })
}

/** The files of the repository a step may see: tracked and untracked but not ignored, minus what the policy forbids, in byte order. */
async function treeOf(place: GitPlace, policy: LoadedPolicy): Promise<string[]> {
  const out = await git(place, ['ls-files', '-z', '--cached', '--others', '--exclude-standard', '--full-name', '--', '.'])
  const prefix = (await git(place, ['rev-parse', '--show-prefix'])).trim()
  const seen = new Set<string>()
  for (const name of out.split('\0')) {
    if (name === '') continue
    // --full-name keeps one form whatever the working directory; the step sees paths relative to the root.
    if (prefix !== '' && !name.startsWith(prefix)) continue
    const relative = name.slice(prefix.length)
    if (!checkPath(policy, place.root, relative).allowed) continue
    const info = lstatSync(path.join(place.root, relative), {throwIfNoEntry: false})
    if (!info || !(info.isFile() || info.isSymbolicLink())) continue
    seen.add(relative)
  }
  return [...seen].sort(compareText)
}

/** The files (of `tree`) that contain one of the literal strings. */
async function searched(place: GitPlace, tree: readonly string[], patterns: readonly string[]): Promise<string[]> {
  if (patterns.length === 0) return []
  const args = ['grep', '-l', '-z', '-I', '-F', '--untracked', '--no-textconv', '--no-color', ...patterns.flatMap((p) => ['-e', p]), '--', '.']
  const allowed = new Set(tree)
  return (await git(place, args))
    .split('\0')
    .filter((f) => f !== '' && allowed.has(f))
    .sort(compareText)
}

interface Commit {
  line: string
  files: string[]
}

/** The latest commits, newest first: short hash and subject, and the files each changed (those the policy lets the model see). */
async function historyOf(place: GitPlace, policy: LoadedPolicy, count: number): Promise<Commit[]> {
  if (count === 0) return []
  const head = await git(place, ['rev-parse', '--verify', '--quiet', 'HEAD']).catch(() => '')
  if (head.trim() === '') return []
  // -z: each path as it is. Without it git C-quotes a path with a tab, a newline or a non-ASCII
  // letter ("cl\303\251.pem"), which no forbidden_paths glob then matches, so its name would be shown.
  const out = await git(place, [
    'log',
    `-n${count}`,
    '--no-color',
    '--no-ext-diff',
    '--no-textconv',
    '--no-renames',
    '--relative',
    '--numstat',
    '-z',
    '--format=%x1e%h %s',
    'HEAD',
    '--',
  ])
  const commits: Array<{line: string; files: string[]}> = []
  for (const raw of out.split('\0')) {
    const token = raw.replace(/^\n/, '')
    if (token.startsWith('\x1e')) {
      commits.push({line: token.slice(1).trim(), files: []})
      continue
    }
    const stat = /^(\d+|-)\t(\d+|-)\t([\s\S]+)$/.exec(token)
    const commit = commits.at(-1)
    if (!stat || !commit || !checkPath(policy, place.root, stat[3]!).allowed) continue
    const [, added, removed, file] = stat
    commit.files.push(added === '-' ? `${shownPath(file!)} (binary)` : `${shownPath(file!)} +${added} -${removed}`)
  }
  return commits.map((c) => ({line: redact(c.line), files: c.files}))
}

/** A path as the text shows it: as it is, or JSON-quoted when it holds a control character, so a file name cannot add lines of its own to the text. */
function shownPath(file: string): string {
  return [...file].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f) ? JSON.stringify(file) : file
}

/** The head of `bytes` that fits `limit` bytes, cut at a line end when there is one, never inside a UTF-8 character. */
function headOf(bytes: Buffer, limit: number): Buffer {
  if (bytes.length <= limit) return bytes
  let end = limit
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--
  const newline = bytes.lastIndexOf(0x0a, end - 1)
  return bytes.subarray(0, newline > limit / 2 ? newline + 1 : end)
}

/** A code fence longer than any run of backticks in the text, so a file cannot close it. */
function fence(text: string): string {
  const longest = Math.max(2, ...[...text.matchAll(/`+/g)].map((m) => m[0].length))
  return '`'.repeat(longest + 1)
}

interface Candidate {
  path: string
  why: string
}

interface Shown {
  file: ContextFile
  /** The block that shows it; empty when it cannot be shown at all. */
  block: string
  /** Why it cannot be shown at all (gone, binary, too large). */
  unshowable?: string
}

/** Reads one chosen file: its size and sha256 as found, and the block that shows its head within `limit` bytes. */
function show(root: string, candidate: Candidate, limit: number): Shown {
  const full = path.join(root, candidate.path)
  const info = lstatSync(full, {throwIfNoEntry: false})
  const base = {path: candidate.path, why: candidate.why, shown_bytes: 0, cut: 'omitted' as const}
  if (!info || !info.isFile()) return {file: {...base, bytes: 0, sha256: ''}, block: '', unshowable: 'not a regular file'}
  if (info.size > MAX_READ_BYTES) return {file: {...base, bytes: info.size, sha256: ''}, block: '', unshowable: 'larger than 8 MiB'}
  const bytes = readFileSync(full)
  const hash = sha256(bytes)
  if (bytes.includes(0)) return {file: {...base, bytes: bytes.length, sha256: hash}, block: '', unshowable: 'binary'}
  const head = headOf(bytes, Math.max(0, limit))
  const raw = head.toString('utf8')
  const text = redact(raw)
  const cut = head.length < bytes.length
  const mark = fence(text)
  const title = `### ${shownPath(candidate.path)} (${bytes.length} bytes${cut ? `, the first ${head.length} shown` : ''})`
  const block = `${title}\n${mark}\n${text}${text.endsWith('\n') || text === '' ? '' : '\n'}${mark}\n\n`
  return {
    file: {...base, bytes: bytes.length, sha256: hash, shown_bytes: head.length, cut: cut ? 'truncated' : 'none', ...(text !== raw ? {redacted: true} : {})},
    block,
  }
}

const size = (text: string): number => Buffer.byteLength(text)

/** The files whose content is shown: those the globs choose, then those the search found, each once, in byte order within each. */
function candidates(tree: readonly string[], globs: readonly string[], found: readonly string[]): Candidate[] {
  const out = new Map<string, Candidate>()
  for (const file of tree) {
    const glob = globs.find((g) => globMatches(g, file))
    if (glob !== undefined) out.set(file, {path: file, why: `matches ${glob}`})
  }
  for (const file of found) if (!out.has(file)) out.set(file, {path: file, why: 'contains a searched string'})
  return [...out.values()]
}

/**
 * Gathers the context and fits it to the budget. What gives way, in order: files beyond max_files;
 * the history's oldest commits; the files' tails (the last shown file is cut, later ones omitted);
 * the tree's last paths. Each cut is named in the text's last section, so the model (and an audit)
 * knows what it was not shown.
 */
export async function gatherContext(place: GitPlace, policy: LoadedPolicy, settings: ContextSettings): Promise<ContextBundle> {
  if (place.dotGit === null) {
    throw new PipeError('E_STATE', `${place.root} is not inside a git repository, so there is no repository context to gather`, {
      hint: `Run git init in the folder (git add is not needed: untracked files are listed too), or remove the context step.`,
    })
  }
  const all = await treeOf(place, policy)
  const found = await searched(place, all, settings.search)
  const chosen = candidates(all, settings.files, found)
  const commits = await historyOf(place, policy, settings.history)
  const cut: string[] = []
  const budget = settings.budget

  // The tree: at most max_tree_files paths, and at most half the budget, so files still fit.
  const treeLines = settings.tree ? all.slice(0, settings.maxTreeFiles) : []
  let treeBytes = 0
  let listed = 0
  for (const line of treeLines) {
    if (treeBytes + size(shownPath(line)) + 1 > budget / 2) break
    treeBytes += size(shownPath(line)) + 1
    listed++
  }
  if (settings.tree && listed < all.length) cut.push(`tree: ${all.length - listed} of ${all.length} paths not listed (the last in byte order)`)
  const treeSection = settings.tree
    ? `## Files (${all.length} in the repository${listed < all.length ? `, the first ${listed} listed` : ''})\n${all.slice(0, listed).map(shownPath).join('\n')}${listed > 0 ? '\n' : ''}\n`
    : ''

  // The history: newest first, as many whole commits as fit a quarter of the budget.
  let historySection = ''
  let shownCommits = 0
  if (settings.history > 0) {
    const blocks = commits.map((c) => `${c.line}\n${c.files.map((f) => `  ${f}\n`).join('')}`)
    let used = 0
    for (const block of blocks) {
      if (used + size(block) > budget / 4) break
      used += size(block)
      shownCommits++
    }
    if (shownCommits < commits.length) cut.push(`history: ${commits.length - shownCommits} older commit(s) of the ${commits.length} asked for not shown`)
    historySection =
      commits.length === 0
        ? '## Recent history\nno commits yet\n\n'
        : `## Recent history (the latest ${shownCommits} commit(s), newest first)\n${blocks.slice(0, shownCommits).join('')}\n`
  }

  const header = `# Repository context\n\n`
  const shownFiles = chosen.slice(0, settings.maxFiles)
  const overMax = chosen.slice(settings.maxFiles)
  const files: ContextFile[] = []
  const blocks: Array<{index: number; block: string}> = []
  const fileCuts: string[] = []
  const notShown = (file: ContextFile, why: string): string => `${shownPath(file.path)}: not shown (${why})`
  const filesTitle = settings.files.length + settings.search.length > 0 ? '## Shown files\n' : ''
  // Room kept for the notes of the files still to come, so the whole text stays within the budget.
  const noteRoom = (from: number): number => shownFiles.slice(from).reduce((sum, c) => sum + size(shownPath(c.path)) + 80, 0)
  let used =
    size(header) + size(treeSection) + size(historySection) + size(filesTitle) + size(`## Cut to fit the budget\n${cut.map((c) => `- ${c}\n`).join('')}`)
  used += overMax.reduce((sum, c) => sum + size(shownPath(c.path)) + 80, 0)
  shownFiles.forEach((candidate, i) => {
    const room = budget - used - noteRoom(i + 1)
    // 200 bytes for the file's title and fences.
    const limit = Math.min(settings.maxFileBytes, room - 200 - size(shownPath(candidate.path)))
    const shown = show(place.root, candidate, limit)
    if (shown.unshowable) {
      files.push(shown.file)
      fileCuts.push(notShown(shown.file, shown.unshowable))
    } else if (limit < 64 || size(shown.block) > room) {
      const {redacted: _redacted, ...file} = shown.file
      files.push({...file, shown_bytes: 0, cut: 'omitted'})
      fileCuts.push(notShown(shown.file, `${shown.file.bytes} bytes; over the budget of ${budget} bytes`))
    } else {
      files.push(shown.file)
      blocks.push({index: i, block: shown.block})
      used += size(shown.block)
      if (shown.file.cut === 'truncated')
        fileCuts.push(
          `${shownPath(candidate.path)}: the first ${shown.file.shown_bytes} of ${shown.file.bytes} bytes shown (${limit === settings.maxFileBytes ? 'max_file_bytes' : 'the budget'})`,
        )
    }
    used += size(fileCuts.at(-1) ?? '') + 3
  })
  for (const c of overMax) files.push({path: c.path, why: c.why, bytes: 0, sha256: '', shown_bytes: 0, cut: 'omitted'})
  if (overMax.length > 0)
    fileCuts.push(
      `files: ${overMax.length} chosen file(s) beyond max_files (${settings.maxFiles}) not shown: ${overMax.map((c) => shownPath(c.path)).join(', ')}`,
    )
  const assemble = (): string => {
    const notes = [...cut, ...fileCuts]
    const filesSection = filesTitle === '' ? '' : `${filesTitle}${blocks.map((b) => b.block).join('')}`
    return `${header}${treeSection}${historySection}${filesSection}## Cut to fit the budget\n${notes.length === 0 ? 'nothing\n' : notes.map((c) => `- ${c}\n`).join('')}`
  }
  let text = assemble()
  // Should the notes have taken more than their room: the last shown file gives way, as often as needed.
  while (size(text) > budget && blocks.length > 0) {
    const last = blocks.pop()!
    const file = files[last.index]!
    const {redacted: _redacted, ...kept} = file
    files[last.index] = {...kept, shown_bytes: 0, cut: 'omitted'}
    fileCuts.push(notShown(file, `${file.bytes} bytes; over the budget of ${budget} bytes`))
    text = assemble()
  }
  if (size(text) > budget) {
    throw new PipeError('E_CONFIG', `the repository context needs more than its budget of ${budget} bytes even without any file's content`, {
      hint: 'Raise max_bytes (or max_tokens) of the context step, or lower max_tree_files, history or max_files.',
    })
  }
  const bytes = size(text)
  return {
    text,
    hash: sha256(text),
    bytes,
    tokens: estimateTokens(bytes),
    budget_bytes: budget,
    tree: {total: all.length, listed},
    files,
    history: {commits: commits.length, shown: shownCommits},
    cut: [...cut, ...fileCuts],
  }
}
