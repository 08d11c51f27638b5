/** Reading, decoding and normalising requirement text, shared by the CLI (before a run exists) and the ingest step. */
import {constants, open as openFd, close as closeFd, read as readFd, type Stats} from 'node:fs'
import {stat} from './fs-async.js'
import type {Readable} from 'node:stream'
import {PipeError} from '../errors.js'

export const DEFAULT_MAX_INPUT_BYTES = 1024 * 1024

const CHUNK = 64 * 1024
/** How long a read of a device that has no data yet waits before it looks again. */
const IDLE_POLL_MS = 25

function tooLarge(what: string, maxBytes: number): PipeError {
  return new PipeError('E_INPUT', `${what} is larger than the limit of ${maxBytes} bytes; pipe stopped reading it there`, {
    hint: 'Give a finite text file (not a device or an endless stream), trim it, or raise resource_limits.max_input_bytes in policy.yaml.',
  })
}

function interrupted(what: string): PipeError {
  return new PipeError('E_INPUT', `interrupted while reading ${what}; nothing was written`, {hint: 'Run the command again with an input that ends.'})
}

/**
 * Reads a file, FIFO or device named by the user, at most maxBytes: more is an error as soon as
 * it arrives, so /dev/urandom or an endless FIFO costs maxBytes of memory, not all of it. Nothing
 * here blocks a libuv pool thread (FIFOs and devices are opened non-blocking), because a pool
 * thread stuck in open() or read() keeps the process alive even through process.exit().
 */
export async function readInputFile(file: string, what: string, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  let info: Stats
  try {
    info = await stat(file)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    throw new PipeError('E_INPUT', code === 'ENOENT' ? `${what} not found` : `cannot read ${what} (${code})`, {
      hint: 'Check the path, or pass the requirement with --text "..." or on stdin with --input -',
    })
  }
  if (info.isDirectory()) throw new PipeError('E_INPUT', `${what} is a directory`, {hint: 'Name a text file, or pass the requirement with --text "..."'})
  if (info.isFile() && info.size > maxBytes) {
    throw new PipeError('E_INPUT', `${what} is ${info.size} bytes; the limit is ${maxBytes} bytes`, {
      hint: 'Trim the input, or raise resource_limits.max_input_bytes in policy.yaml.',
    })
  }
  if (signal?.aborted) throw interrupted(what)
  const fd = await new Promise<number>((resolve, reject) => {
    openFd(file, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY, (error, opened) => (error ? reject(error) : resolve(opened)))
  }).catch((error: NodeJS.ErrnoException) => {
    throw new PipeError('E_INPUT', `cannot read ${what} (${error.code})`, {hint: 'Check the path and its permissions.'})
  })
  // A FIFO is read through the event loop: it waits for a writer and ends when the writer closes.
  if (info.isFIFO()) {
    // node:net only here: it loads a dozen modules that reading a file never uses.
    const {Socket} = await import('node:net')
    return readStream(new Socket({fd, readable: true, writable: false}), what, maxBytes, signal)
  }
  return readFdLoop(fd, what, maxBytes, signal)
}

async function readFdLoop(fd: number, what: string, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = []
  let total = 0
  try {
    for (;;) {
      if (signal?.aborted) throw interrupted(what)
      const buffer = Buffer.allocUnsafe(Math.min(CHUNK, maxBytes + 1 - total))
      const n = await new Promise<number>((resolve, reject) => {
        readFd(fd, buffer, 0, buffer.length, null, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead)))
      }).catch(async (error: NodeJS.ErrnoException) => {
        // A device with no data yet (a terminal, a serial line): look again soon, still stoppable.
        if (error.code === 'EAGAIN' || error.code === 'EWOULDBLOCK') {
          await new Promise((resolve) => setTimeout(resolve, IDLE_POLL_MS))
          return -1
        }
        throw new PipeError('E_INPUT', `cannot read ${what} (${error.code})`, {hint: 'Check the path and its permissions.'})
      })
      if (n === 0) break
      if (n < 0) continue
      chunks.push(buffer.subarray(0, n))
      total += n
      if (total > maxBytes) throw tooLarge(what, maxBytes)
    }
  } finally {
    closeFd(fd, () => undefined)
  }
  return Buffer.concat(chunks)
}

/** Reads a stream (standard input, a FIFO) to its end, at most maxBytes, and stops it on the signal. */
export async function readStream(stream: Readable, what: string, maxBytes: number, signal?: AbortSignal): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = []
    let total = 0
    const finish = (error: PipeError | undefined): void => {
      signal?.removeEventListener('abort', onAbort)
      stream.off('data', onData).off('end', onEnd).off('error', onError)
      if (error) {
        // Keep a late error of the destroyed stream from becoming an uncaught one.
        stream.on('error', () => undefined)
        stream.destroy()
        reject(error)
      } else resolve(Buffer.concat(chunks))
    }
    const onData = (chunk: Buffer | string): void => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk
      chunks.push(bytes)
      total += bytes.length
      if (total > maxBytes) finish(tooLarge(what, maxBytes))
    }
    const onEnd = (): void => finish(undefined)
    const onError = (error: NodeJS.ErrnoException): void =>
      finish(new PipeError('E_INPUT', `cannot read ${what} (${error.code ?? error.message})`, {hint: 'Check the path and its permissions.'}))
    const onAbort = (): void => finish(interrupted(what))
    if (signal?.aborted) return onAbort()
    signal?.addEventListener('abort', onAbort, {once: true})
    stream.on('data', onData).on('end', onEnd).on('error', onError)
  })
}

export function decodeText(bytes: Uint8Array, what: string, maxBytes = DEFAULT_MAX_INPUT_BYTES): string {
  if (bytes.length > maxBytes) {
    throw new PipeError('E_INPUT', `${what} is ${bytes.length} bytes; the limit is ${maxBytes} bytes`, {
      hint: 'Trim the input, or raise resource_limits.max_input_bytes in policy.yaml.',
    })
  }
  if (bytes.indexOf(0) !== -1) {
    throw new PipeError('E_INPUT', `${what} is binary (it contains NUL bytes), not text`, {
      hint: 'Give a text file: Markdown, plain text or a chat log saved as UTF-8.',
    })
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
