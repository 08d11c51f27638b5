/**
 * What pipe itself sends through a webhook target of the policy (an approvals rule's reminder):
 * one POST with an Idempotency-Key, its URL read from the target's url_env (a secret from then
 * on), the answer's status deciding. Unlike a spec's publication there is no ledger: the caller
 * records a delivered message on the run's timeline, and one that failed is tried again later.
 */
import {PipeError} from '../errors.js'
import type {NotifyTarget} from '../types/policy.js'
import {addSecretUrl, redact} from '../util/redact.js'
import {webhookAddress} from './webhook-address.js'

export interface Notice {
  /** Names the message for the receiver's deduplication: the same notice is sent with the same key. */
  key: string
  title: string
  lines: string[]
  /** The json format's fields beside event, key, title and text. */
  fields: Record<string, unknown>
}

export async function notify(name: string, target: NotifyTarget, notice: Notice, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const url = env[target.url_env]
  if (!url)
    throw new PipeError('E_CONFIG', `the webhook URL of the policy's targets.${name} is read from $${target.url_env}, which is not set`, {
      hint: `export ${target.url_env}=... where pipe runs (pipe never reads webhook URLs from the policy file).`,
    })
  addSecretUrl(url)
  const {url: parsed, headers} = webhookAddress(target.url_env, url, notice.key)
  const text = notice.lines.join('\n')
  const body =
    target.format === 'slack'
      ? {text: `${notice.title}\n${text}`.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')}
      : {event: 'approval.reminder', key: notice.key, title: notice.title, text, ...notice.fields}
  const timeoutMs = target.timeout_ms ?? 10000
  let response: Response
  try {
    response = await fetch(parsed, {method: 'POST', headers, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs)})
  } catch (error) {
    throw new PipeError('E_IO', redact(`the policy's targets.${name} (${parsed.host}) did not take the message: ${(error as Error).message}`), {
      retryable: true,
      hint: 'It is sent again by the next pipe command or worker that touches the run.',
    })
  }
  // The status decides; the body is not read, so a target that answers without end cannot fill memory.
  await response.body?.cancel().catch(() => undefined)
  if (response.status < 200 || response.status >= 300)
    throw new PipeError('E_IO', `the policy's targets.${name} (${parsed.host}) answered ${response.status}`, {
      retryable: true,
      hint: 'It is sent again by the next pipe command or worker that touches the run.',
    })
}
