/**
 * find_files and search_text: file paths matched by a glob, and lines matched by a literal or a
 * regular expression, both in a worker thread ended at a deadline (a glob or an expression can
 * backtrack for hours on one line).
 */
import {createRequire} from 'node:module'
import path from 'node:path'
import {redact} from '../../../util/redact.js'
import {denied, directoryOf, failed, MAX_LIST, walk, withError, type AgentTool} from './tool.js'

const MAX_MATCHES = 100
const MAX_SEARCH_FILE_BYTES = 1024 * 1024
const MAX_LINE_CHARS = 300

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
  const worker = new Worker(SEARCH_WORKER, {
    eval: true,
    workerData: {...job, picomatch: (picomatchPath ??= createRequire(import.meta.url).resolve('picomatch'))},
  })
  return new Promise((resolve) => {
    const finish = (value: T | string): void => {
      clearTimeout(timer)
      signal.removeEventListener('abort', onAbort)
      void worker.terminate()
      resolve(value)
    }
    const what = job.find ? `matching the glob ${JSON.stringify(job.glob)}` : `the search for ${JSON.stringify(job.query)}`
    const advice =
      job.find || job.glob !== null
        ? ' (a glob with groups or a regular expression that backtracks catastrophically?); simplify it'
        : job.regex
          ? ' (the regular expression backtracks catastrophically?); simplify it, or search for a literal string'
          : ''
    const timer = setTimeout(() => finish(`${what} ran over ${searchDeadline.ms / 1000} s and was ended${advice}`), searchDeadline.ms)
    const onAbort = (): void => finish('the search was stopped')
    signal.addEventListener('abort', onAbort, {once: true})
    worker.once('message', (found: T) => finish(found))
    worker.once('error', (error) => finish(`the search failed: ${error.message}`))
  })
}

export const searchText: AgentTool = {
  name: 'search_text',
  description:
    "Search the text of the repository's files for a literal string (or a regular expression with regex: true); answers lines as path:line:text, like ripgrep, at most 100.",
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['query'],
    properties: {
      query: {type: 'string', minLength: 1},
      regex: {type: 'boolean'},
      path: {type: 'string'},
      glob: {type: 'string', description: 'Only files whose path matches this glob'},
      ignore_case: {type: 'boolean'},
    },
  },
  resultSchema: withError({
    type: 'object',
    required: ['matches', 'truncated'],
    properties: {matches: {type: 'array', items: {type: 'string'}}, truncated: {type: 'boolean'}},
  }),
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
      const job: SearchJob = {
        find: false,
        glob: typeof args['glob'] === 'string' ? args['glob'] : null,
        dir,
        query,
        regex,
        flags,
        files: chosen,
        maxMatches: MAX_MATCHES,
        maxFileBytes: MAX_SEARCH_FILE_BYTES,
      }
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

export const findFiles: AgentTool = {
  name: 'find_files',
  description: 'Find files of the repository whose path matches a glob (e.g. "src/**/*.ts"); node_modules and forbidden paths are skipped.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['pattern'],
    properties: {pattern: {type: 'string', minLength: 1}, path: {type: 'string', description: 'Directory to search under; default "."'}},
  },
  resultSchema: withError({
    type: 'object',
    required: ['files', 'truncated'],
    properties: {files: {type: 'array', items: {type: 'string'}}, truncated: {type: 'boolean'}},
  }),
  mutates: false,
  async run(args, place) {
    try {
      const dir = directoryOf(place, args['path'] as string | undefined)
      const all: string[] = []
      const complete = walk(place, dir, all, 20000)
      // A glob is compiled to a regular expression, and one with groups can backtrack for hours: matched in the worker.
      const found = await inWorker<{files: string[]}>(
        {...NO_SEARCH, find: true, glob: args['pattern'] as string, dir, files: all.map((file) => ({file, full: ''}))},
        place.signal,
      )
      if (typeof found === 'string') return failed(found)
      const {files} = found
      const truncated = files.length > MAX_LIST || !complete
      return {ok: true, result: {files: files.slice(0, MAX_LIST), truncated}, summary: `${files.length} file(s) match ${args['pattern'] as string}`}
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}
