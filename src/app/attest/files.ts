/**
 * The files pipe attest verify is given: the bundle, read whole but never past MAX_BUNDLE_BYTES (a
 * device or a file that is not an attestation cannot fill the memory), and each --subject, hashed
 * as it streams (a subject may be a release archive of many GiB, past what one read can hold).
 */
import {createHash} from 'node:crypto'
import {createReadStream, type Stats} from 'node:fs'
import {pipeline} from 'node:stream/promises'
import {PipeError} from '../../errors.js'
import {readInputFile} from '../../util/text-input.js'
import {stat} from '../../util/fs-async.js'

/** The largest bundle verify reads (docs/audit.md): pipe attest writes hashes only, a few KiB a run, MiBs for the largest. */
export const MAX_BUNDLE_BYTES = 256 * 1024 * 1024

const BUNDLE_HINT = 'Give the .intoto.jsonl file pipe attest wrote.'

export async function readBundle(file: string): Promise<string> {
  const info = await statOf(file, 'E_NOT_FOUND', BUNDLE_HINT)
  if (!info.isFile() && !info.isFIFO()) throw notAFile(file, info, BUNDLE_HINT)
  if (info.size > MAX_BUNDLE_BYTES) throw tooLarge(file, `${info.size} bytes`)
  try {
    return (await readInputFile(file, file, MAX_BUNDLE_BYTES)).toString('utf8')
  } catch (error) {
    // readInputFile speaks of requirement inputs; the limit here is the bundle's own.
    if (error instanceof PipeError && /larger than the limit/.test(error.message)) throw tooLarge(file, 'more bytes than that')
    if (error instanceof PipeError) throw new PipeError('E_NOT_FOUND', `cannot read ${file}: ${error.message}`, {hint: BUNDLE_HINT})
    throw error
  }
}

/** The sha256 (hex) of a --subject file, read as a stream. */
export async function hashSubject(file: string): Promise<string> {
  const hint = 'Name a file the run made, as it was delivered to you.'
  const info = await statOf(file, 'E_NOT_FOUND', hint, '--subject ')
  if (!info.isFile()) throw notAFile(`--subject ${file}`, info, hint)
  const hash = createHash('sha256')
  try {
    // 1 MiB reads: a GiB file's hash costs half the time of the default 64 KiB.
    await pipeline(createReadStream(file, {highWaterMark: 1024 * 1024}), hash)
  } catch (error) {
    throw new PipeError('E_IO', `cannot read --subject ${file}: ${(error as Error).message}`, {hint})
  }
  return hash.digest('hex')
}

async function statOf(file: string, code: 'E_NOT_FOUND', hint: string, what = ''): Promise<Stats> {
  try {
    return await stat(file)
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message
    throw new PipeError(code, `cannot read ${what}${file}: ${reason}`, {hint})
  }
}

function notAFile(what: string, info: Stats, hint: string): PipeError {
  const kind = info.isDirectory() ? 'a folder' : info.isCharacterDevice() || info.isBlockDevice() ? 'a device' : 'not a regular file'
  return new PipeError('E_INVALID_ARGS', `${what} is ${kind}, not a file`, {hint})
}

function tooLarge(file: string, size: string): PipeError {
  return new PipeError('E_INVALID_ARGS', `${file} is ${size}: more than the ${MAX_BUNDLE_BYTES} bytes (256 MiB) an attestation may be; nothing was checked`, {
    hint: `${BUNDLE_HINT} An attestation holds hashes only: a file this large is not one.`,
  })
}
