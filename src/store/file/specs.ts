/**
 * Spec versions (specs/S-YYYYMMDD-NNNN.json): immutable, content-hashed. Reading one whose hash does
 * not match is an error, never a silent repair.
 */
import path from 'node:path'
import {PipeError} from '../../errors.js'
import type {CanonicalSpec} from '../../types/spec.js'
import {createFileExclusive} from '../../util/fs.js'
import {readdir, readFile, stat} from '../../util/fs-async.js'
import {assertValid, builder, createSealed, wellFormed, type FileLayout, type WriteIntent, type WriteOptions} from './files.js'
import {allocationDay, compareIds, dayKey, formatId, ID_PATTERNS, readCounter} from './ids.js'
import {fileHash, verifySpec} from '../trail/integrity.js'
import {isObject} from '../trail/shapes.js'
import type {SpecDraft} from '../types.js'
import {buildSpec, recordText, specText} from '../trail/records.js'

export async function writeSpec(layout: FileLayout, draft: SpecDraft, now: Date, intent?: WriteIntent, options: WriteOptions = {}): Promise<CanonicalSpec> {
  const built = builder((id) => buildSpec(draft, id))
  const id = await createSealed(
    layout.idsDir,
    'S',
    () => allocationDay(layout.idsDir, 'S', now),
    (v) => layout.specFile(v),
    (v) => built(v).text,
    intent,
    options,
  )
  layout.fileHashes.set(id, fileHash(built(id).text))
  return built(id).record
}

export {specText}

/** Reads a spec version and checks its content hash: a mismatch is an error, never repaired. */
export async function readSpec(layout: FileLayout, version: string): Promise<CanonicalSpec> {
  const file = layout.specFile(version)
  const bytes = await readFile(file).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') throw new PipeError('E_NOT_FOUND', `spec version ${version} not found (${file})`)
    throw error
  })
  let parsed: unknown
  try {
    parsed = JSON.parse(bytes.toString('utf8'))
  } catch (error) {
    throw new PipeError('E_INTEGRITY', `spec version ${version} is not valid JSON (${file}): ${(error as Error).message}`, {
      hint: 'The file was changed or damaged outside pipe; restore it from a backup.',
    })
  }
  if (!isObject(parsed)) wellFormed('spec', parsed, `spec version ${version}`, file)
  const spec = parsed as CanonicalSpec
  const problems = verifySpec(spec)
  if (problems.length > 0) {
    throw new PipeError(
      'E_INTEGRITY',
      `spec version ${version} does not match its content hash (${file}: ${problems.map((p) => `${p.field}: ${p.message}`).join('; ')})`,
      {
        hint: `The file ${file} was changed after it was written; restore it, or run pipe audit verify to see all damage.`,
      },
    )
  }
  wellFormed('spec', spec, `spec version ${version}`, file)
  if (spec.meta.spec_version !== version)
    throw new PipeError('E_INTEGRITY', `spec version ${version} names ${spec.meta.spec_version} (${file})`, {
      hint: 'It was moved or changed outside pipe; run pipe audit verify to see all damage.',
    })
  layout.fileHashes.set(version, fileHash(bytes))
  return spec
}

/** Stores a complete version under its own name; an existing version is never replaced (E_CONFLICT). */
export async function putSpec(layout: FileLayout, spec: CanonicalSpec): Promise<void> {
  if (verifySpec(spec).length > 0) throw new PipeError('E_INTEGRITY', `spec version ${spec.meta.spec_version} does not match its content hash`)
  assertValid('spec', spec, `spec version ${spec.meta.spec_version}`)
  if (!(await createFileExclusive(layout.specFile(spec.meta.spec_version), recordText(spec)))) {
    throw new PipeError('E_CONFLICT', `spec version ${spec.meta.spec_version} already exists and is immutable`, {
      hint: 'A change to the spec is a new version; run a step that writes one.',
    })
  }
}

export async function listSpecVersions(layout: FileLayout): Promise<string[]> {
  const names = await readdir(layout.specsDir).catch(() => [] as string[])
  return names
    .filter((n) => n.endsWith('.json'))
    .map((n) => n.slice(0, -5))
    .filter((n) => ID_PATTERNS.spec.test(n))
    .sort(compareIds)
}

/**
 * The calendar days from tomorrow down to the oldest counted day: those a spec list must account
 * for. Null when a counted day is no calendar day (not pipe's counter) or the span passes 4,000
 * days: then the list comes from the folder.
 */
function probeDays(counted: Iterable<string>, now: Date): string[] | null {
  const sorted = [...counted].sort()
  const toDate = (day: string): Date => new Date(Date.UTC(Number(day.slice(0, 4)), Number(day.slice(4, 6)) - 1, Number(day.slice(6, 8))))
  if (sorted.length === 0 || sorted.some((day) => dayKey(toDate(day)) !== day)) return null
  const out: string[] = []
  for (let at = toDate(dayKey(new Date(now.getTime() + 86400000))); dayKey(at) >= sorted[0]!; at = new Date(at.getTime() - 86400000)) {
    if (out.length >= 4000) return null
    out.push(dayKey(at))
  }
  return out
}

/**
 * Spec versions newest first, without listing the specs folder (35,000 names at 10,000 runs): the
 * id counters in ids/ say, per day, the highest number allocated, and every number under it was
 * allocated or tried. A counter is moved before the id it names is taken (allocateId, createSealed),
 * so it is never behind a written version; a few numbers past it are still probed, for counters an
 * older pipe wrote after the fact. Numbers never written (a take lost to a crash) are skipped.
 * Without readable counters, with one far past what exists, or with versions on a day between that
 * has no counter (removed by hand), this falls back to listing the folder; versions older than the
 * oldest counter come from the folder once the counted days are listed.
 */
export async function* newestSpecVersions(layout: FileLayout, now: Date = new Date()): AsyncGenerator<string> {
  const names = await readdir(layout.idsDir).catch(() => null)
  const days = (names ?? [])
    .filter((n) => /^S-\d{8}$/.test(n))
    .sort()
    .reverse()
  const tops = new Map<string, number>()
  for (const name of days) {
    // A counter that is not a plain number in a regular file (a FIFO, a device, a folder) is not pipe's.
    const top = await readCounter(path.join(layout.idsDir, name))
    if (top === null) {
      tops.clear()
      break
    }
    tops.set(name.slice(2), top)
  }
  const exists = (version: string): Promise<boolean> =>
    stat(layout.specFile(version)).then(
      () => true,
      () => false,
    )
  const given = new Set<string>()
  // The rest of the versions, from the folder: what the counters cannot account for.
  const rest = async function* (): AsyncGenerator<string> {
    for (const v of (await listSpecVersions(layout)).reverse()) if (!given.has(v)) yield v
  }
  // Day by day, newest first: a counted day's versions from its counter down; a day between
  // without a counter is probed by its first numbers, and versions there (a counter lost or removed
  // by hand) mean the counters do not name everything, so the folder lists the rest.
  const between = probeDays(tops.keys(), now)
  if (between === null) {
    yield* rest()
    return
  }
  for (const day of [...new Set([...tops.keys(), ...between])].sort().reverse()) {
    const top = tops.get(day)
    if (top === undefined) {
      if ((await exists(formatId('S', day, 1))) || (await exists(formatId('S', day, 2)))) {
        yield* rest()
        return
      }
      continue
    }
    let n = top
    for (let probe = n + 1; probe <= n + 4; probe++) if (await exists(formatId('S', day, probe))) n = probe
    let misses = 0
    for (; n >= 1; n--) {
      const version = formatId('S', day, n)
      if (!(await exists(version))) {
        // A counter far past what exists was not written by pipe: trust the folder instead.
        if (++misses > 1000) {
          yield* rest()
          return
        }
        continue
      }
      misses = 0
      given.add(version)
      yield version
    }
  }
  // Every counted day is listed: versions of days older than the oldest counter come from the folder.
  yield* rest()
}
