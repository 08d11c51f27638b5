/** read_file: numbered lines of a text file of the repository, masked, within a byte budget. */
import {statSync} from 'node:fs'
import {StringDecoder} from 'node:string_decoder'
import {open} from '../../../util/fs-async.js'
import {assertPath} from '../../../policy/rules.js'
import {redact} from '../../../util/redact.js'
import {denied, failed, withError, type AgentTool} from './tool.js'

const MAX_READ_BYTES = 64 * 1024

/**
 * Lines start..end of a file as read_file shows them ("N: text", masked), at most MAX_READ_BYTES,
 * read in chunks: however big the file, or however long one line (a minified bundle), only what is
 * shown is held. A line longer than the whole budget is shown cut. 'binary' when it has a NUL byte.
 */
async function readLines(
  file: string,
  start: number,
  end: number | undefined,
): Promise<'binary' | {total: number; content: string; last: number; truncated: boolean}> {
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
      content = `${Buffer.from(next)
        .subarray(0, MAX_READ_BYTES - 64)
        .toString('utf8')
        .replace(/\uFFFD$/, '')}… [line cut]\n`
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

export const readFileTool: AgentTool = {
  name: 'read_file',
  description:
    'Read a text file of the repository, optionally lines start_line..end_line (1-based, inclusive); at most 64 KiB per call. Lines come numbered as "N: text".',
  parameters: {
    type: 'object',
    additionalProperties: false,
    required: ['path'],
    properties: {path: {type: 'string', minLength: 1}, start_line: {type: 'integer', minimum: 1}, end_line: {type: 'integer', minimum: 1}},
  },
  resultSchema: withError({
    type: 'object',
    required: ['path', 'start_line', 'end_line', 'total_lines', 'content', 'truncated'],
    properties: {
      path: {type: 'string'},
      start_line: {type: 'integer'},
      end_line: {type: 'integer'},
      total_lines: {type: 'integer'},
      content: {type: 'string'},
      truncated: {type: 'boolean'},
    },
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
      return {
        ok: true,
        result: {path: verdict.relative, start_line: start, end_line: last, total_lines: total, content, truncated},
        summary: `read ${verdict.relative} lines ${start}-${last} of ${total}`,
      }
    } catch (error) {
      return denied(error) ?? failed((error as Error).message)
    }
  },
}
