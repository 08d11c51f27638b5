/**
 * Publishing one spec version to one target, exactly once per idempotency key as far as pipe can
 * see: a key recorded as delivered is never sent again. Each attempt is written to the ledger
 * before the request goes out and again with its result, so a crash in between is found on the
 * next publish of the key: the target's `uncertain` setting says whether to send again (with the
 * same Idempotency-Key header) or to stop and ask a person. A request that went out and got no
 * answer (a timeout, a broken connection, a stopped step) is the same case, found at once.
 */
import {lstatSync, readlinkSync} from 'node:fs'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {specToMarkdown} from '../spec/markdown.js'
import {ledgerKey, type Ledger} from '../store/file/ledger.js'
import type {LedgerEntry} from '../types/ledger.js'
import type {PublishTarget} from '../types/pipeline.js'
import type {CanonicalSpec} from '../types/spec.js'
import {createFileExclusive, makeDirs, readWhole, writeFileAtomic} from '../util/fs.js'
import {addSecretUrl, redact} from '../util/redact.js'
import {realish, within} from '../util/contain.js'
import {openHeldDir, type HeldDir, type OnLink} from '../util/held-dir.js'
import {dotGitOf, gitDirOf} from '../util/git-dir.js'
import {feishuPayload, jsonPayload, slackPayload, type PublishContext} from './payloads.js'
import {webhookAddress} from './webhook-address.js'

export interface PublishOptions {
  ledger: Ledger
  target: PublishTarget
  spec: CanonicalSpec
  runId: string
  cwd: string
  user: string
  signal?: AbortSignal
  env?: NodeJS.ProcessEnv
  now?: () => Date
  hook?: (point: string) => Promise<void> | void
  /**
   * Whether a delivery whose last attempt has an unknown outcome may be sent again now. True for a
   * redrive (a resumed step, a manual publish); false for the engine's in-step retries, so an
   * unknown outcome is never resent blindly.
   */
  resendUnknown?: boolean
}

export interface PublishOutcome {
  target: string
  type: PublishTarget['type']
  key: string
  status: 'published' | 'already_published'
  external_id: string
  attempts: number
}

/** What one send came to: delivered, refused (retryable or not), or unknown (it went out; no answer came). */
type Sent =
  | {outcome: 'delivered'; externalId: string; statusCode?: number}
  | {outcome: 'failed'; retryable: boolean; statusCode?: number; error: string; code: 'E_IO' | 'E_TOOL_TIMEOUT'}
  | {outcome: 'unknown'; error: string; code: 'E_IO' | 'E_TOOL_TIMEOUT'; rethrow?: Error}

/**
 * Feature and version ids are numbered per store, so two stores used from one folder would both
 * publish F-2026-001/S-...-0001 into one directory: a store other than the default `.pipe` gets a
 * subfolder of its own, named after it.
 */
function fileTargetRoot(target: Extract<PublishTarget, {type: 'file'}>, cwd: string, storeRoot: string): string {
  const base = path.resolve(cwd, target.dir)
  const name = path.basename(storeRoot)
  return name === '.pipe' ? base : path.join(base, name)
}

/**
 * pipe writes the published files itself, outside any sandbox, so nothing a command could have
 * planted may carry them elsewhere: no part of the path below the workspace (or below the
 * target's dir, when that lies outside it) may be a symlink (`published -> .git`,
 * `published/F-2026-001 -> /etc`), and the folder may not lie in a repository's .git or in pipe's
 * store, whatever leads there. Checked before folders are made (mkdir would create them at the
 * far end of a link) and again after.
 */
/** Where the symlink check of a file target starts: the workspace, or the target's dir when that lies outside it. */
function anchorOf(cwd: string, base: string): string {
  const workspace = path.resolve(cwd)
  return within(workspace, base) ? workspace : base
}

function refuseTarget(name: string, message: string, at: string, hint: string): never {
  throw new PipeError('E_POLICY_DENIED', `the file target "${name}" ${message}`, {hint, details: {rule: 'sandbox', path: at}})
}

/** The refusal of a symlink met below `anchor`, in the words of a publish. */
function refuseLink(cwd: string, anchor: string, name: string): OnLink {
  return ({at, target}) => {
    const shown = path.relative(path.resolve(cwd), path.join(anchor, at)) || at
    refuseTarget(
      name,
      `would write through the symlink ${shown} -> ${target}`,
      shown,
      `Remove the symlink ${shown} (a command may have planted it), then pipe publish again.`,
    )
  }
}

function assertSafeDir(cwd: string, base: string, dir: string, name: string, storeRoot: string): void {
  const workspace = path.resolve(cwd)
  const anchor = anchorOf(cwd, base)
  const refuse = (message: string, at: string, hint: string): never => refuseTarget(name, message, at, hint)
  const shown = (p: string): string => path.relative(workspace, p) || p
  let part = anchor
  for (const piece of path.relative(anchor, dir).split(path.sep).filter(Boolean)) {
    part = path.join(part, piece)
    let link: string | null = null
    try {
      if (!lstatSync(part).isSymbolicLink()) continue
      link = readlinkSync(part)
    } catch {
      break
    }
    refuse(
      `would write through the symlink ${shown(part)} -> ${link}`,
      part,
      `Remove the symlink ${shown(part)} (a command may have planted it), then pipe publish again.`,
    )
  }
  const real = realish(dir)
  const dotGit = dotGitOf(workspace)
  const gitDirs = [path.join(realish(workspace), '.git'), ...(dotGit ? [realish(dotGit), realish(gitDirOf(dotGit))] : [])]
  const inGit =
    gitDirs.some((g) => within(g, real)) ||
    path
      .relative(realish(workspace), real)
      .split(path.sep)
      .some((p) => p.toLowerCase() === '.git')
  if (inGit)
    refuse(`would write into a git repository's own folder (${real})`, dir, "Point the target's dir at an ordinary folder; pipe never writes inside .git.")
  if (within(realish(path.resolve(storeRoot)), real))
    refuse(`would write into pipe's store (${real})`, dir, "Point the target's dir outside the store; the store holds only pipe's own records.")
}

async function sendFile(target: Extract<PublishTarget, {type: 'file'}>, spec: CanonicalSpec, options: PublishOptions): Promise<Sent> {
  const {cwd} = options
  const dir = path.join(fileTargetRoot(target, cwd, options.ledger.storeRoot), spec.meta.feature_id)
  const storeRoot = options.ledger.storeRoot
  const base = path.resolve(cwd, target.dir)
  assertSafeDir(cwd, base, dir, target.name, storeRoot)
  const anchor = anchorOf(cwd, base)
  // The anchor is the workspace or the dir the pipeline names: trusted as written. Below it every
  // folder is held (util/held-dir.ts), so a link swapped in after the check above is not followed.
  makeDirs(anchor)
  const held = openHeldDir(anchor, path.relative(anchor, dir), {create: true, onLink: refuseLink(cwd, anchor, target.name)})
  try {
    assertSafeDir(cwd, base, dir, target.name, storeRoot)
    return await writeSpecFiles(held, dir, target, spec, options)
  } finally {
    held.close()
  }
}

/** The spec's .json (never overwritten) and .md, in the held folder of the feature. */
async function writeSpecFiles(
  held: HeldDir,
  dir: string,
  target: Extract<PublishTarget, {type: 'file'}>,
  spec: CanonicalSpec,
  options: PublishOptions,
): Promise<Sent> {
  const {cwd} = options
  const json = `${JSON.stringify(spec, null, 2)}\n`
  const jsonFile = held.entry(`${spec.meta.spec_version}.json`)
  const shown = path.relative(cwd, path.join(dir, `${spec.meta.spec_version}.json`))
  // Exclusive create: of two stores racing for one name exactly one writes, the other compares.
  if (!(await createFileExclusive(jsonFile, json))) {
    // What holds the name is read only when it is a plain file: a planted symlink is not followed.
    const existing = readWhole(jsonFile, 64 * 1024 * 1024)?.toString('utf8')
    if (existing === undefined || lstatSync(jsonFile).isSymbolicLink()) {
      throw new PipeError(
        'E_POLICY_DENIED',
        `${shown} exists and is not a plain file (a symlink, a folder or a device): pipe neither writes through it nor reads it`,
        {
          hint: `Remove ${shown} (a command may have planted it), then pipe publish ${options.runId} --target ${target.name} again.`,
          details: {rule: 'sandbox', path: shown},
        },
      )
    }
    if (existing !== json) {
      let other = ''
      try {
        const meta = (JSON.parse(existing) as CanonicalSpec).meta
        other = ` (run ${meta.run_id}, ${meta.content_hash})`
      } catch {
        other = ''
      }
      throw new PipeError(
        'E_CONFLICT',
        `${shown} already holds a different spec${other}: another store (or an earlier store since deleted) published its own ${spec.meta.spec_version} of ${spec.meta.feature_id} there. Feature and version ids are numbered per store, and published files are never overwritten`,
        {
          hint: `Give each store a directory of its own: set a distinct dir: on target "${target.name}" for new runs, or use a store with a name of its own (--store NAME publishes under ${target.dir}/NAME); or move ${shown} away and pipe publish ${options.runId} --target ${target.name} again.`,
          details: {file: shown},
        },
      )
    }
  }
  await writeFileAtomic(held.entry(`${spec.meta.spec_version}.md`), specToMarkdown(spec))
  return {outcome: 'delivered', externalId: shown}
}

function envValue(env: NodeJS.ProcessEnv, name: string, what: string): string {
  const value = env[name]
  if (!value)
    throw new PipeError('E_CONFIG', `the ${what} is read from $${name}, which is not set`, {
      hint: `export ${name}=... before publishing (pipe never reads webhook URLs or secrets from the pipeline file).`,
    })
  // Whatever the variable is called, its value is a credential from here on.
  addSecretUrl(value)
  return value
}

/** Errors that come before a request is written: the target cannot have it, so sending again is safe. */
const NOT_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
])

function errorCode(error: unknown): string | undefined {
  const cause = (error as {cause?: {code?: unknown}}).cause
  return typeof cause?.code === 'string' ? cause.code : undefined
}

async function sendWebhook(
  target: Extract<PublishTarget, {type: 'webhook'}>,
  spec: CanonicalSpec,
  context: PublishContext,
  options: PublishOptions,
): Promise<Sent> {
  const env = options.env ?? process.env
  const {url: parsed, headers} = webhookAddress(target.url_env, envValue(env, target.url_env, 'webhook URL'), context.key)
  const secret = target.secret_env ? envValue(env, target.secret_env, 'signing secret') : undefined
  const body =
    target.format === 'feishu' ? feishuPayload(spec, context, secret) : target.format === 'slack' ? slackPayload(spec, context) : jsonPayload(spec, context)
  const timeoutMs = target.timeout_ms ?? 10000
  const timeout = AbortSignal.timeout(timeoutMs)
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout
  options.signal?.throwIfAborted()
  let response: Response
  try {
    response = await fetch(parsed, {method: 'POST', headers, body: JSON.stringify(body), signal})
  } catch (error) {
    // The request may have reached the target: these outcomes are unknown, never retried blindly.
    if (options.signal?.aborted)
      return {
        outcome: 'unknown',
        code: 'E_TOOL_TIMEOUT',
        error: `the request to ${parsed.host} was abandoned before it answered (the step was stopped)`,
        rethrow: options.signal.reason as Error,
      }
    if (timeout.aborted) return {outcome: 'unknown', code: 'E_TOOL_TIMEOUT', error: `${parsed.host} did not answer within ${timeoutMs} ms`}
    const code = errorCode(error)
    const reason = redact(`${(error as Error).message}${code ? ` (${code})` : ''}`)
    if (code && NOT_SENT.has(code)) return {outcome: 'failed', retryable: true, code: 'E_IO', error: `cannot reach ${parsed.host}: ${reason}`}
    return {outcome: 'unknown', code: 'E_IO', error: `the connection to ${parsed.host} broke before it answered: ${reason}`}
  }
  const text = redact((await answerText(response)).slice(0, 2000))
  await options.hook?.(`publish-answered:${target.name}`)
  const status = response.status
  if (status === 408 || status === 429 || status >= 500)
    return {outcome: 'failed', retryable: true, statusCode: status, code: 'E_IO', error: `${parsed.host} answered ${status}: ${text.slice(0, 300)}`}
  if (status < 200 || status >= 300)
    return {
      outcome: 'failed',
      retryable: false,
      statusCode: status,
      code: 'E_IO',
      error: `${parsed.host} refused the delivery (${status}): ${text.slice(0, 300)}`,
    }
  let json: Record<string, unknown> | null = null
  try {
    json = JSON.parse(text) as Record<string, unknown>
  } catch {
    json = null
  }
  if (target.format === 'feishu' && json && typeof json.code === 'number' && json.code !== 0) {
    // Feishu reports errors in a 200 body; 9499 and 11232 mean slow down.
    const rate = json.code === 9499 || json.code === 11232
    return {
      outcome: 'failed',
      retryable: rate,
      statusCode: status,
      code: 'E_IO',
      error: `Feishu refused the message (code ${json.code}): ${typeof json.msg === 'string' ? json.msg : JSON.stringify(json.msg ?? '')}`,
    }
  }
  const id = json && (json.id ?? json.message_id ?? (json.data as Record<string, unknown> | undefined)?.message_id)
  const externalId =
    typeof id === 'string' || typeof id === 'number' ? String(id) : (response.headers.get('location') ?? response.headers.get('x-request-id') ?? context.key)
  return {outcome: 'delivered', externalId: redact(externalId), statusCode: status}
}

/**
 * The most of a webhook's answer pipe reads: the status decides the outcome, the body only gives
 * an id or a refusal's reason (of which 2000 characters are kept). README, "Publishing", says so.
 */
export const MAX_WEBHOOK_ANSWER_BYTES = 64 * 1024

/**
 * The start of an answer's body, at most MAX_WEBHOOK_ANSWER_BYTES: a target that sends without
 * end (or a huge page) must not fill memory while timeout_ms runs. Past the limit the body is
 * cancelled, which closes the connection; the answer still counts by its status, since the target
 * has answered (failing it would send an arrived message again). A body that breaks off gives
 * what came before.
 */
async function answerText(response: Response): Promise<string> {
  if (!response.body) return ''
  const reader = (response.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let text = ''
  let room = MAX_WEBHOOK_ANSWER_BYTES
  try {
    for (;;) {
      const {done, value} = await reader.read()
      if (done) return text + decoder.decode()
      if (value.byteLength > room) {
        reader.cancel().catch(() => undefined)
        return text + decoder.decode(value.subarray(0, room))
      }
      room -= value.byteLength
      text += decoder.decode(value, {stream: true})
    }
  } catch {
    return text
  }
}

export async function publishTo(options: PublishOptions): Promise<PublishOutcome> {
  const {ledger, target, spec, runId} = options
  const now = options.now ?? (() => new Date())
  const key = ledgerKey(spec.meta.feature_id, target.name, spec.meta.spec_version)
  const hold = target.type === 'webhook' && target.uncertain === 'hold'
  const settleHint = `Check the channel; then pipe publish ${runId} --target ${target.name} --mark-delivered (it arrived) or --resend (it did not), and pipe resume ${runId}.`
  return ledger.withKey(key, async () => {
    const created = now().toISOString()
    const entry: LedgerEntry = (await ledger.read(key)) ?? {
      key,
      feature_id: spec.meta.feature_id,
      target: target.name,
      target_type: target.type,
      ...(target.type === 'webhook' ? {format: target.format} : {}),
      spec_version: spec.meta.spec_version,
      run_id: runId,
      status: 'pending',
      attempts: [],
      created_at: created,
      updated_at: created,
    }
    if (entry.status === 'delivered') {
      return {target: target.name, type: target.type, key, status: 'already_published', external_id: entry.external_id ?? key, attempts: entry.attempts.length}
    }
    const open = entry.attempts.find((a) => a.state === 'sending')
    if (open) {
      // A crash between sending and recording: the target may or may not have it.
      open.state = 'unknown'
      open.error = 'the process died after sending and before recording the answer'
      if (hold) {
        entry.status = 'uncertain'
        entry.updated_at = now().toISOString()
        await ledger.write(entry)
        throw new PipeError('E_CONFLICT', `it is unknown whether ${key} reached ${target.name}: a crash came between sending and recording`, {
          blocking: true,
          hint: settleHint,
        })
      }
    }
    if (entry.status === 'uncertain') {
      throw new PipeError('E_CONFLICT', `${key} is held as uncertain: it is unknown whether an earlier attempt reached ${target.name}`, {
        blocking: true,
        hint: settleHint,
      })
    }
    if (entry.attempts.at(-1)?.state === 'unknown' && options.resendUnknown === false) {
      // Only a redrive (pipe resume, pipe publish) sends an unknown delivery again: once per redrive.
      throw new PipeError('E_TOOL_TIMEOUT', `it is unknown whether ${key} reached ${target.name}; pipe does not send it again within the same step`, {
        blocking: true,
        hint: `pipe resume ${runId} sends it once more with the same Idempotency-Key; if it arrived, pipe publish ${runId} --target ${target.name} --mark-delivered first.`,
      })
    }
    const attempt: LedgerEntry['attempts'][number] = {n: entry.attempts.length + 1, started_at: now().toISOString(), state: 'sending', by: options.user}
    entry.attempts.push(attempt)
    entry.updated_at = attempt.started_at
    await ledger.write(entry)
    const started = Date.now()
    const context: PublishContext = {key, runId, target: target.name, publishedAt: new Date(attempt.started_at)}
    let sent: Sent
    try {
      sent = target.type === 'file' ? await sendFile(target, spec, options) : await sendWebhook(target, spec, context, options)
    } catch (error) {
      attempt.state = 'failed'
      attempt.error = redact((error as Error).message)
      attempt.finished_at = now().toISOString()
      entry.status = 'failed'
      entry.updated_at = attempt.finished_at
      await ledger.write(entry)
      throw error
    }
    await options.hook?.(`publish-sent:${target.name}`)
    attempt.finished_at = now().toISOString()
    attempt.duration_ms = Date.now() - started
    entry.updated_at = attempt.finished_at
    if (sent.outcome === 'delivered') {
      if (sent.statusCode !== undefined) attempt.status_code = sent.statusCode
      attempt.state = 'delivered'
      entry.status = 'delivered'
      entry.external_id = sent.externalId
      entry.delivered_at = attempt.finished_at
      await ledger.write(entry)
      return {target: target.name, type: target.type, key, status: 'published', external_id: sent.externalId, attempts: entry.attempts.length}
    }
    if (sent.outcome === 'unknown') {
      // Like a crash between sending and recording: follow the target's `uncertain` setting.
      attempt.state = 'unknown'
      attempt.error = sent.error
      entry.status = hold ? 'uncertain' : 'pending'
      await ledger.write(entry)
      if (sent.rethrow !== undefined) throw sent.rethrow
      throw new PipeError(sent.code, `publishing to ${target.name}: ${sent.error}, so it is unknown whether ${key} arrived`, {
        blocking: true,
        hint: hold
          ? settleHint
          : `pipe resume ${runId} sends it once more with the same Idempotency-Key (raise timeout_ms if ${target.name} is slow); if it arrived, pipe publish ${runId} --target ${target.name} --mark-delivered first.`,
        details: {key, attempt: attempt.n},
      })
    }
    if (sent.statusCode !== undefined) attempt.status_code = sent.statusCode
    attempt.state = sent.retryable ? 'retryable' : 'failed'
    attempt.error = sent.error
    entry.status = sent.retryable ? 'pending' : 'failed'
    await ledger.write(entry)
    throw new PipeError(sent.code, `publishing to ${target.name} failed: ${sent.error}`, {
      retryable: sent.retryable,
      hint: sent.retryable
        ? 'pipe retried with backoff; publish again later with pipe publish RUN.'
        : 'The target refused the payload; its answer is in the ledger (pipe ledger list).',
      details: {key, attempt: attempt.n, ...(sent.statusCode !== undefined ? {status_code: sent.statusCode} : {})},
    })
  })
}
