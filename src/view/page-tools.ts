/** The libraries a run page is drawn with (diff2html, diff, dagre), loaded when a page is built rather than when the CLI starts. */
import {diffTools} from './diff-view.js'
import {loadDagre} from './graph-svg.js'
import type {RunPageOptions} from './parts.js'

export async function pageTools(): Promise<Required<Pick<RunPageOptions, 'diff' | 'textDiff' | 'dagre'>>> {
  const [diffs, dagre] = await Promise.all([diffTools(), loadDagre()])
  return {...diffs, dagre}
}
