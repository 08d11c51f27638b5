/** Decoding and normalising requirement text, shared by the CLI (before a run exists) and the ingest step. */
import {PipeError} from '../errors.js'

export const DEFAULT_MAX_INPUT_BYTES = 1024 * 1024

export function decodeText(bytes: Uint8Array, what: string, maxBytes = DEFAULT_MAX_INPUT_BYTES): string {
  if (bytes.length > maxBytes) {
    throw new PipeError('E_INPUT', `${what} is ${bytes.length} bytes; the limit is ${maxBytes} bytes`, {hint: 'Trim the input, or raise resource_limits.max_input_bytes in policy.yaml.'})
  }
  if (bytes.indexOf(0) !== -1) {
    throw new PipeError('E_INPUT', `${what} is binary (it contains NUL bytes), not text`, {hint: 'Give a text file: Markdown, plain text or a chat log saved as UTF-8.'})
  }
  let text: string
  try {
    text = new TextDecoder('utf-8', {fatal: true}).decode(bytes)
  } catch {
    throw new PipeError('E_INPUT', `${what} is not valid UTF-8 text`, {hint: 'Convert it to UTF-8 first, e.g. iconv -f GBK -t UTF-8 file > file.utf8'})
  }
  const normalized = normalizeText(text)
  if (normalized.trim() === '') {
    throw new PipeError('E_INPUT', `${what} is empty`, {hint: 'Write the requirement into the file, or pass it with --text "..."'})
  }
  // Control characters other than tab and newline mean this is not prose.
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  const controls = normalized.match(/[\u0001-\u0008\u000b\u000c\u000e-\u001f\u007f]/g)?.length ?? 0
  if (controls > 0 && controls / normalized.length > 0.01) {
    throw new PipeError('E_INPUT', `${what} looks binary (${controls} control characters)`, {hint: 'Give a text file: Markdown, plain text or a chat log.'})
  }
  return normalized
}

/** LF line endings, no BOM, NFC, no trailing spaces, at most two blank lines in a row. */
export function normalizeText(text: string): string {
  return text
    .replace(/^\uFEFF/, '')
    .replace(/\r\n?/g, '\n')
    .normalize('NFC')
    .split('\n')
    .map((line) => line.replace(/[ \t]+$/, ''))
    .join('\n')
    .replace(/\n{4,}/g, '\n\n\n')
    .replace(/^\n+|\n+$/g, '')
    .concat('\n')
}
