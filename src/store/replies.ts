/**
 * The store's reply cache: `replies/<hex>.json`, one file per model request pipe sent live, named by
 * the request's key (sha256 of the normalised request) and holding the request and the reply,
 * sealed like the store's other records (keyed with PIPE_AUDIT_KEY when it is set). A file whose
 * seal or name does not match is an integrity error on read, never a reply. The store does not know
 * what a request is: the provider layer computes keys and checks that a request hashes to its key.
 *
 * A reply its step found invalid (it broke the output schema) is kept, marked `rejected` with the
 * problem: it still answered a run (pipe replay --check reads it), but reuse never gives it again.
 *
 * A conversation's requests repeat every earlier message: each long message text is kept once, in
 * `replies/texts/<hex>.txt` named by its sha256, and a request refers to it (`content_sha256`), so
 * what an agent's turns store grows with what was said, not with the square of the turns. A text
 * whose bytes do not hash to its name, or that is missing, fails the reply that refers to it.
 */
import {createHash} from 'node:crypto'
import {existsSync, readFileSync} from 'node:fs'
import {readdir, readFile} from '../util/fs-async.js'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {makeDirs, writeFileAtomic} from '../util/fs.js'
import {checkRecord, sealMessage, sealRecord} from './trail/integrity.js'

export const REPLY_FORMAT = 'pipe-reply/2'
/** Every message text inline; still read. */
const REPLY_FORMAT_1 = 'pipe-reply/1'
/** Message texts at least this long are kept once, by their hash, outside the reply file. */
const SHARED_TEXT_BYTES = 1024

export interface CachedReply {
  request: unknown
  reply: unknown
  /** Why the step that got this reply found it invalid; absent for a reply that was not refused. */
  rejected?: string
}

interface ReplyFile extends CachedReply {
  format: typeof REPLY_FORMAT | typeof REPLY_FORMAT_1
  key: string
  seal: string
}

const KEY = /^sha256:[0-9a-f]{64}$/
const TEXT_REF = /^sha256:[0-9a-f]{64}$/

function sha256(text: string): string {
  return `sha256:${createHash('sha256').update(text, 'utf8').digest('hex')}`
}

type Message = Record<string, unknown>

function messagesOf(request: unknown): Message[] | null {
  const messages = (request as {messages?: unknown} | null)?.messages
  return Array.isArray(messages) && messages.every((m) => m !== null && typeof m === 'object' && !Array.isArray(m)) ? (messages as Message[]) : null
}

/** The text files a stored request refers to. */
export function textRefs(request: unknown): string[] {
  return (messagesOf(request) ?? []).map((m) => m['content_sha256']).filter((ref): ref is string => typeof ref === 'string')
}

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
    const hint = `Delete ${file} (the request is then asked again), or run with --cache off; pipe audit verify checks the store.`
    const problem = replyFileProblem(parsed, key)
    if (problem) throw new PipeError('E_INTEGRITY', `the cached reply ${file} ${problem}`, {hint})
    const request = parsed!.format === REPLY_FORMAT_1 ? parsed!.request : await this.withTexts(parsed!.request, file, hint)
    return {request, reply: parsed!.reply, ...(typeof parsed!.rejected === 'string' ? {rejected: parsed!.rejected} : {})}
  }

  textFile(ref: string): string {
    if (!TEXT_REF.test(ref)) throw new PipeError('E_INTERNAL', `not a text reference: ${ref}`)
    return path.join(this.dir, 'texts', `${ref.slice('sha256:'.length)}.txt`)
  }

  /** The request with each message's text read back from the file its hash names, checked. */
  private async withTexts(request: unknown, file: string, hint: string): Promise<unknown> {
    const messages = messagesOf(request)
    if (!messages) return request
    const whole: Message[] = []
    for (const m of messages) {
      const ref = m['content_sha256']
      if (typeof ref !== 'string') {
        whole.push(m)
        continue
      }
      const problem = this.textProblem(ref)
      if (problem) throw new PipeError('E_INTEGRITY', `the cached reply ${file} refers to a message text that ${problem}`, {hint})
      const {content_sha256: _ref, ...rest} = m
      whole.push({...rest, content: await readFile(this.textFile(ref), 'utf8')})
    }
    return {...(request as Record<string, unknown>), messages: whole}
  }

  /** What is wrong with the text a reference names (missing, or other bytes), or null. */
  textProblem(ref: string): string | null {
    if (!TEXT_REF.test(ref)) return `is named ${JSON.stringify(ref)}, not by a sha256`
    const file = this.textFile(ref)
    if (!existsSync(file)) return `is missing (${file})`
    const actual = sha256(readFileSync(file, 'utf8'))
    return actual === ref ? null : `was changed (${file} hashes to ${actual})`
  }

  /** The request with each long message text kept once, in the file its hash names. */
  private async sharingTexts(request: unknown): Promise<unknown> {
    const messages = messagesOf(request)
    if (!messages) return request
    const out: Message[] = []
    for (const m of messages) {
      const content = m['content']
      if (typeof content !== 'string' || Buffer.byteLength(content) < SHARED_TEXT_BYTES) {
        out.push(m)
        continue
      }
      const ref = sha256(content)
      const file = this.textFile(ref)
      if (this.textProblem(ref) !== null) {
        makeDirs(path.dirname(file))
        await writeFileAtomic(file, content)
      }
      const {content: _content, ...rest} = m
      out.push({...rest, content_sha256: ref})
    }
    return {...(request as Record<string, unknown>), messages: out}
  }

  async write(key: string, request: unknown, reply: unknown, rejected?: string): Promise<void> {
    const file = this.fileOf(key)
    makeDirs(this.dir)
    const stored = await this.sharingTexts(request)
    await writeFileAtomic(
      file,
      `${JSON.stringify(sealRecord({format: REPLY_FORMAT, key, request: stored, reply, ...(rejected !== undefined ? {rejected} : {})}), null, 2)}\n`,
    )
  }

  /** Every cached key, for audit. */
  async keys(): Promise<string[]> {
    const names = await readdir(this.dir).catch(() => [] as string[])
    return names
      .filter((n) => /^[0-9a-f]{64}\.json$/.test(n))
      .map((n) => `sha256:${n.slice(0, 64)}`)
      .sort()
  }
}

/** What is wrong with a reply file filed under `key`, or null when its format, name and seal hold. */
export function replyFileProblem(parsed: Partial<ReplyFile> | null, key: string): string | null {
  if (
    !parsed ||
    typeof parsed !== 'object' ||
    (parsed.format !== REPLY_FORMAT && parsed.format !== REPLY_FORMAT_1) ||
    parsed.request === undefined ||
    parsed.reply === undefined ||
    (parsed.rejected !== undefined && typeof parsed.rejected !== 'string')
  )
    return 'is not a pipe reply record'
  if (parsed.key !== key) return `is filed under ${key} but says ${String(parsed.key)}`
  const sealed = checkRecord(parsed)
  return sealed === 'ok' ? null : `fails its seal: ${sealMessage(sealed)}`
}
