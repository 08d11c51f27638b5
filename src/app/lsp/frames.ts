/**
 * The framing guard between the editor's stream and vscode-jsonrpc's reader. The reader believes
 * any Content-Length and buffers a header until its blank line: a client announcing 10 GB, or
 * sending a header that never ends, would grow the server's memory without bound. The guard reads
 * the headers itself and passes on only messages within MAX_MESSAGE_BYTES; a larger one is read
 * and thrown away as it arrives (nothing of it is held), and the server says so and goes on with
 * the next message. A header it cannot read loses the frames' boundaries for good: that ends the
 * connection (the editor restarts the server).
 */
import {Transform, type TransformCallback} from 'node:stream'
import {PipeError} from '../../errors.js'

/** The largest message body pipe lsp reads (docs/commands.md, Editor support): far above any pipeline file's. */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024
/** The largest header block: LSP's has two short fields. */
export const MAX_HEADER_BYTES = 8 * 1024

const END = Buffer.from('\r\n\r\n')
const RESTART = 'restart the language server from the editor'

export interface FrameGuard {
  /** What the reader reads: the messages within the cap, byte for byte. */
  stream: Transform
  /** Called with the announced size of each message dropped for its size. */
  onDropped(listener: (bytes: number) => void): void
  /** Called once when the stream cannot be framed any more. */
  onBroken(listener: (error: PipeError) => void): void
}

export function guardFrames(input: NodeJS.ReadableStream, maxBytes = MAX_MESSAGE_BYTES): FrameGuard {
  const dropped: Array<(bytes: number) => void> = []
  const broken: Array<(error: PipeError) => void> = []
  let header = Buffer.alloc(0)
  /** Bytes of the current body still to pass on (pass) or to throw away (skip). */
  let body = 0
  let skip = false
  let failed = false

  const fail = (error: PipeError): void => {
    failed = true
    for (const listener of broken) listener(error)
  }

  const stream = new Transform({
    transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback) {
      let rest = chunk
      while (rest.length > 0 && !failed) {
        if (body > 0) {
          const take = Math.min(body, rest.length)
          if (!skip) this.push(rest.subarray(0, take))
          body -= take
          rest = rest.subarray(take)
          continue
        }
        const joined = header.length > 0 ? Buffer.concat([header, rest]) : rest
        const end = joined.indexOf(END)
        if (end === -1) {
          if (joined.length > MAX_HEADER_BYTES) return (fail(tooLongHeader()), done())
          header = Buffer.from(joined)
          break
        }
        if (end > MAX_HEADER_BYTES) return (fail(tooLongHeader()), done())
        header = Buffer.alloc(0)
        const block = joined.subarray(0, end + END.length)
        rest = joined.subarray(end + END.length)
        const length = contentLength(block.toString('ascii'))
        if (typeof length === 'string') return (fail(unframable(length)), done())
        body = length
        skip = length > maxBytes
        if (skip) for (const listener of dropped) listener(length)
        else this.push(block)
      }
      done()
    },
  })
  input.pipe(stream)
  return {stream, onDropped: (l) => void dropped.push(l), onBroken: (l) => void broken.push(l)}
}

/** The Content-Length of a header block, or what is wrong with it. */
function contentLength(block: string): number | string {
  const lines = block.split('\r\n').filter((line) => line !== '')
  const field = lines.find((line) => /^content-length\s*:/i.test(line))
  if (field === undefined) return `a header without Content-Length (${JSON.stringify(lines[0]?.slice(0, 80) ?? '')})`
  const value = field.slice(field.indexOf(':') + 1).trim()
  if (!/^\d{1,16}$/.test(value)) return `Content-Length ${JSON.stringify(value.slice(0, 40))} is not a number of bytes`
  return Number(value)
}

function unframable(problem: string): PipeError {
  return new PipeError('E_INVALID_ARGS', `the editor sent a message pipe lsp cannot frame: ${problem}`, {
    hint: `Each message needs a Content-Length: N header (N the body's bytes) and a blank line; ${RESTART}.`,
  })
}

function tooLongHeader(): PipeError {
  return new PipeError('E_INVALID_ARGS', `the editor sent a message header longer than ${MAX_HEADER_BYTES} bytes without its blank line (Content-Length)`, {
    hint: `Each message needs a Content-Length: N header (N the body's bytes) and a blank line; ${RESTART}.`,
  })
}
