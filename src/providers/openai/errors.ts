/** Turns the openai client's errors into pipe errors: what can be retried, what cannot, and what to do. */
import {isPipeError, PipeError} from '../../errors.js'
import {redact} from '../../util/redact.js'

interface ApiErrorLike {
  status?: number
  message?: string
  name?: string
  constructor: {name: string}
}

/** A PipeError the transport raised (a reply over the size limit), also when the client wrapped it as a cause. */
function pipeErrorIn(raw: unknown): PipeError | null {
  for (let error = raw, depth = 0; error && depth < 5; error = (error as {cause?: unknown}).cause, depth++) if (isPipeError(error)) return error
  return null
}

export function fromOpenAIError(raw: unknown, endpoint: string, model: string): PipeError {
  const own = pipeErrorIn(raw)
  if (own) return own
  const error = raw as ApiErrorLike
  const kind = error.constructor?.name ?? ''
  // The first line, and not all of it: an error reply's text is the endpoint's, of any length.
  const first = redact(String(error.message ?? raw)).split('\n')[0]!
  const message = first.length > 1000 ? `${first.slice(0, 1000)}… (${first.length} chars)` : first
  if (kind === 'APIConnectionTimeoutError') {
    return new PipeError('E_TOOL_TIMEOUT', `the model endpoint ${endpoint} did not answer in time`, {
      retryable: true,
      hint: 'Raise provider.timeout_ms, or check that the endpoint is not overloaded.',
    })
  }
  if (kind === 'APIConnectionError') {
    return new PipeError('E_MODEL', `cannot reach the model endpoint ${endpoint}: ${message}`, {
      retryable: true,
      hint: 'Check OPENAI_BASE_URL and that the server is running.',
    })
  }
  const status = error.status
  if (status === 401 || status === 403) {
    return new PipeError('E_CONFIG', `the model endpoint ${endpoint} refused the credentials (${status}): ${message}`, {
      hint: 'Set OPENAI_API_KEY to a key this endpoint accepts (or unset it and use --provider offline).',
      details: {status},
    })
  }
  if (status === 404) {
    return new PipeError('E_CONFIG', `the model endpoint ${endpoint} does not know model "${model}" or the path (404): ${message}`, {
      hint: 'Check provider.model in the pipeline and OPENAI_BASE_URL (it usually ends in /v1).',
      details: {status},
    })
  }
  if (status === 408 || status === 409 || status === 429 || (status !== undefined && status >= 500)) {
    return new PipeError('E_MODEL', `the model endpoint ${endpoint} answered ${status}: ${message}`, {
      retryable: true,
      hint:
        status === 429
          ? 'The endpoint is rate limiting; pipe retried with backoff. Try again later or lower the load.'
          : 'The endpoint failed; pipe retried with backoff.',
      details: {status},
    })
  }
  if (status !== undefined) {
    return new PipeError('E_MODEL', `the model endpoint ${endpoint} rejected the request (${status}): ${message}`, {
      hint: 'The request was refused as it was; see the message. Check provider settings in the pipeline.',
      details: {status},
    })
  }
  return new PipeError('E_MODEL', `model call failed: ${message}`, {hint: 'See the log for details.'})
}
