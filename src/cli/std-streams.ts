/**
 * Writing to stdout and stderr, and asking whether stdin and stderr are terminals. process.stdout and process.stderr are streams Node makes on first
 * use; over a pipe (a CI log, `| tee`) it makes a socket, which loads net and its bindings: ~2 ms
 * and ~1.5 MiB of every `pipe run`, for a few lines. Where a descriptor is a pipe, a socket or a file,
 * text goes to it directly and synchronously, as Node's stream does for a file and, on Linux, for a
 * pipe; a terminal or a device (or a closed descriptor) keeps Node's stream, which knows whether it is
 * a terminal. A write error other than a reader gone is handed to the stream, which reports it as it
 * always did.
 */
import {fstatSync, writeSync} from 'node:fs'
import {redact} from '../util/redact.js'

type Mode = 'direct' | 'stream' | 'gone'
const modes: Array<Mode | undefined> = []

function modeOf(fd: 1 | 2): Mode {
  let mode = modes[fd]
  if (mode === undefined) {
    try {
      const info = fstatSync(fd)
      mode = info.isFIFO() || info.isSocket() || info.isFile() ? 'direct' : 'stream'
    } catch {
      mode = 'stream'
    }
    modes[fd] = mode
  }
  return mode
}

function streamOf(fd: 1 | 2): NodeJS.WriteStream {
  return fd === 1 ? process.stdout : process.stderr
}

/** A moment's wait for a reader to drain a full non-blocking pipe. */
const cell = new Int32Array(new SharedArrayBuffer(4))

function write(fd: 1 | 2, raw: string): void {
  if (capture) return capture(fd, redact(raw))
  const mode = modeOf(fd)
  if (mode === 'gone') return
  if (mode === 'stream') {
    // Node's stream redacts (redactStandardStreams).
    streamOf(fd).write(raw)
    return
  }
  const bytes = Buffer.from(redact(raw))
  let done = 0
  while (done < bytes.length) {
    try {
      done += writeSync(fd, bytes, done)
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code
      if (code === 'EAGAIN') {
        Atomics.wait(cell, 0, 0, 1)
        continue
      }
      // A reader that closed the pipe (`pipe run ... | head`) is not an error; nothing more is written.
      if (code === 'EPIPE') {
        modes[fd] = 'gone'
        return
      }
      modes[fd] = 'stream'
      streamOf(fd).write(bytes.subarray(done))
      return
    }
  }
}

/**
 * Every byte pipe writes to stdout and stderr passes `redact`: what is written directly above, and
 * what goes through Node's streams (a command's process.stdout.write). Whatever a
 * line was composed from (a pause's reason holding a resolved secret, a store URL in a command to
 * copy, an error message), a known secret or a credential's shape never reaches the terminal or a
 * CI log. The streams stay lazy: each is wrapped when it is first made.
 */
export function redactStandardStreams(): void {
  if (streamsRedacted) return
  streamsRedacted = true
  for (const name of ['stdout', 'stderr'] as const) {
    const descriptor = Object.getOwnPropertyDescriptor(process, name)
    if (!descriptor?.get) continue
    const make = descriptor.get.bind(process) as () => NodeJS.WriteStream
    let stream: NodeJS.WriteStream | undefined
    Object.defineProperty(process, name, {
      configurable: true,
      enumerable: descriptor.enumerable ?? true,
      get(): NodeJS.WriteStream {
        if (!stream) {
          stream = make()
          redactWrites(stream)
          // A reader that closed stdout (`pipe ... | head`) is not an error: the rest is not written, as writeOut does.
          if (name === 'stdout')
            stream.on('error', (error: NodeJS.ErrnoException) => {
              if (error.code !== 'EPIPE') throw error
            })
        }
        return stream
      },
    })
  }
}

let streamsRedacted = false

function redactWrites(stream: NodeJS.WriteStream): void {
  const original = stream.write.bind(stream)
  const write = (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
    let out = chunk
    if (typeof chunk === 'string') out = redact(chunk)
    else {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8')
      const clean = redact(text)
      // Unchanged bytes are written as given (a chunk may end inside a character).
      if (clean !== text) out = clean
    }
    return (original as (chunk: string | Uint8Array, ...rest: unknown[]) => boolean)(out, ...rest)
  }
  stream.write = write
}

/** Where text for stdout (1) and stderr (2) goes instead, while a caller captures it (captureStandardStreams). */
let capture: ((fd: 1 | 2, text: string) => void) | undefined

/**
 * Sends what this process writes to stdout and stderr, redacted, to `sink` instead, until the
 * returned function is called: both the writes above and those through Node's streams. For a caller
 * that runs a command in this process and needs its output as a separate process would have given
 * it (test/helpers/pipe-here.ts); the CLI itself never captures.
 */
export function captureStandardStreams(sink: (fd: 1 | 2, text: string) => void): () => void {
  if (capture) throw new Error('stdout and stderr are captured already')
  capture = sink
  const restores = ([1, 2] as const).map((fd) => {
    const stream = streamOf(fd)
    const own = Object.getOwnPropertyDescriptor(stream, 'write')
    stream.write = (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      sink(fd, redact(typeof chunk === 'string' ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8')))
      const done = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined
      if (done) process.nextTick(done)
      return true
    }
    return () => {
      if (own) Object.defineProperty(stream, 'write', own)
      else delete (stream as {write?: unknown}).write
    }
  })
  return () => {
    capture = undefined
    for (const restore of restores) restore()
  }
}

export function writeOut(text: string): void {
  write(1, text)
}

export function writeErr(text: string): void {
  write(2, text)
}

/** Whether stdout is Node's stream (see above): only then can it emit an error event. */
export function stdoutIsStream(): boolean {
  return modeOf(1) === 'stream'
}

/** Whether stderr is a terminal, without making Node's stream where it cannot be one. */
export function stderrIsTerminal(): boolean {
  // Captured output has no terminal, whatever this process's own descriptors are.
  if (capture) return false
  return modeOf(2) === 'stream' && process.stderr.isTTY === true
}

/**
 * Whether stdin is a terminal. process.stdin is made on first read, as a stream over what fd 0 is:
 * over a file or a pipe that loads dozens of Node's modules (file streams, FileHandle and readline's
 * interface, or sockets). A terminal is a character device: only then is it made to ask.
 */
export function stdinIsTerminal(): boolean {
  // A command whose output is captured is not the one a person at this process's terminal is typing to.
  if (capture) return false
  try {
    if (!fstatSync(0).isCharacterDevice()) return false
  } catch {
    return false
  }
  return process.stdin.isTTY === true
}

/** stderr as the progress printer needs it. */
export const stderrWriter = {
  write: writeErr,
  get isTTY(): boolean {
    return stderrIsTerminal()
  },
}
