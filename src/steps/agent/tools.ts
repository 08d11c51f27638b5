/**
 * The tools an agent step offers its model (seed 003): each with a JSON Schema for its arguments,
 * checked before it runs, and one for its result. Every path is confined to the repository root
 * (the run's working directory) by the policy's checks (sandbox, symlinks, forbidden_paths), and
 * every command goes through allowed_commands and the sandbox: the model touches files and
 * processes through these and nothing else.
 */
import {existsSync, lstatSync, readdirSync, realpathSync, statSync, type Stats} from 'node:fs'
import {open} from '../../util/fs-async.js'
import {createRequire} from 'node:module'
import {StringDecoder} from 'node:string_decoder'
import path from 'node:path'
import {compileOutputSchema, type OutputSchema} from '../../config/output-schema.js'
import {applyEditText, EditFailed, revertEdit, type EditResult} from '../../edit/workspace.js'
import {PipeError} from '../../errors.js'
import {runCommand, type CommandResult} from '../../policy/exec.js'
import type {LoadedPolicy} from '../../policy/policy.js'
import {parseBlocks} from '../../edit/blocks.js'
import {globMatches, ignoresCase} from '../../policy/glob.js'
import {assertPath, checkCommand, checkPath} from '../../policy/rules.js'
import {splitCommandLine, type Segment} from '../../policy/shell-line.js'
import {redact} from '../../util/redact.js'
import {stableText} from '../../util/stable-text.js'

export interface ToolPlace {
  policy: LoadedPolicy
  /** The repository root: the run's working directory. */
  root: string
  signal: AbortSignal
  slotsDir: string
  /** The files the step's edits may change (its task's files_touched and forbidden_paths); absent: any the policy allows. */
  edits?: EditScope
}

/** Paths or globs relative to the repository root (a glob that matches a directory covers what is under it). */
export interface EditScope {
  /** Only these may be changed or created; absent: any. */
  files_touched?: readonly string[]
  /** Never these, even inside files_touched. */
  forbidden_paths?: readonly string[]
}

export interface ToolOutcome {
  /** Whether the tool did what was asked. */
  ok: boolean
  /** What the model gets back (matches the tool's result schema). */
  result: Record<string, unknown>
  /** One line for the snapshot and progress. */
  summary: string
  /** The policy refused it (a path outside the root, a command not allowed). */
  denied?: boolean
  files_changed?: string[]
  /** Unified diff of what it changed. */
  patch?: string
  /** For run_command: each segment's full result. */
  commands?: CommandResult[]
  /** For apply_edit_blocks: what undoes it. */
  edit?: EditResult
}

export interface AgentTool {
  name: string
  description: string
  parameters: Record<string, unknown>
  resultSchema: Record<string, unknown>
  /** Whether it changes the repository or the world (then the run's cache of safe results is dropped). */
  mutates: boolean
  run(args: Record<string, unknown>, place: ToolPlace): Promise<ToolOutcome>
}

const MAX_LIST = 500
const MAX_MATCHES = 100
const MAX_READ_BYTES = 64 * 1024
const MAX_SEARCH_FILE_BYTES = 1024 * 1024
const MAX_LINE_CHARS = 300

const errorResult = {type: 'object', required: ['error'], properties: {error: {type: 'string'}}}
function withError(schema: Record<string, unknown>): Record<string, unknown> {
  return {anyOf: [schema, errorResult]}
}

function denied(error: unknown): ToolOutcome | null {
  if (error instanceof PipeError && error.code === 'E_POLICY_DENIED') return {ok: false, denied: true, result: {error: redact(error.message)}, summary: `denied: ${redact(error.message)}`}
  return null
}

function failed(message: string): ToolOutcome {
  return {ok: false, result: {error: message}, summary: message}
}

/** Every file under `dir` (relative to root, forward slashes) that the policy lets the model see. */
function walk(place: ToolPlace, dir: string, out: string[], limit: number): boolean {
  const full = path.resolve(place.root, dir)
  let names: string[]
  try {
    names = readdirSync(full).sort()
  } catch {
    return true
  }
  for (const name of names) {
    const relative = dir === '.' ? name : `${dir}/${name}`
    if (!checkPath(place.policy, place.root, relative).allowed) continue
    // A link is not descended into (as ripgrep does not): a link to a directory above it would loop.
    const own = lstatSync(path.join(full, name), {throwIfNoEntry: false})
    let info: Stats | undefined
    try {
      info = own?.isSymbolicLink() ? statSync(path.join(full, name), {throwIfNoEntry: false}) : own
    } catch {
      info = undefined
    }
    if (!info) continue
    if (info.isDirectory() && own?.isSymbolicLink()) continue
    if (info.isDirectory()) {
      if (name === 'node_modules') continue
      if (!walk(place, relative, out, limit)) return false
    } else if (info.isFile()) {
      if (out.length >= limit) return false
      out.push(relative)
    }
  }
  return true
}

function directoryOf(place: ToolPlace, given: string | undefined): string {
  const verdict = assertPath(place.policy, place.root, given ?? '.')
  if (!existsSync(verdict.resolved) || !statSync(verdict.resolved).isDirectory()) throw new PipeError('E_INVALID_ARGS', `"${given ?? '.'}" is not a directory`)
  return verdict.relative === '' ? '.' : verdict.relative
}

const listDirectory: AgentTool = {
  name: 'list_directory',
  description: 'List the entries of a directory of the repository (names; directories end in /).',
  parameters: {type: 'object', additionalProperties: false, properties: {path: {type: 'string', description: 'Directory relative to the repository root; default "."'}}},
  resultSchema: withError({type: 'object', required: ['path', 'entries', 'truncated'], properties: {path: {type: 'string'}, entries: {type: 'array', items: {type: 'string'}}, truncated: {type: 'boolean'}}}),
  mutates: false,
  async run(args, place) {
    try {
      const dir = directoryOf(place, args['path'] as string | undefined)
      const full = path.resolve(place.root, dir)
      const entries: string[] = []
      for (const name of readdirSync(full).sort()) {
        const relative = dir === '.' ? name : `${dir}/${name}`
        if (!checkPath(place.policy, place.root, relative).allowed) continue
        entries.push(statSync(path.join(full, name), {throwIfNoEntry: false})?.isDirectory() ? `${name}/` : name)
      }
      const truncated = entries.length > MAX_LIST
      return {ok: true, result: {path: dir, entries: entries.slice(0, MAX_LIST), truncated}, summary: `${entries.length} entries in ${dir}`}
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}

const findFiles: AgentTool = {
  name: 'find_files',
  description: 'Find files of the repository whose path matches a glob (e.g. "src/**/*.ts"); node_modules and forbidden paths are skipped.',
  parameters: {type: 'object', additionalProperties: false, required: ['pattern'], properties: {pattern: {type: 'string', minLength: 1}, path: {type: 'string', description: 'Directory to search under; default "."'}}},
  resultSchema: withError({type: 'object', required: ['files', 'truncated'], properties: {files: {type: 'array', items: {type: 'string'}}, truncated: {type: 'boolean'}}}),
  mutates: false,
  async run(args, place) {
    try {
      const dir = directoryOf(place, args['path'] as string | undefined)
      const all: string[] = []
      const complete = walk(place, dir, all, 20000)
      // A glob is compiled to a regular expression, and one with groups can backtrack for hours: matched in the worker.
      const found = await inWorker<{files: string[]}>({...NO_SEARCH, find: true, glob: args['pattern'] as string, dir, files: all.map((file) => ({file, full: ''}))}, place.signal)
      if (typeof found === 'string') return failed(found)
      const {files} = found
      const truncated = files.length > MAX_LIST || !complete
      return {ok: true, result: {files: files.slice(0, MAX_LIST), truncated}, summary: `${files.length} file(s) match ${args['pattern'] as string}`}
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}

interface SearchJob {
  /** find_files: only the files matching glob (also relative to dir) are answered. */
  find: boolean
  glob: string | null
  dir: string
  query: string
  regex: boolean
  flags: string
  files: Array<{file: string; full: string}>
  maxMatches: number
  maxFileBytes: number
}

interface SearchFound {
  matches: Array<{file: string; n: number; line: string}>
  truncated: boolean
}

/**
 * The search, as the source of a worker thread (plain JavaScript, self-contained): the files'
 * lines tested against a literal or a regular expression, the first maxMatches answered.
 */
const SEARCH_WORKER = `
const {parentPort, workerData: job} = require('node:worker_threads')
const fs = require('node:fs')
const only = job.glob === null ? null : require(job.picomatch)(job.glob, {dot: true})
const inDir = (file) => (job.dir === '.' ? file : file.slice(job.dir.length + 1))
const chosen = job.files.filter(({file}) => !only || only(file) || (job.find && only(inDir(file))))
const re = job.regex ? new RegExp(job.query, job.flags) : null
const needle = job.flags ? job.query.toLowerCase() : job.query
const test = (line) => (re ? re.test(line) : (job.flags ? line.toLowerCase() : line).includes(needle))
const matches = []
let truncated = false
search: for (const {file, full} of job.find ? [] : chosen) {
  if (fs.statSync(full).size > job.maxFileBytes) continue
  const bytes = fs.readFileSync(full)
  if (bytes.includes(0)) continue
  const lines = bytes.toString('utf8').split('\\n')
  for (let i = 0; i < lines.length; i++) {
    if (!test(lines[i])) continue
    if (matches.length >= job.maxMatches) {
      truncated = true
      break search
    }
    matches.push({file, n: i + 1, line: lines[i]})
  }
}
parentPort.postMessage(job.find ? {files: chosen.map(({file}) => file)} : {matches, truncated})
`

/** Where the worker finds picomatch: resolved at the first search, not by every run that loads the step kinds. */
let picomatchPath: string | undefined
const NO_SEARCH = {query: '', regex: false, flags: '', maxMatches: 0, maxFileBytes: 0}

/** How long a search may take before it is ended (a regular expression that backtracks catastrophically); the tests shorten it. */
export const searchDeadline = {ms: 10_000}

/** The search (or find_files' matching) in a worker thread, ended at the deadline or on abort: the answer, or why there is none. */
async function inWorker<T>(job: SearchJob, signal: AbortSignal): Promise<T | string> {
  if (signal.aborted) return 'the search was stopped'
  const {Worker} = await import('node:worker_threads')
  const worker = new Worker(SEARCH_WORKER, {eval: true, workerData: {...job, picomatch: (picomatchPath ??= createRequire(import.meta.url).resolve('picomatch'))}})
  return new Promise((resolve) => {
    const finish = (value: T | string): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      void worker.terminate()
      resolve(value)
    }
    const what = job.find ? `matching the glob ${JSON.stringify(job.glob)}` : `the search for ${JSON.stringify(job.query)}`
    const advice = job.find || job.glob !== null ? ' (a glob with groups or a regular expression that backtracks catastrophically?); simplify it' : job.regex ? ' (the regular expression backtracks catastrophically?); simplify it, or search for a literal string' : ''
    const timer = setTimeout(() => finish(`${what} ran over ${searchDeadline.ms / 1000} s and was ended${advice}`), searchDeadline.ms)
    const onAbort = (): void => finish('the search was stopped')
    signal.addEventListener('abort', onAbort, {once: true})
    worker.once('message', (found: T) => finish(found))
    worker.once('error', (error) => finish(`the search failed: ${error.message}`))
  })
}

const searchText: AgentTool = {
  name: 'search_text',
  description: 'Search the text of the repository\'s files for a literal string (or a regular expression with regex: true); answers lines as path:line:text, like ripgrep, at most 100.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['query'],
    properties: {query: {type: 'string', minLength: 1}, regex: {type: 'boolean'}, path: {type: 'string'}, glob: {type: 'string', description: 'Only files whose path matches this glob'}, ignore_case: {type: 'boolean'}},
  },
  resultSchema: withError({type: 'object', required: ['matches', 'truncated'], properties: {matches: {type: 'array', items: {type: 'string'}}, truncated: {type: 'boolean'}}}),
  mutates: false,
  async run(args, place) {
    try {
      const dir = directoryOf(place, args['path'] as string | undefined)
      const query = args['query'] as string
      const regex = args['regex'] === true
      const flags = args['ignore_case'] === true ? 'i' : ''
      if (regex) {
        try {
          new RegExp(query, flags)
        } catch (error) {
          return failed(`invalid regular expression: ${(error as Error).message}`)
        }
      }
      const files: string[] = []
      walk(place, dir, files, 20000)
      const chosen = files.map((file) => ({file, full: path.resolve(place.root, file)}))
      const job: SearchJob = {find: false, glob: typeof args['glob'] === 'string' ? args['glob'] : null, dir, query, regex, flags, files: chosen, maxMatches: MAX_MATCHES, maxFileBytes: MAX_SEARCH_FILE_BYTES}
      // A regular expression (or a glob, compiled to one) can backtrack for hours on one line: the search runs in a worker ended at a deadline.
      const found = await inWorker<SearchFound>(job, place.signal)
      if (typeof found === 'string') return failed(found)
      const {truncated} = found
      // Redacted before it is cut, so a secret across the cut is not half shown.
      const matches = found.matches.map((m) => {
        const line = redact(m.line)
        return `${m.file}:${m.n}:${line.length > MAX_LINE_CHARS ? `${line.slice(0, MAX_LINE_CHARS)}…` : line}`
      })
      return {ok: true, result: {matches, truncated}, summary: `${matches.length}${truncated ? '+' : ''} match(es) for ${JSON.stringify(query)}`}
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}

/**
 * Lines start..end of a file as read_file shows them ("N: text", masked), at most MAX_READ_BYTES,
 * read in chunks: however big the file, or however long one line (a minified bundle), only what is
 * shown is held. A line longer than the whole budget is shown cut. 'binary' when it has a NUL byte.
 */
async function readLines(file: string, start: number, end: number | undefined): Promise<'binary' | {total: number; content: string; last: number; truncated: boolean}> {
  const handle = await open(file, 'r')
  const decoder = new StringDecoder('utf8')
  const buffer = Buffer.alloc(64 * 1024)
  // Enough of one line to fill the budget, with room for a secret across its end to be masked whole.
  const keep = MAX_READ_BYTES + 4096
  let total = 0
  let line = ''
  let lineStarted = false
  let content = ''
  let used = 0
  let last = start - 1
  let truncated = false
  const wanted = (n: number): boolean => n >= start && (end === undefined || n <= end)
  const show = (text: string, n: number): void => {
    if (truncated) return
    const next = `${n}: ${redact(text)}\n`
    const size = Buffer.byteLength(next)
    if (used + size <= MAX_READ_BYTES) {
      content += next
      used += size
      last = n
      return
    }
    if (used === 0) {
      // One line over the whole budget: its beginning, rather than nothing at all.
      content = `${Buffer.from(next).subarray(0, MAX_READ_BYTES - 64).toString('utf8').replace(/\uFFFD$/, '')}… [line cut]\n`
      last = n
    }
    truncated = true
  }
  try {
    for (;;) {
      const {bytesRead} = await handle.read(buffer, 0, buffer.length, null)
      if (bytesRead === 0) break
      const chunk = buffer.subarray(0, bytesRead)
      if (chunk.includes(0)) return 'binary'
      const text = decoder.write(chunk)
      let from = 0
      for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', from)) {
        total++
        if (wanted(total) && !truncated) show(line + text.slice(from, i), total)
        line = ''
        lineStarted = false
        from = i + 1
      }
      if (from < text.length) {
        lineStarted = true
        if (wanted(total + 1) && !truncated && line.length < keep) line += text.slice(from, from + keep - line.length)
      }
    }
    const rest = decoder.end()
    if (lineStarted || rest !== '' || total === 0) {
      total++
      if (wanted(total) && !truncated) show(line + rest, total)
    }
  } finally {
    await handle.close()
  }
  return {total, content, last, truncated}
}

const readFileTool: AgentTool = {
  name: 'read_file',
  description: 'Read a text file of the repository, optionally lines start_line..end_line (1-based, inclusive); at most 64 KiB per call. Lines come numbered as "N: text".',
  parameters: {type: 'object', additionalProperties: false, required: ['path'], properties: {path: {type: 'string', minLength: 1}, start_line: {type: 'integer', minimum: 1}, end_line: {type: 'integer', minimum: 1}}},
  resultSchema: withError({
    type: 'object',
    required: ['path', 'start_line', 'end_line', 'total_lines', 'content', 'truncated'],
    properties: {path: {type: 'string'}, start_line: {type: 'integer'}, end_line: {type: 'integer'}, total_lines: {type: 'integer'}, content: {type: 'string'}, truncated: {type: 'boolean'}},
  }),
  mutates: false,
  async run(args, place) {
    try {
      const given = args['path'] as string
      const verdict = assertPath(place.policy, place.root, given)
      const info = statSync(verdict.resolved, {throwIfNoEntry: false})
      if (!info) return failed(`${given} does not exist`)
      if (!info.isFile()) return failed(`${given} is not a regular file`)
      const start = (args['start_line'] as number | undefined) ?? 1
      const read = await readLines(verdict.resolved, start, args['end_line'] as number | undefined)
      if (read === 'binary') return failed(`${given} is binary`)
      const {total, content, last, truncated} = read
      if (start > Math.max(total, 1)) return failed(`${given} has ${total} line(s); start_line ${start} is past its end`)
      return {ok: true, result: {path: verdict.relative, start_line: start, end_line: last, total_lines: total, content, truncated}, summary: `read ${verdict.relative} lines ${start}-${last} of ${total}`}
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}

/**
 * Runs the policy's syntax checker for each changed file that has one; the first failure's output,
 * or null. A checker that cannot start at all (the allow-list refuses it, the policy requires a
 * sandbox that is missing) gives the error that stopped it.
 */
async function syntaxCheck(files: string[], place: ToolPlace): Promise<{file: string; argv: string[]; output: string; unstarted?: PipeError} | null> {
  const checks = place.policy.policy.syntax_checks ?? {}
  for (const file of files) {
    const pattern = checks[path.extname(file)]
    if (!pattern) continue
    const argv = pattern.map((a) => (a === '{path}' ? file : a))
    let result: CommandResult
    try {
      result = await runCommand(place.policy, place.root, {argv, signal: place.signal, slotsDir: place.slotsDir})
    } catch (error) {
      const unstarted = error instanceof PipeError ? error : new PipeError('E_IO', `could not run ${JSON.stringify(argv)}: ${(error as Error).message}`)
      return {file, argv, output: unstarted.message, unstarted}
    }
    if (result.exit_code !== 0) {
      const output = `${result.stdout.head}${result.stdout.tail}${result.stderr.head}${result.stderr.tail}`.slice(-4000)
      return {file, argv, output: result.spawn_error ?? (result.timed_out ? 'the checker timed out' : output)}
    }
  }
  return null
}

/**
 * Why the blocks may not be applied under the step's edit scope (the first file outside it), or
 * null. Paths are judged as the edit would write them: resolved inside the root, links followed.
 */
function outsideScope(blocks: string, place: ToolPlace): string | null {
  const scope = place.edits
  if (!scope || (scope.files_touched === undefined && scope.forbidden_paths === undefined)) return null
  let paths: string[]
  try {
    paths = [...new Set(parseBlocks(blocks).map((b) => b.path))]
  } catch {
    // Malformed blocks: the edit itself says what is wrong with them.
    return null
  }
  for (const given of paths) {
    const {relative} = assertPath(place.policy, place.root, given)
    const shown = relative === given ? given : `${given} (${relative})`
    // A forbidden path errs towards refusing (case folded where the file system folds it); an allowed one must match as written.
    const nocase = ignoresCase(realRootOf(place.root))
    const forbidden = (scope.forbidden_paths ?? []).find((glob) => globMatches(glob, relative, {nocase}))
    if (forbidden !== undefined) return `this task may not change ${shown}: it matches "${forbidden}" in the task's constraints.forbidden_paths; nothing was applied`
    const allowed = scope.files_touched
    if (allowed !== undefined && !allowed.some((glob) => globMatches(glob, relative))) {
      const list = allowed.length === 0 ? 'no file' : allowed.join(', ')
      return `this task may change only ${list} (its files_touched), not ${shown}; nothing was applied. Change the files the task allows, or give up and say why the task needs ${relative}`
    }
  }
  return null
}

function realRootOf(root: string): string {
  try {
    return realpathSync(root)
  } catch {
    return root
  }
}

const applyEditBlocks: AgentTool = {
  name: 'apply_edit_blocks',
  description: [
    'Edit files of the repository with SEARCH/REPLACE blocks, all or none. Each block is: the file path on its own line, then',
    '<<<<<<< SEARCH',
    'the exact lines to find',
    '=======',
    'the lines to put instead',
    '>>>>>>> REPLACE',
    'An empty SEARCH creates a new file. On a failed match you get the nearest lines the file really has; a configured syntax checker that fails rolls the edit back.',
  ].join('\n'),
  parameters: {type: 'object', additionalProperties: false, required: ['blocks'], properties: {blocks: {type: 'string', minLength: 1, description: 'One or more SEARCH/REPLACE blocks'}}},
  resultSchema: withError({
    type: 'object',
    required: ['applied'],
    properties: {applied: {type: 'boolean'}, files: {type: 'array', items: {type: 'object'}}, changed_lines: {type: 'integer'}, failures: {type: 'array'}, syntax_check: {type: 'object'}, rolled_back: {type: 'boolean'}},
  }),
  mutates: true,
  async run(args, place) {
    let edit: EditResult
    try {
      const outside = outsideScope(args['blocks'] as string, place)
      if (outside !== null) return {ok: false, denied: true, result: {error: outside}, summary: `refused: ${outside}`}
      edit = await applyEditText(place.policy, place.root, args['blocks'] as string)
    } catch (error) {
      if (error instanceof EditFailed) {
        return {ok: false, result: {applied: false, failures: error.failures}, summary: `no block applied: ${error.failures.map((f) => `block ${f.block} (${f.path}): ${f.reason}`).join('; ')}`}
      }
      return denied(error) ?? failed((error as Error).message)
    }
    const files = edit.files.map((f) => f.path)
    const bad = await syntaxCheck(files, place)
    if (bad?.unstarted) {
      // Nothing vouched for the edit: it does not stay on disk. A configuration the model cannot
      // change (the allow-list, the sandbox) fails the step rather than every later edit.
      const cause = bad.unstarted
      const check = {file: bad.file, argv: bad.argv, started: false, error: redact(cause.message)}
      let undone: Awaited<ReturnType<typeof revertEdit>>
      try {
        undone = await revertEdit(place.policy, place.root, edit.files)
      } catch (error) {
        throw new PipeError('E_CONFLICT', `the syntax check ${JSON.stringify(bad.argv)} of ${bad.file} could not start (${redact(cause.message)}), and the unchecked edit could not be rolled back: ${(error as Error).message}`, {
          hint: `Restore ${files.join(', ')} by hand or with git; the snapshot's details hold the diff.`,
          details: {rule: 'syntax_checks', syntax_check: check, left_on_disk: files, patch: edit.files.map((f) => f.diff).join('')},
        })
      }
      throw new PipeError(cause.code, `the syntax check ${JSON.stringify(bad.argv)} of ${bad.file} could not start: ${redact(cause.message)}; the unchecked edit was rolled back (${undone.map((u) => `${u.path} ${u.restored}`).join(', ')})`, {
        hint: `${cause.hint ? `${cause.hint} ` : ''}Every syntax_checks entry must be a command the policy lets run (pipe policy check says which is not).`,
        details: {rule: 'syntax_checks', syntax_check: check, rolled_back: undone},
      })
    }
    if (bad) {
      await revertEdit(place.policy, place.root, edit.files)
      return {
        ok: false,
        result: {applied: false, rolled_back: true, syntax_check: {file: bad.file, argv: bad.argv, output: redact(bad.output)}},
        summary: `the syntax check ${bad.argv.join(' ')} failed on ${bad.file}; the edit was rolled back`,
      }
    }
    return {
      ok: true,
      result: {applied: true, changed_lines: edit.changed_lines, files: edit.files.map((f) => ({path: f.path, created: f.created, changed_lines: f.changed_lines}))},
      summary: `edited ${files.join(', ')} (${edit.changed_lines} line(s))`,
      files_changed: files,
      patch: edit.files.map((f) => f.diff).join(''),
      edit,
    }
  },
}

/** The argv segments of a run_command call, or why it cannot run (nothing runs unless every segment is allowed). */
export function commandSegments(args: Record<string, unknown>, place: Pick<ToolPlace, 'policy' | 'root'>): {ok: true; segments: Segment[]} | {ok: false; error: string; denied: boolean} {
  const split = splitCommandLine(args['command'] as string)
  if (!split.ok) return {ok: false, error: split.error, denied: false}
  for (const [i, segment] of split.segments.entries()) {
    if (segment.after === '|') return {ok: false, error: `pipes (|) are not run: run_command runs each command on its own; run ${JSON.stringify(segment.argv)} separately`, denied: false}
    const verdict = checkCommand(place.policy, segment.argv, {root: place.root})
    if (!verdict.allowed) return {ok: false, error: `segment ${i + 1} ${JSON.stringify(segment.argv)} is not allowed (${verdict.rule}): ${verdict.reason}; nothing was run`, denied: true}
  }
  return {ok: true, segments: split.segments}
}

function tail(stream: CommandResult['stdout']): string {
  const text = stream.omitted_bytes > 0 ? `${stream.head}\n[… ${stream.omitted_bytes} bytes omitted …]\n${stream.tail}` : stream.head + stream.tail
  return text.length > 8000 ? `[…]${text.slice(-8000)}` : text
}

const runCommandTool: AgentTool = {
  name: 'run_command',
  description: 'Run a command in the repository root, without a shell: argv words, quotes honoured, segments joined by && || ; (each must be allowed by the policy); no variables, globs, redirections or pipes. Answers each segment\'s exit code and output.',
  parameters: {type: 'object', additionalProperties: false, required: ['command'], properties: {command: {type: 'string', minLength: 1, maxLength: 4000}}},
  resultSchema: withError({
    type: 'object',
    required: ['segments'],
    properties: {segments: {type: 'array', items: {type: 'object', required: ['argv', 'ran'], properties: {argv: {type: 'array'}, ran: {type: 'boolean'}, exit_code: {type: ['integer', 'null']}, stdout: {type: 'string'}, stderr: {type: 'string'}, timed_out: {type: 'boolean'}}}}, exit_code: {type: ['integer', 'null']}},
  }),
  mutates: true,
  async run(args, place) {
    const planned = commandSegments(args, place)
    if (!planned.ok) return {ok: false, ...(planned.denied ? {denied: true} : {}), result: {error: planned.error}, summary: planned.error}
    const out: Array<Record<string, unknown>> = []
    const commands: CommandResult[] = []
    let last: number | null = 0
    for (const segment of planned.segments) {
      const run = segment.after === undefined || segment.after === ';' || (segment.after === '&&' ? last === 0 : last !== 0)
      if (!run) {
        out.push({argv: segment.argv, ran: false})
        continue
      }
      try {
        const result = await runCommand(place.policy, place.root, {argv: segment.argv, signal: place.signal, slotsDir: place.slotsDir})
        commands.push(result)
        last = result.exit_code
        // What the model reads is stable (no folder, timing or clock: a recorded conversation replays anywhere); `commands` keeps the raw output.
        out.push({argv: segment.argv, ran: true, exit_code: result.exit_code, stdout: stableText(tail(result.stdout), place.root), stderr: stableText(result.spawn_error ?? tail(result.stderr), place.root), ...(result.timed_out ? {timed_out: true} : {})})
      } catch (error) {
        return denied(error) ?? failed((error as Error).message)
      }
    }
    const ran = out.filter((s) => s.ran === true)
    return {
      ok: last === 0,
      result: {segments: out, exit_code: last},
      summary: `${ran.map((s) => (s.argv as string[]).join(' ')).join(' ; ')} exited ${last ?? 'by a signal'}`,
      commands,
    }
  },
}

export const TOOLS: readonly AgentTool[] = [listDirectory, findFiles, searchText, readFileTool, applyEditBlocks, runCommandTool]
export const TOOL_NAMES: readonly string[] = TOOLS.map((t) => t.name)

export function toolNamed(name: string): AgentTool | undefined {
  return TOOLS.find((t) => t.name === name)
}

const argumentCheckers = new Map<string, OutputSchema>()

/**
 * The problems of a call's arguments in one line, or null when they match the tool's schema.
 * Each schema is compiled once per process.
 */
export function argumentProblems(tool: AgentTool, args: unknown): string | null {
  let checker = argumentCheckers.get(tool.name)
  if (!checker) {
    const compiled = compileOutputSchema(tool.parameters)
    if (typeof compiled === 'string') throw new PipeError('E_INTERNAL', `the argument schema of ${tool.name} ${compiled}`)
    checker = compiled
    argumentCheckers.set(tool.name, checker)
  }
  return checker.check(args)
}

const resultCheckers = new Map<string, OutputSchema>()

/** The problems of a tool's result against its result schema, or null. */
export function resultProblems(tool: AgentTool, result: unknown): string | null {
  let checker = resultCheckers.get(tool.name)
  if (!checker) {
    const compiled = compileOutputSchema({type: 'object', ...tool.resultSchema})
    if (typeof compiled === 'string') throw new PipeError('E_INTERNAL', `the result schema of ${tool.name} ${compiled}`)
    checker = compiled
    resultCheckers.set(tool.name, checker)
  }
  return checker.check(result)
}
