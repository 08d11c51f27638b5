import {compareText} from '../util/order.js'

/** A problem found in a file, located at the node it concerns. */
export interface Diagnostic {
  file: string
  line: number
  col: number
  /** JSON path of the offending value, e.g. steps[2].next; empty for the document itself. */
  path: string
  message: string
  /** Which check found it: yaml, schema, or the name of a semantic rule. */
  rule: string
  /** Absent for errors; a warning does not make the file invalid. */
  severity?: 'warning'
}

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.col}  ${d.path || '(root)'}  ${d.severity === 'warning' ? 'warning: ' : ''}${d.message}`
}

/** Turns path segments into the dotted form users see: steps[2].on.pass */
export function formatPath(segments: ReadonlyArray<string | number>): string {
  let out = ''
  for (const segment of segments) {
    if (typeof segment === 'number') out += `[${segment}]`
    else if (/^[A-Za-z_$][\w$-]*$/.test(segment)) out += out ? `.${segment}` : segment
    else out += `[${JSON.stringify(segment)}]`
  }
  return out
}

export function sortDiagnostics(list: Diagnostic[]): Diagnostic[] {
  return [...list].sort((a, b) => compareText(a.file, b.file) || a.line - b.line || a.col - b.col || compareText(a.message, b.message))
}
