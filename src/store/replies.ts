/**
 * The store's reply cache: `replies/<hex>.json`, one file per model request pipe sent live, named by
 * the request's key (sha256 of the normalised request) and holding the request and the reply,
 * sealed like the store's other records (keyed with PIPE_AUDIT_KEY when it is set). A file whose
 * seal or name does not match is an integrity error on read, never a reply. The store does not know
 * what a request is: the provider layer computes keys and checks that a request hashes to its key.
 *
 * A reply its step found invalid (it broke the output schema) is kept, marked `rejected` with the
 * problem: it still answered a run (pipe replay --check reads it), but reuse never gives it again.
 */
import {mkdir, readdir, readFile} from '../util/fs-async.js'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {writeFileAtomic} from '../util/fs.js'
import {checkRecord, sealMessage, sealRecord} from './integrity.js'

export const REPLY_FORMAT = 'pipe-reply/1'

export interface CachedReply {
  request: unknown
  reply: unknown
  /** Why the step that got this reply found it invalid; absent for a reply that was not refused. */
  rejected?: string
}

interface ReplyFile extends CachedReply {
  format: typeof REPLY_FORMAT
  key: string
  seal: string
}

const KEY = /^sha256:[0-9a-f]{64}$/

export class ReplyCache {
  readonly dir: string

  constructor(storeRoot: string) {
    this.dir = path.join(path.resolve(storeRoot), 'replies')
  }

  fileOf(key: string): string {
    if (!KEY.test(key)) throw new PipeError('E_INTERNAL', `not a reply key: ${key}`)
    return path.join(this.dir, `${key.slice('sha256:'.length)}.json`)
  }

  /** The cached request and reply under `key`, checked (format, name, seal); null when none is cached. */
  async read(key: string): Promise<CachedReply | null> {
    const file = this.fileOf(key)
    let text: string
    try {
      text = await readFile(file, 'utf8')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
      throw error
    }
    let parsed: Partial<ReplyFile> | null = null
    try {
      parsed = JSON.parse(text) as Partial<ReplyFile>
    } catch {
      // Reported below as not a reply record.
    }
    const problem = replyFileProblem(parsed, key)
    if (problem) throw new PipeError('E_INTEGRITY', `the cached reply ${file} ${problem}`, {hint: `Delete ${file} (the request is then asked again), or run with --cache off; pipe audit verify checks the store.`})
    return {request: parsed!.request, reply: parsed!.reply, ...(typeof parsed!.rejected === 'string' ? {rejected: parsed!.rejected} : {})}
  }

  async write(key: string, request: unknown, reply: unknown, rejected?: string): Promise<void> {
    const file = this.fileOf(key)
    await mkdir(this.dir, {recursive: true})
    await writeFileAtomic(file, `${JSON.stringify(sealRecord({format: REPLY_FORMAT, key, request, reply, ...(rejected !== undefined ? {rejected} : {})}), null, 2)}\n`)
  }

  /** Every cached key, for audit. */
  async keys(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[])
    return names.filter((n) => /^[0-9a-f]{64}\.json$/.test(n)).map((n) => `sha256:${n.slice(0, 64)}`).sort()
  }
}

/** What is wrong with a reply file filed under `key`, or null when its format, name and seal hold. */
export function replyFileProblem(parsed: Partial<ReplyFile> | null, key: string): string | null {
  if (!parsed || typeof parsed !== 'object' || parsed.format !== REPLY_FORMAT || parsed.request === undefined || parsed.reply === undefined || (parsed.rejected !== undefined && typeof parsed.rejected !== 'string')) return 'is not a pipe reply record'
  if (parsed.key !== key) return `is filed under ${key} but says ${String(parsed.key)}`
  const sealed = checkRecord(parsed)
  return sealed === 'ok' ? null : `fails its seal: ${sealMessage(sealed)}`
}
