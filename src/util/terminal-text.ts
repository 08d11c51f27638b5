/**
 * Text pipe did not write itself (model replies, spec content, messages, answers, names, paths,
 * command output) is shown to people through these functions, so that it cannot drive their
 * terminal: an escape sequence could clear the screen, move the cursor to forge a line, set the
 * window title, write the clipboard (OSC 52) or hide a link (OSC 8); a bidi override reorders what
 * is shown (the "Trojan Source" trick). Such characters are shown escaped (`\x1b`, `\u202e`), not
 * dropped, so nothing is hidden and nothing is lost. This is for display only: stored records,
 * hashes and what is published keep the original text, and --json prints it exactly.
 *
 * pipe's own styling (the colours of progress lines) is added after its values went through here.
 * A backslash is left as it is, so running text through twice changes nothing.
 */

// C0 controls, DEL and C1 controls; bidi embeddings, overrides and isolates.
// eslint-disable-next-line no-control-regex
const UNSAFE_BLOCK = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/g
// The same, and in a one-line field also line breaks and tabs (a newline would forge a line of its own).
// eslint-disable-next-line no-control-regex
const UNSAFE_LINE = /[\u0000-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/g

const NAMED: Record<string, string> = {'\n': '\\n', '\r': '\\r', '\t': '\\t'}

function escape(char: string): string {
  const named = NAMED[char]
  if (named) return named
  const code = char.charCodeAt(0)
  return code <= 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`
}

/** Text of several lines made safe to print: newlines and tabs stay, every other control is shown escaped. */
export function visible(text: string): string {
  return text.replace(UNSAFE_BLOCK, escape)
}

/** A value shown inside one line (a name, a reason, a message in a table): line breaks and tabs are escaped too. */
export function visibleLine(value: unknown): string {
  return String(value).replace(UNSAFE_LINE, escape)
}

// What JSON.stringify leaves as it is but a terminal may act on: DEL, C1 controls, bidi controls,
// and the line and paragraph separators. JSON escapes C0 controls itself.
const UNSAFE_IN_JSON = /[\u007F-\u009F\u2028\u2029\u202A-\u202E\u2066-\u2069]/g

/**
 * A JSON document for stdout: JSON.stringify's text with the characters above written as \uXXXX
 * escapes. They can only occur inside strings, where the escape means the same character, so the
 * document parses to exactly the same value.
 */
export function jsonText(value: unknown, indent = 2): string {
  return String(JSON.stringify(value, null, indent)).replace(UNSAFE_IN_JSON, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * A template for one line of a view: every interpolated value goes through visibleLine, the
 * template's own text is pipe's and stays as written. A nested template's text is pipe's too,
 * and passes unchanged (it holds no control characters).
 */
export function line(strings: TemplateStringsArray, ...values: unknown[]): string {
  let out = strings[0] ?? ''
  for (let i = 0; i < values.length; i++) out += visibleLine(values[i]) + (strings[i + 1] ?? '')
  return out
}

/**
 * The first line of a message that may run to many (a cassette miss carries a diff), with a note
 * saying how many lines were left out and where they are (`where`: "below", a command). A message
 * is shown in full once, by the error channel; the lines that mention it again keep to one line.
 */
export function firstLine(text: string, where: string): string {
  const lines = text.split('\n')
  if (lines.length <= 1) return text
  return `${lines[0]} […${lines.length - 1} more line(s): ${where}]`
}
