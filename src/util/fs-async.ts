/**
 * The promise API of the file system, made from node:fs's callback functions. node:fs/promises
 * loads some 25 of Node's own modules (streams, readline's interface, watchers) that this Node
 * compiles from source in every process (bench/README.md, "Costs measured for choices in the code"), for a run that calls a
 * dozen of its functions. Same calls, same results and errors; `open` (a FileHandle) still comes from
 * node:fs/promises, loaded on its first use.
 */
import * as fs from 'node:fs'
import {createRequire} from 'node:module'
import {promisify} from 'node:util'

export const readFile = promisify(fs.readFile)
export const writeFile = promisify(fs.writeFile)
export const stat = promisify(fs.stat)
export const mkdir = promisify(fs.mkdir)
export const readdir = promisify(fs.readdir)
export const rename = promisify(fs.rename)
export const rm = promisify(fs.rm)
export const rmdir = promisify(fs.rmdir)
export const unlink = promisify(fs.unlink)
export const realpath = promisify(fs.realpath)
export const mkdtemp = promisify(fs.mkdtemp)
export const cp = promisify(fs.cp) as (source: string, destination: string, options?: fs.CopyOptions) => Promise<void>

type Promises = typeof import('node:fs/promises')

export const open: Promises['open'] = (...args) => (createRequire(import.meta.url)('node:fs/promises') as Promises).open(...args)

/**
 * node:child_process, on first use: it brings net, dgram and Node's streams with it, ~3–4 ms of a
 * process that runs no child (pipe validate, a run whose steps start none; bench/README.md, "Issue
 * 38: a bundle per group of commands"). eslint refuses an import of it elsewhere (its types excepted).
 */
export const childProcess = (): typeof import('node:child_process') =>
  createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process')
