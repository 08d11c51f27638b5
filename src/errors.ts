/**
 * The one error type of pipe. Every failure a user can meet carries a code, a hint with the next
 * action, and the exit code the CLI ends with; only the top level (the command) exits.
 */
import type {ErrorCode} from './error-codes.js'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {ExitCode, exitCodeFor} from './exit-codes.js'

export type {ErrorCode} from './error-codes.js'

export interface PipeErrorOptions {
  hint?: string
  retryable?: boolean
  /** The run cannot go on until a person intervenes; it stops as blocked and resumes after. */
  blocking?: boolean
  details?: Record<string, unknown>
  cause?: unknown
}

export class PipeError extends Error {
  readonly code: ErrorCode
  readonly hint: string | undefined
  readonly retryable: boolean
  readonly blocking: boolean
  readonly details: Record<string, unknown> | undefined

  constructor(code: ErrorCode, message: string, options: PipeErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : {cause: options.cause})
    this.name = 'PipeError'
    this.code = code
    this.hint = options.hint
    this.retryable = options.retryable ?? false
    this.blocking = options.blocking ?? false
    this.details = options.details
  }

  get exitCode(): ExitCode {
    return exitCodeFor(this.code)
  }
}

/**
 * Whether `error` is a PipeError, also one from a second instance of this module (a module loaded
 * lazily through a loader that names it differently, as tsx does in the tests).
 */
export function isPipeError(error: unknown): error is PipeError {
  return error instanceof PipeError || (error instanceof Error && error.name === 'PipeError' && typeof (error as {code?: unknown}).code === 'string')
}

/** Turns anything thrown into a PipeError, keeping codes of errors that already have one. */
export function toPipeError(error: unknown): PipeError {
  if (isPipeError(error)) return error
  if (error instanceof Error) {
    const sysCode = (error as NodeJS.ErrnoException).code
    if (sysCode === 'ENOSPC' || sysCode === 'EDQUOT') return noSpace(error)
    if (typeof sysCode === 'string' && /^E[A-Z]+$/.test(sysCode)) {
      return new PipeError('E_IO', error.message, {cause: error, hint: 'Check that the path exists and is readable and writable.'})
    }
    return new PipeError('E_INTERNAL', error.message, {cause: error, hint: 'This is a bug in pipe; the log file has the stack trace.'})
  }
  return new PipeError('E_INTERNAL', String(error))
}

/**
 * A full disk (or quota) said as such, naming the file system: Node's "ENOSPC: no space left on
 * device, write" names neither, and the generic hint (check the path is writable) sends a person
 * the wrong way. A write the store makes carries its file (util/fs.ts); the device is the mount
 * point that holds it.
 */
function noSpace(error: NodeJS.ErrnoException): PipeError {
  const file = error.path ? path.resolve(error.path) : undefined
  const where = file ? mountOf(file) : undefined
  const device = where ?? (file ? path.dirname(file) : undefined)
  const what = error.code === 'EDQUOT' ? 'the disk quota is used up' : 'no space left on device'
  return new PipeError('E_IO', `${what}${device ? ` ${device}` : ''}${file ? ` (writing ${file})` : ''}`, {
    cause: error,
    hint: `Free space on ${device ?? 'the disk pipe writes to'}${device ? ` (df -h ${device} shows how much is used)` : ''}. Then a run this stopped goes on with pipe resume RUN (pipe runs list names it); anything else, run again.`,
  })
}

/** The mount point whose file system holds `file` (Linux's /proc/self/mounts), or undefined. */
function mountOf(file: string): string | undefined {
  let mounts: string
  try {
    mounts = readFileSync('/proc/self/mounts', 'utf8')
  } catch {
    return undefined
  }
  let best: string | undefined
  for (const line of mounts.split('\n')) {
    // Spaces and other characters in a mount point are written octal-escaped (\040).
    const point = line.split(' ')[1]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)))
    if (!point) continue
    const inside = point === '/' || file === point || file.startsWith(`${point}/`)
    if (inside && (best === undefined || point.length > best.length)) best = point
  }
  return best
}
