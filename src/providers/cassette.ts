/**
 * Recorded model replies. Every request is identified by its key: the sha256 of the canonical JSON
 * of the request normalised to the fields that decide the reply (model, messages, response format,
 * tools, tool choice, temperature, max tokens), after redaction, so a key never encodes a secret and
 * does not change with one.
 *
 * A cassette (`pipe run --record FILE`, `--replay FILE`) is JSON Lines: a header line, then one line
 * per request and its reply, sorted by step and key, keys sorted inside each line, nothing
 * run-specific (ids, times, hosts), so recording the same run twice gives the same bytes. Each new
 * recording rewrites the file whole (temporary file, fsync, rename) under a lock, merging what other
 * writers added meanwhile: a crash leaves the old file or the new, never a torn one, and concurrent
 * runs lose nothing.
 *
 * The store's reply cache (`<store>/replies/<hex>.json`) keeps every live reply under the same key,
 * sealed like the store's other records; `--cache reuse` answers a request it holds from it.
 */
import {createHash} from 'node:crypto'
import {existsSync} from 'node:fs'
import {readFile, stat} from '../util/fs-async.js'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {check, describeErrors} from '../schema/registry.js'
import type {Interaction} from '../types/cassette.js'
import {faultPoint} from '../util/faults.js'
import {makeDirs, writeFileAtomic} from '../util/fs.js'
import {canonicalJson} from '../util/hash.js'
import {acquireLock} from '../util/lock.js'
import {redact, redactDeep} from '../util/redact.js'
import {requestKey, requestKeyV1, requestKeyV2} from './request-key.js'
import type {ChatRequest} from './chat.js'

export const CASSETTE_FORMAT = 'pipe-cassette/3'
/** Keyed by the hash of the request as it was (ids and times included); read, and keyed again as /2. */
const CASSETTE_FORMAT_1 = 'pipe-cassette/1'
/** Keys masked every ISO time, a requirement's dates too; still read. */
const CASSETTE_FORMAT_2 = 'pipe-cassette/2'

/** The largest cassette file read (64 MiB, eight replies at their own limit): a bigger one is refused, not read into memory. */
export const MAX_CASSETTE_BYTES = 64 * 1024 * 1024

/** A limit as the messages say it (64 MiB). */
const mib = (bytes: number): string => `${bytes / (1024 * 1024)} MiB`

function cassetteTooLarge(file: string, size: number, limit: number): PipeError {
  return new PipeError('E_CONFIG', `the cassette ${file} is ${size} bytes, more than the ${mib(limit)} a cassette may hold; it was not read`, {
    hint: 'Check that --record or --replay names a cassette pipe wrote (JSON Lines), or split the recording across pipelines or tests.',
  })
}

export interface CassetteOptions {
  file: string
  mode: 'record' | 'replay'
  /** replay: a request with no recorded reply fails the step (error) or asks the live endpoint (live). */
  missing?: 'error' | 'live'
  /** replay with missing live: the replies asked live are added to the file. */
  append?: boolean
  /** record: the header's note (what produced the recording). */
  note?: string
  /**
   * The largest file read or written, MAX_CASSETTE_BYTES unless given: a seam for the tests, which
   * check the limit's behaviour on kilobytes rather than by writing 64 MiB ten times.
   */
  maxBytes?: number
}

// Keys: src/providers/request-key.ts. Re-exported: callers that record and replay name them here.
export {normaliseRequest, requestKey, stableRequest} from './request-key.js'

// The cassette file

export interface CassetteContents {
  note?: string
  interactions: Map<string, Interaction>
}

function configError(file: string, line: number, message: string, hint: string): PipeError {
  return new PipeError('E_CONFIG', `${file}:${line}: ${message}`, {hint})
}

/** Reads a cassette's text; anything that is not a cassette of this version is E_CONFIG at its line. */
export function parseCassette(text: string, file: string): CassetteContents {
  // An editor may have saved it with a byte order mark; it is not part of the first line's JSON.
  const lines = text.replace(/^\uFEFF/, '').split('\n')
  if (lines.at(-1) === '') lines.pop()
  const rerecord = `Record it again with pipe run ... --record ${file}, or restore it from version control.`
  if (lines.length === 0) throw configError(file, 1, 'the cassette is empty (no header line)', rerecord)
  const interactions = new Map<string, Interaction>()
  let note: string | undefined
  let format = CASSETTE_FORMAT
  lines.forEach((raw, i) => {
    const n = i + 1
    let value: unknown
    try {
      value = JSON.parse(raw)
    } catch (error) {
      throw configError(file, n, `not a JSON line (${(error as Error).message}); a cassette is JSON Lines`, rerecord)
    }
    const type = value !== null && typeof value === 'object' ? (value as {type?: unknown}).type : undefined
    if (i === 0) {
      const given = (value as {format?: unknown} | null)?.format
      if (type !== 'header')
        throw configError(
          file,
          n,
          `the first line is not a cassette header ({"type":"header","format":"${CASSETTE_FORMAT}",...}); is this a pipe cassette?`,
          rerecord,
        )
      if (
        typeof given === 'string' &&
        given.startsWith('pipe-cassette/') &&
        given !== CASSETTE_FORMAT &&
        given !== CASSETTE_FORMAT_2 &&
        given !== CASSETTE_FORMAT_1
      ) {
        throw configError(
          file,
          n,
          `cassette format ${given} is not one this pipe reads (it reads ${CASSETTE_FORMAT}, ${CASSETTE_FORMAT_2} and ${CASSETTE_FORMAT_1})`,
          `Use the pipe version that recorded it, or record it again with this one (pipe run ... --record ${file}).`,
        )
      }
      if (given === CASSETTE_FORMAT_1 || given === CASSETTE_FORMAT_2) format = given
    } else if (type !== 'interaction') {
      throw configError(file, n, type === 'header' ? 'a second header line' : 'not an interaction line ({"type":"interaction",...})', rerecord)
    }
    let result: ReturnType<typeof check>
    try {
      result = check('cassette', value)
    } catch (error) {
      // JSON.parse takes any depth, the schema check and the key's hash recurse: a line nested past the stack is refused, not a crash.
      if (error instanceof RangeError) throw configError(file, n, 'the line is nested too deeply to be a model request and reply', rerecord)
      throw error
    }
    if (!result.valid)
      throw configError(file, n, `does not match the cassette schema (schemas/cassette.schema.json): ${describeErrors(result.errors)}`, rerecord)
    if (i === 0) {
      note = (value as {note?: string}).note
      return
    }
    const entry = value as Interaction
    let actual: string
    let key: string
    try {
      key = requestKey(entry.request as ChatRequest)
      actual =
        format === CASSETTE_FORMAT_1
          ? requestKeyV1(entry.request as ChatRequest)
          : format === CASSETTE_FORMAT_2
            ? requestKeyV2(entry.request as ChatRequest)
            : key
    } catch (error) {
      if (error instanceof RangeError) throw configError(file, n, 'the line is nested too deeply to be a model request and reply', rerecord)
      throw error
    }
    if (actual !== entry.key)
      throw configError(file, n, `the key ${entry.key} is not the hash of the line's request (${actual}); the request was edited`, rerecord)
    // A /1 or /2 line is checked under its own key, then known by the key this version asks with (and written so when the file is next written).
    interactions.set(key, key === entry.key ? entry : {...entry, key})
  })
  return {...(note !== undefined ? {note} : {}), interactions}
}

/** The file's bytes: the header, then the interactions by step and key, each line canonical JSON. */
export function serialiseCassette(contents: CassetteContents): string {
  // The note is free text a person typed (--record-note): a key or a token= in it is kept out like any other.
  const header = {type: 'header', format: CASSETTE_FORMAT, ...(contents.note !== undefined ? {note: redact(contents.note)} : {})}
  const entries = [...contents.interactions.values()].sort((a, b) =>
    a.step === b.step ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : a.step < b.step ? -1 : 1,
  )
  // Requests and replies are redacted as they are keyed (request-key.ts, reply-transport.ts); again here, where the file is written, for what reached a line otherwise.
  return [header, ...entries].map((line) => `${canonicalJson(redactDeep(line))}\n`).join('')
}

/** A cassette opened for a session: what it held when opened, and what this session recorded into it. */
export class Cassette {
  private readonly recorded = new Map<string, Interaction>()
  private writing: Promise<void> = Promise.resolve()

  private constructor(
    readonly options: CassetteOptions,
    private readonly opened: CassetteContents | null,
    /** sha256 of the file as opened (null when it did not exist). */
    readonly sha256: string | null,
  ) {}

  static async open(options: CassetteOptions): Promise<Cassette> {
    const file = path.resolve(options.file)
    let text: string | null = null
    try {
      // Only a regular file: reading a FIFO (or a device) would wait for a writer forever.
      const info = await stat(file)
      if (!info.isFile())
        throw new PipeError('E_CONFIG', `the cassette ${file} is not a regular file (it is a ${info.isDirectory() ? 'directory' : 'FIFO, socket or device'})`, {
          hint: 'Give --record or --replay the path of a cassette file (JSON Lines).',
        })
      const limit = options.maxBytes ?? MAX_CASSETTE_BYTES
      if (info.size > limit) throw cassetteTooLarge(file, info.size, limit)
      text = await readFile(file, 'utf8')
    } catch (error) {
      if (error instanceof PipeError) throw error
      const code = (error as NodeJS.ErrnoException).code
      if (code !== 'ENOENT')
        throw new PipeError('E_CONFIG', `cannot read the cassette ${file} (${code ?? String(error)})`, {hint: 'Check the path and its permissions.'})
      if (options.mode === 'replay') {
        throw new PipeError('E_CONFIG', `the cassette ${file} does not exist`, {
          hint: `Record one first: pipe run ... --record ${options.file} (with a model endpoint), or check the path given to --replay.`,
        })
      }
    }
    // A fresh recording replaces the file whatever it held; replaying needs it whole and valid.
    const contents = text === null ? null : options.mode === 'record' ? tryParse(text, file) : parseCassette(text, file)
    return new Cassette({...options, file}, contents, text === null ? null : `sha256:${createHash('sha256').update(text).digest('hex')}`)
  }

  get file(): string {
    return this.options.file
  }

  /** Whether replies are written to the file: --record, or --replay with missing live and --record too. */
  get records(): boolean {
    return this.options.mode === 'record' || (this.options.missing === 'live' && this.options.append === true)
  }

  /** The recorded reply for a key: recorded by this session, or (replaying) held by the file. */
  lookup(key: string): Interaction | undefined {
    return this.recorded.get(key) ?? (this.options.mode === 'replay' ? this.opened?.interactions.get(key) : undefined)
  }

  /** The recordings a request of `step` could have meant, for the message about a missing one. */
  candidates(step: string): Interaction[] {
    const all = [...(this.options.mode === 'replay' ? (this.opened?.interactions.values() ?? []) : []), ...this.recorded.values()]
    return all.filter((i) => i.step === step)
  }

  steps(): string[] {
    const all = [...(this.opened?.interactions.values() ?? []), ...this.recorded.values()]
    return [...new Set(all.map((i) => i.step))].sort()
  }

  async record(entry: Interaction): Promise<void> {
    const before = this.recorded.get(entry.key)
    // One line per key; when several steps asked the same, the first in name order names it (stable whatever ran first).
    if (before && before.step <= entry.step) return
    this.recorded.set(entry.key, before ? {...before, step: entry.step} : entry)
    const next = this.writing.then(() => this.write())
    this.writing = next.catch(() => undefined)
    try {
      await next
    } catch (error) {
      // Not on disk: not this session's recording either, so that a later write does not fail on it again.
      if (!before && this.recorded.get(entry.key) === entry) this.recorded.delete(entry.key)
      throw error
    }
  }

  /**
   * Rewrites the file whole under a lock. What it holds: a fresh recording's own entries, or the
   * opened file's plus this session's; in both cases with whatever another writer added since this
   * session opened it (a key the opened file did not have).
   */
  private async write(): Promise<void> {
    const file = this.options.file
    const limit = this.options.maxBytes ?? MAX_CASSETTE_BYTES
    makeDirs(path.dirname(file))
    const release = await acquireLock(`${file}.lock`, {
      waitMs: 30000,
      busy: (h) => `the cassette ${file} is being written by process ${h.pid}`,
      hint: 'Wait for the other run to finish.',
    })
    try {
      const openedKeys = new Set(this.opened?.interactions.keys() ?? [])
      const size = existsSync(file) ? (await stat(file)).size : null
      if (size !== null && size > limit) throw cassetteTooLarge(file, size, limit)
      const onDisk = size !== null ? tryParse(await readFile(file, 'utf8'), file) : null
      const merged = new Map<string, Interaction>()
      const keepOpened = this.options.mode === 'replay'
      for (const [key, entry] of onDisk?.interactions ?? []) if (keepOpened || !openedKeys.has(key)) merged.set(key, entry)
      // Appending: what the file held when opened stays, even if it was damaged on disk since.
      if (keepOpened) for (const [key, entry] of this.opened?.interactions ?? []) if (!merged.has(key)) merged.set(key, entry)
      for (const [key, entry] of this.recorded) {
        const other = merged.get(key)
        merged.set(key, other && other.step < entry.step ? {...entry, step: other.step} : entry)
      }
      const note =
        this.options.note ??
        (keepOpened ? (onDisk?.note ?? this.opened?.note) : undefined) ??
        'recorded by pipe run --record from the replies of the model endpoint it was given'
      const text = serialiseCassette({note, interactions: merged})
      const bytes = Buffer.byteLength(text)
      // A file past the limit could never be replayed (nor recorded into again): the reply is refused instead.
      if (bytes > limit) {
        throw new PipeError(
          'E_CONFIG',
          `recording this reply would make the cassette ${file} ${bytes} bytes, more than the ${mib(limit)} a cassette may hold (it could not be replayed); the cassette was left as it was`,
          {
            hint: 'Split the recording across pipelines or tests (a cassette each), or lower provider.max_tokens.',
          },
        )
      }
      faultPoint('cassette-write')
      await writeFileAtomic(file, text)
    } finally {
      await release()
    }
  }
}

/** A file being re-recorded: its entries when it reads as a cassette, else nothing (it is replaced). */
function tryParse(text: string, file: string): CassetteContents | null {
  try {
    return parseCassette(text, file)
  } catch {
    return null
  }
}

// How a missing request differs from what was recorded

function messagesText(request: ChatRequest): string {
  return request.messages
    .map((m) => {
      const calls = m.role === 'assistant' && m.tool_calls ? m.tool_calls.map((c) => `\n(tool call ${c.function.name} ${c.function.arguments})`).join('') : ''
      return `[${m.role}${m.role === 'tool' ? ` ${m.tool_call_id}` : ''}]\n${m.content ?? ''}${calls}`
    })
    .join('\n')
}

const FIELDS = ['model', 'temperature', 'max_tokens', 'response_format', 'tools', 'tool_choice'] as const

type Field = (typeof FIELDS)[number]

function differingFields(a: ChatRequest, b: ChatRequest): Field[] {
  return FIELDS.filter((f) => canonicalJson(a[f] ?? null) !== canonicalJson(b[f] ?? null))
}

/** A unified diff (recorded -> now) of the messages, and the other fields that differ. */
export async function describeDifference(recorded: ChatRequest, now: ChatRequest): Promise<string> {
  const fields = differingFields(recorded, now)
  const parts: string[] = []
  for (const f of fields) parts.push(`${f}: recorded ${canonicalJson(recorded[f] ?? null).slice(0, 200)}, now ${canonicalJson(now[f] ?? null).slice(0, 200)}`)
  const before = messagesText(recorded)
  const after = messagesText(now)
  if (before !== after) {
    const {createTwoFilesPatch} = await import('diff')
    const patch = createTwoFilesPatch('recorded', 'now', `${before}\n`, `${after}\n`, undefined, undefined, {context: 2})
    const body = patch.split('\n').slice(2).join('\n').trimEnd()
    const lines = body.split('\n')
    parts.push(`messages differ:\n${lines.length > 60 ? `${lines.slice(0, 60).join('\n')}\n... (${lines.length - 60} more diff lines)` : body}`)
  }
  return parts.join('\n')
}

/** The recorded request closest to `now` (fewest differing fields, then fewest changed message lines). */
export async function nearest(candidates: Interaction[], now: ChatRequest): Promise<Interaction | undefined> {
  if (candidates.length <= 1) return candidates[0]
  const {diffLines} = await import('diff')
  const text = messagesText(now)
  let best: {entry: Interaction; score: number} | undefined
  for (const entry of candidates) {
    const request = entry.request as ChatRequest
    const changed = diffLines(messagesText(request), text).reduce((n, c) => n + (c.added || c.removed ? (c.count ?? 1) : 0), 0)
    const score = differingFields(request, now).length * 1_000_000 + changed
    if (!best || score < best.score) best = {entry, score}
  }
  return best?.entry
}
