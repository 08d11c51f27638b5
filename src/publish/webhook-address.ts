/** Where a webhook goes and the headers every one of pipe's POSTs carries: a spec's publication and a policy's notice alike. */
import {PipeError} from '../errors.js'

/**
 * The URL read from $urlEnv, checked to be http(s); user:password in it (which fetch refuses) moves
 * into Basic auth, as curl sends it. The caller has made the URL a secret already.
 */
export function webhookAddress(urlEnv: string, url: string, idempotencyKey: string): {url: URL; headers: Record<string, string>} {
  let parsed: URL
  try {
    parsed = new URL(url)
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not http')
  } catch {
    throw new PipeError('E_CONFIG', `$${urlEnv} is not an http(s) URL`, {hint: 'Set it to the webhook address the service gave you.'})
  }
  const headers: Record<string, string> = {'content-type': 'application/json; charset=utf-8', 'idempotency-key': idempotencyKey, 'user-agent': 'pipe/0.1'}
  if (parsed.username || parsed.password) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(parsed.username)}:${decodeURIComponent(parsed.password)}`).toString('base64')}`
    parsed.username = ''
    parsed.password = ''
  }
  return {url: parsed, headers}
}
