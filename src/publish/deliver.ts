/**
 * Publishing one spec version to one target, exactly once per idempotency key as far as pipe can
 * see: a key recorded as delivered is never sent again. Each attempt is written to the ledger
 * before the request goes out and again with its result, so a crash in between is found on the
 * next publish of the key: the target's `uncertain` setting says whether to send again (with the
 * same Idempotency-Key header) or to stop and ask a person.
 */
import {mkdir, readFile} from 'node:fs/promises'
import path from 'node:path'
import {PipeError} from '../errors.js'
import {specToMarkdown} from '../spec/markdown.js'
import {ledgerKey, type Ledger} from '../store/ledger.js'
import type {LedgerEntry} from '../types/ledger.js'
import type {PublishTarget} from '../types/pipeline.js'
import type {CanonicalSpec} from '../types/spec.js'
import {writeFileAtomic} from '../util/fs.js'
import {redact} from '../util/redact.js'
import {feishuPayload, jsonPayload, slackPayload, type PublishContext} from './payloads.js'

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
}

export interface PublishOutcome {
  target: string
  type: PublishTarget['type']
  key: string
  status: 'published' | 'already_published'
  external_id: string
  attempts: number
}

type Sent = {ok: true; externalId: string; statusCode?: number} | {ok: false; retryable: boolean; statusCode?: number; error: string; code: 'E_IO' | 'E_TOOL_TIMEOUT' | 'E_CONFIG' | 'E_MODEL' | 'E_BUILD_FAIL'}

async function sendFile(target: Extract<PublishTarget, {type: 'file'}>, spec: CanonicalSpec, cwd: string): Promise<Sent> {
  const dir = path.resolve(cwd, target.dir, spec.meta.feature_id)
  await mkdir(dir, {recursive: true})
  const json = `${JSON.stringify(spec, null, 2)}\n`
  const jsonFile = path.join(dir, `${spec.meta.spec_version}.json`)
  const existing = await readFile(jsonFile, 'utf8').catch(() => null)
  if (existing !== null && existing !== json) {
    return {ok: false, retryable: false, code: 'E_IO', error: `${jsonFile} already holds different content for ${spec.meta.spec_version}; published files are never overwritten`}
  }
  if (existing === null) await writeFileAtomic(jsonFile, json)
  await writeFileAtomic(path.join(dir, `${spec.meta.spec_version}.md`), specToMarkdown(spec))
  return {ok: true, externalId: path.relative(cwd, jsonFile)}
}

function envValue(env: NodeJS.ProcessEnv, name: string, what: string): string {
  const value = env[name]
  if (!value) throw new PipeError('E_CONFIG', `the ${what} is read from $${name}, which is not set`, {hint: `export ${name}=... before publishing (pipe never reads webhook URLs or secrets from the pipeline file).`})
  return value
}

async function sendWebhook(target: Extract<PublishTarget, {type: 'webhook'}>, spec: CanonicalSpec, context: PublishContext, options: PublishOptions): Promise<Sent> {
  const env = options.env ?? process.env
  const url = envValue(env, target.url_env, 'webhook URL')
  let parsed: URL
  try {
    parsed = new URL(url)
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not http')
  } catch {
    throw new PipeError('E_CONFIG', `$${target.url_env} is not an http(s) URL`, {hint: 'Set it to the webhook address the service gave you.'})
  }
  const secret = target.secret_env ? envValue(env, target.secret_env, 'signing secret') : undefined
  const body = target.format === 'feishu' ? feishuPayload(spec, context, secret) : target.format === 'slack' ? slackPayload(spec, context) : jsonPayload(spec, context)
  const timeout = AbortSignal.timeout(target.timeout_ms ?? 10000)
  const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout
  let response: Response
  try {
    response = await fetch(parsed, {
      method: 'POST',
      headers: {'content-type': 'application/json; charset=utf-8', 'idempotency-key': context.key, 'user-agent': 'pipe/0.1'},
      body: JSON.stringify(body),
      signal,
    })
  } catch (error) {
    if (options.signal?.aborted) throw options.signal.reason
    if (timeout.aborted) return {ok: false, retryable: true, code: 'E_TOOL_TIMEOUT', error: `${parsed.host} did not answer within ${target.timeout_ms ?? 10000} ms`}
    return {ok: false, retryable: true, code: 'E_IO', error: `cannot reach ${parsed.host}: ${redact((error as Error).message)}`}
  }
  const text = redact((await response.text().catch(() => '')).slice(0, 2000))
  await options.hook?.(`publish-answered:${target.name}`)
  const status = response.status
  if (status === 408 || status === 429 || status >= 500) return {ok: false, retryable: true, statusCode: status, code: 'E_IO', error: `${parsed.host} answered ${status}: ${text.slice(0, 300)}`}
  if (status < 200 || status >= 300) return {ok: false, retryable: false, statusCode: status, code: 'E_IO', error: `${parsed.host} refused the delivery (${status}): ${text.slice(0, 300)}`}
  let json: Record<string, unknown> | null = null
  try {
    json = JSON.parse(text) as Record<string, unknown>
  } catch {
    json = null
  }
  if (target.format === 'feishu' && json && typeof json.code === 'number' && json.code !== 0) {
    // Feishu reports errors in a 200 body; 9499 and 11232 mean slow down.
    const rate = json.code === 9499 || json.code === 11232
    return {ok: false, retryable: rate, statusCode: status, code: 'E_IO', error: `Feishu refused the message (code ${json.code}): ${typeof json.msg === 'string' ? json.msg : JSON.stringify(json.msg ?? '')}`}
  }
  const id = json && (json.id ?? json.message_id ?? (json.data as Record<string, unknown> | undefined)?.message_id)
  const externalId = typeof id === 'string' || typeof id === 'number' ? String(id) : (response.headers.get('location') ?? response.headers.get('x-request-id') ?? context.key)
  return {ok: true, externalId, statusCode: status}
}

export async function publishTo(options: PublishOptions): Promise<PublishOutcome> {
  const {ledger, target, spec, runId} = options
  const now = options.now ?? (() => new Date())
  const key = ledgerKey(spec.meta.feature_id, target.name, spec.meta.spec_version)
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
      if (target.type === 'webhook' && target.uncertain === 'hold') {
        entry.status = 'uncertain'
        entry.updated_at = now().toISOString()
        await ledger.write(entry)
        throw new PipeError('E_CONFLICT', `it is unknown whether ${key} reached ${target.name}: a crash came between sending and recording`, {
          blocking: true,
          hint: `Check the channel; then pipe publish ${runId} --target ${target.name} --resend, or --mark-delivered, and pipe resume ${runId}.`,
        })
      }
    }
    if (entry.status === 'uncertain') {
      throw new PipeError('E_CONFLICT', `${key} is held as uncertain (a crash came between sending and recording)`, {blocking: true, hint: `Check the channel; then pipe publish ${runId} --target ${target.name} --resend, or --mark-delivered.`})
    }
    const attempt: LedgerEntry['attempts'][number] = {n: entry.attempts.length + 1, started_at: now().toISOString(), state: 'sending', by: options.user}
    entry.attempts.push(attempt)
    entry.updated_at = attempt.started_at
    await ledger.write(entry)
    const started = Date.now()
    const context: PublishContext = {key, runId, target: target.name, publishedAt: new Date(attempt.started_at)}
    let sent: Sent
    try {
      sent = target.type === 'file' ? await sendFile(target, spec, options.cwd) : await sendWebhook(target, spec, context, options)
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
    if (sent.statusCode !== undefined) attempt.status_code = sent.statusCode
    entry.updated_at = attempt.finished_at
    if (sent.ok) {
      attempt.state = 'delivered'
      entry.status = 'delivered'
      entry.external_id = sent.externalId
      entry.delivered_at = attempt.finished_at
      await ledger.write(entry)
      return {target: target.name, type: target.type, key, status: 'published', external_id: sent.externalId, attempts: entry.attempts.length}
    }
    attempt.state = sent.retryable ? 'retryable' : 'failed'
    attempt.error = sent.error
    entry.status = sent.retryable ? 'pending' : 'failed'
    await ledger.write(entry)
    throw new PipeError(sent.code, `publishing to ${target.name} failed: ${sent.error}`, {
      retryable: sent.retryable,
      hint: sent.retryable ? 'pipe retried with backoff; publish again later with pipe publish RUN.' : 'The target refused the payload; its answer is in the ledger (pipe ledger list).',
      details: {key, attempt: attempt.n, ...(sent.statusCode !== undefined ? {status_code: sent.statusCode} : {})},
    })
  })
}
