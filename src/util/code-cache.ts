/**
 * Scripts loaded through a V8 code cache (FILE's cache is FILE with .cjs replaced by .v8cache): the
 * bytecode of the script's functions as the build's commands left them, so a process neither parses the
 * script nor compiles the functions it calls. Two users: the standalone validators
 * (src/schema/registry.ts) and the bundles of the groups of commands, dist/cli/GROUP.cjs, that cli/boot.ts loads.
 *
 * V8 takes a cache only under the V8 version and flags it was made with (its code serializer's
 * sanity check compares both hashes, the ones cachedDataVersionTag() combines, and sets
 * cachedDataRejected), and checks nothing of the source but its length, and little of the data
 * itself: a cache made from other source of the same length runs that source's bytecode, and a byte
 * of it changed ran as changed bytecode or crashed the process. So a cache is bound to the script it
 * was made from by the script itself: when the build writes a cache it ends the script with a line
 * naming the sha256 of the whole cache file, `//# pipe-code-cache sha256:HEX`, and that line is not
 * part of the source V8 compiles. A cache is read only when its bytes are the ones the script names
 * and its first line says what it caches; any other (made from other source, damaged, not a regular
 * file) is left unread, one made under other flags V8 refuses, and the script compiles as without
 * one. The same run then answers the same; only its start-up costs more. The header names no
 * version or flags: V8's own check is the one that decides, and the loader needs no node:v8.
 *
 * The build makes the caches with a command of each group through bin/run.js (scripts/cache-code.mjs),
 * with PIPE_BUILD_CODE_CACHE naming the installation's dist/ folder: only that run keeps the scripts
 * it loads and writes their caches at its exit, and only when it succeeded. Any other value (a `1`
 * left in a user's shell) writes nothing: an ordinary command never writes into the installation.
 */
import {createRequire} from 'node:module'
import path from 'node:path'
import vm from 'node:vm'
import {readWhole, writeFileAtomicSync} from './fs.js'
import {sha256} from './hash.js'

const BUILD_ENV = 'PIPE_BUILD_CODE_CACHE'

/** Whether this process is the build's cache run for the installation whose dist/ folder is `dist`. */
export function buildingCodeCaches(dist: string): boolean {
  const value = process.env[BUILD_ENV]
  return value !== undefined && value !== '' && path.resolve(value) === path.resolve(dist)
}

export interface LoadOptions {
  /** What the cache holds, the first words of its header line: 'pipe-validator-cache 1'. */
  header: string
  /**
   * Whether the file is already a function expression, `(function (exports, require, module,
   * __filename, __dirname, ...extra) {...})`. A script that is not is wrapped as Node wraps CommonJS,
   * at the cost of a copy of its text; one that is is compiled as read.
   */
  wrapped: boolean
  /** Arguments passed after CommonJS's five (a wrapped file's own parameters). */
  extra?: readonly unknown[]
  /** Keep what writeCodeCache needs (the script and its source's hash): only the build's cache run does. */
  keep: boolean
  /** The script is ASCII only (the build made it so): decoded as latin1, a copy of its bytes, not as UTF-8. */
  ascii?: boolean
}

export interface LoadedScript {
  /** What the script left in module.exports. */
  exports: unknown
  /** Whether V8 took the code cache. */
  cached: boolean
}

/** The largest script or cache read: a file far past the CLI's bundle and its cache is not one the build wrote. */
const MAX_BYTES = 64 * 1024 * 1024

/**
 * Scripts kept for their cache to be written. Only the build's cache run keeps any: V8 already holds
 * each script's source for lazy compilation, and a second copy of the text costs a run's peak memory.
 */
const kept = new Map<string, {script: vm.Script; header: string; source: Buffer}>()

function cacheFileOf(file: string): string {
  return file.replace(/\.cjs$/, '.v8cache')
}

/** The cache file's first line: what it holds. */
const headerLine = (header: string): string => `${header}\n`

/** The line that ends a script whose cache the build wrote: the sha256 of the cache file, 64 hex digits. */
const TRAILER = '//# pipe-code-cache sha256:'
const TRAILER_BYTES = TRAILER.length + 64 + 1

/** The script's source (without its trailer line) and the cache hash the trailer names, if it has one. */
function splitTrailer(bytes: Buffer): {source: Buffer; names: string | undefined} {
  const at = bytes.length - TRAILER_BYTES
  if (at < 0 || bytes[bytes.length - 1] !== 0x0a || bytes.toString('latin1', at, at + TRAILER.length) !== TRAILER) return {source: bytes, names: undefined}
  return {source: bytes.subarray(0, at), names: `sha256:${bytes.toString('latin1', at + TRAILER.length, bytes.length - 1)}`}
}

/** The cache's V8 data when the cache file is the one the script names (V8 checks its own version and flags). */
function cacheFor(file: string, header: string, names: string | undefined): Buffer | undefined {
  if (names === undefined) return undefined
  const bytes = readWhole(cacheFileOf(file), MAX_BYTES)
  if (!bytes || sha256(bytes) !== names) return undefined
  const line = headerLine(header)
  if (bytes.length <= line.length || bytes.toString('latin1', 0, line.length) !== line) return undefined
  return bytes.subarray(line.length)
}

/**
 * A CommonJS script, through its code cache when one fits; null when the file is missing, larger
 * than 64 MiB, or not a whole script: cut short or emptied (an install or a build overwriting it
 * as a process starts) it is as good as missing, and the caller goes the way it goes without it.
 * What the script throws as it runs is thrown.
 */
export function loadScript(file: string, options: LoadOptions): LoadedScript | null {
  const compiled = compile(file, options)
  if (!compiled) return null
  const wrapper: unknown = compiled.script.runInThisContext()
  if (typeof wrapper !== 'function') return null
  const module = {exports: {} as unknown}
  const base = createRequire(file)
  ;(wrapper as (...args: unknown[]) => void)(module.exports, base, module, file, path.dirname(file), ...(options.extra ?? []))
  if (options.keep) keepForCache(file, {script: compiled.script, header: options.header, source: compiled.source})
  return {exports: module.exports, cached: compiled.cached}
}

/**
 * The script compiled, in a function of its own: the file's bytes and the cache's are garbage once it returns, before the script runs. Still held while it ran, they
 * outlived its first collections, moved to the old generation and stayed resident for the whole run.
 */
function compile(file: string, options: LoadOptions): {script: vm.Script; cached: boolean; source: Buffer} | null {
  const bytes = readWhole(file, MAX_BYTES)
  if (bytes === undefined) return null
  const {source, names} = splitTrailer(bytes)
  const cachedData = cacheFor(file, options.header, names)
  const text = source.toString(options.ascii ? 'latin1' : 'utf8')
  const wrapped = options.wrapped ? text : `(function (exports, require, module, __filename, __dirname) {${text}\n})`
  let script: vm.Script
  try {
    script = new vm.Script(wrapped, {filename: file, ...(cachedData ? {cachedData} : {})})
  } catch (error) {
    if (error instanceof SyntaxError) return null
    throw error
  }
  return {script, cached: cachedData !== undefined && !script.cachedDataRejected, source}
}

function keepForCache(file: string, entry: {script: vm.Script; header: string; source: Buffer}): void {
  if (kept.size === 0) {
    process.on('exit', (code) => {
      // Only a command that succeeded compiled the functions it calls.
      if (code !== 0) return
      try {
        for (const name of kept.keys()) writeCodeCache(name)
      } catch (error) {
        process.stderr.write(`pipe: could not write a code cache: ${(error as Error).message}\n`)
        process.exitCode = 1
      }
    })
  }
  kept.set(file, entry)
}

/**
 * Writes the code cache of a script this process loaded and kept, with the functions it compiled, and
 * ends the script with the line that names the cache; returns the cache's file.
 */
export function writeCodeCache(file: string): string {
  const entry = kept.get(file)
  if (!entry) throw new Error(`${file} was not loaded in this process to have its cache written`)
  // Renamed into place: a process starting meanwhile reads the old cache or the new one, never half
  // of one, and a symlink in its place is replaced, not written through. A build output: not synced.
  const target = cacheFileOf(file)
  const cache = Buffer.concat([Buffer.from(headerLine(entry.header), 'latin1'), entry.script.createCachedData()])
  writeFileAtomicSync(target, cache, {sync: false})
  const hex = sha256(cache).slice('sha256:'.length)
  writeFileAtomicSync(file, Buffer.concat([entry.source, Buffer.from(`${TRAILER}${hex}\n`, 'latin1')]), {sync: false})
  return target
}
