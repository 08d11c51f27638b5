/**
 * The fetch the openai client reads replies through, with a ceiling on how much of a reply body is
 * read: a broken or hostile endpoint that sends an endless or huge body must not fill memory. The
 * request is aborted (and its connection closed) as soon as the ceiling is passed.
 */
import {PipeError} from '../../errors.js'

/** The most of one model reply read over HTTP (after decompression): 8 MiB. docs/models-and-tests.md, "Using a model", says so. */
export const MAX_REPLY_BYTES = 8 * 1024 * 1024

/** An error reply is only read for its message: the rest of a longer one is dropped. */
export const MAX_ERROR_BODY_BYTES = 64 * 1024

function sizeLabel(bytes: number): string {
  return bytes % (1024 * 1024) === 0 ? `${bytes / (1024 * 1024)} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`
}

function replyTooLarge(endpoint: string, limit: number): PipeError {
  return new PipeError(
    'E_MODEL',
    `the model endpoint ${endpoint} sent a reply larger than ${sizeLabel(limit)} (the limit on one model reply); pipe stopped reading it and closed the connection`,
    {
      hint: `Check that OPENAI_BASE_URL points at a chat-completions endpoint that answers with one JSON reply; if the model really writes this much, lower provider.max_tokens. The limit is ${sizeLabel(limit)} a reply (docs/models-and-tests.md, "Using a model").`,
      details: {limit_bytes: limit},
    },
  )
}

function replyTooSlow(endpoint: string, timeoutMs: number): PipeError {
  return new PipeError('E_TOOL_TIMEOUT', `the model endpoint ${endpoint} did not finish its reply within ${timeoutMs} ms`, {
    retryable: true,
    hint: 'Raise provider.timeout_ms, or check that the endpoint is not overloaded.',
  })
}

/**
 * How fetch fails when the connection closed before any reply came: the server shut a kept-alive
 * connection (its idle timeout) just as the request went out on it, a race of the two ends' timers
 * that no client can rule out (nodejs/undici#3141), or a proxy dropped it.
 */
const CLOSED_BEFORE_REPLY = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET'])

function closedBeforeReply(error: unknown): boolean {
  const code = (error as {cause?: {code?: unknown}} | undefined)?.cause?.code
  return error instanceof TypeError && typeof code === 'string' && CLOSED_BEFORE_REPLY.has(code)
}

/**
 * A fetch whose successful replies error with `replyTooLarge` past `limit` bytes (before a byte is
 * read when Content-Length already says so), and whose error replies are cut at
 * MAX_ERROR_BODY_BYTES. With `timeoutMs`, the whole reply, body included, must arrive within it
 * (`replyTooSlow`): the openai client's own timeout ends when the headers arrive, so a body that
 * drips or stalls after them was bounded only by the step's timeout, once per attempt. A request
 * whose connection closed before any reply is sent once more, on a new connection, within the same
 * timeout: no reply means no usage to count, and a model request is one pipe may send again
 * (docs/team.md); a step that may not run twice (an agent) no longer fails on that race.
 */
export function cappedFetch(endpoint: string, limit = MAX_REPLY_BYTES, base: typeof fetch = globalThis.fetch, timeoutMs?: number): typeof fetch {
  return async (input, init) => {
    const controller = new AbortController()
    const outer = init?.signal
    if (outer?.aborted) controller.abort(outer.reason)
    else outer?.addEventListener('abort', () => controller.abort(outer.reason), {once: true})
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(replyTooSlow(endpoint, timeoutMs)), timeoutMs)
    // Never what keeps the process alive: a body still arriving has its connection for that, and one left unread must not hold the exit.
    timer?.unref()
    const settled = (): void => clearTimeout(timer)
    let response: Response
    try {
      response = await base(input, {...init, signal: controller.signal}).catch((error: unknown) => {
        if (!closedBeforeReply(error) || controller.signal.aborted) throw error
        return base(input, {...init, signal: controller.signal})
      })
    } catch (error) {
      settled()
      throw error
    }
    // A reply with no body (204, 304) cannot be given one.
    if (!response.body || [101, 204, 205, 304].includes(response.status)) {
      settled()
      return response
    }
    const ok = response.ok
    const cap = ok ? limit : MAX_ERROR_BODY_BYTES
    const declared = Number(response.headers.get('content-length') ?? NaN)
    const encoded = (response.headers.get('content-encoding') ?? 'identity') !== 'identity'
    if (ok && !encoded && declared > cap) {
      const error = replyTooLarge(endpoint, limit)
      settled()
      controller.abort(error)
      throw error
    }
    const reader = (response.body as ReadableStream<Uint8Array>).getReader()
    let seen = 0
    const body = new ReadableStream<Uint8Array>({
      async pull(stream) {
        let next: Awaited<ReturnType<typeof reader.read>>
        try {
          next = await reader.read()
        } catch (error) {
          settled()
          throw error
        }
        const {done, value} = next
        if (done) {
          settled()
          stream.close()
          return
        }
        if (seen + value.byteLength <= cap) {
          seen += value.byteLength
          stream.enqueue(value)
          return
        }
        // Past the ceiling: stop reading, and close the connection so the endpoint stops sending.
        settled()
        const error = replyTooLarge(endpoint, limit)
        controller.abort(error)
        reader.cancel(error).catch(() => undefined)
        if (ok) stream.error(error)
        else {
          stream.enqueue(value.subarray(0, cap - seen))
          seen = cap
          stream.close()
        }
      },
      cancel(reason) {
        settled()
        controller.abort(reason)
        return reader.cancel(reason)
      },
    })
    // The body is passed on decoded: the headers must no longer say how it was encoded or how long it was.
    const headers = new Headers(response.headers)
    headers.delete('content-encoding')
    headers.delete('content-length')
    return new Response(body, {status: response.status, statusText: response.statusText, headers})
  }
}
