/**
 * Aider-style SEARCH/REPLACE blocks (seed 004 §6): a file path on its own line, then
 *
 *   <<<<<<< SEARCH
 *   old lines
 *   =======
 *   new lines
 *   >>>>>>> REPLACE
 *
 * An empty SEARCH creates the file (or appends to an empty one).
 */
import {PipeError} from '../errors.js'

export interface EditBlock {
  path: string
  search: string
  replace: string
  /** 1-based line of the block's SEARCH marker in the edit text. */
  line: number
}

const SEARCH = /^<{5,9} SEARCH\s*$/
const DIVIDER = /^={5,9}\s*$/
const REPLACE = /^>{5,9} REPLACE\s*$/

export function parseBlocks(text: string): EditBlock[] {
  const lines = text.replace(/\r\n?/g, '\n').split('\n')
  const blocks: EditBlock[] = []
  let lastPath: string | undefined
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (!SEARCH.test(line)) continue
    // The path is the closest non-empty line above that is not a fence or a marker.
    let path: string | undefined
    for (let j = i - 1; j >= 0; j--) {
      const candidate = lines[j]!.trim().replace(/^`+\w*$/, '')
      if (candidate === '') continue
      if (REPLACE.test(candidate)) break
      path = candidate.replace(/^[#*`\s]+|[*`:\s]+$/g, '')
      break
    }
    path ??= lastPath
    if (!path)
      throw new PipeError('E_INVALID_ARGS', `edit block at line ${i + 1} names no file (put the path on the line above "<<<<<<< SEARCH")`, {
        hint: 'Each block is: the file path on its own line, <<<<<<< SEARCH, the old lines, =======, the new lines, >>>>>>> REPLACE.',
      })
    const search: string[] = []
    let j = i + 1
    for (; j < lines.length && !DIVIDER.test(lines[j]!); j++) search.push(lines[j]!)
    if (j >= lines.length)
      throw new PipeError('E_INVALID_ARGS', `edit block at line ${i + 1} has no "=======" divider`, {
        hint: 'Each block is: the file path on its own line, <<<<<<< SEARCH, the old lines, =======, the new lines, >>>>>>> REPLACE.',
      })
    const replace: string[] = []
    let k = j + 1
    for (; k < lines.length && !REPLACE.test(lines[k]!); k++) replace.push(lines[k]!)
    if (k >= lines.length)
      throw new PipeError('E_INVALID_ARGS', `edit block at line ${i + 1} has no ">>>>>>> REPLACE" end`, {
        hint: 'Each block is: the file path on its own line, <<<<<<< SEARCH, the old lines, =======, the new lines, >>>>>>> REPLACE.',
      })
    blocks.push({path, search: search.join('\n'), replace: replace.join('\n'), line: i + 1})
    lastPath = path
    i = k
  }
  if (blocks.length === 0)
    throw new PipeError('E_INVALID_ARGS', 'no SEARCH/REPLACE blocks found', {
      hint: 'Each block is: the file path, then <<<<<<< SEARCH, the old lines, =======, the new lines, >>>>>>> REPLACE.',
    })
  return blocks
}
